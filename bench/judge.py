"""Judge throughput: 95 trajectories against a local endpoint that answers in 200 ms.

Wall time of the judging phase at concurrency 1 (the baseline) vs 16 (target: >= 10x faster),
then a rerun into a fresh output directory that must be served entirely by the reply cache
(zero requests).

    python -m bench judge            # or: python -m bench.judge [--tasks N] [--delay S]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

from bench.args import non_negative_float, positive_int
from evaluation.judge.options import JudgeOptions
from evaluation.judge.pipeline import judge_paths
from evaluation.llm import LLMSettings
from index.cli.console import HelpFormatter
from tests.evaluation.judge_helpers import task_entry, write_copilot_log, write_tasks
from tests.support.scripted_openai import Reply, ScriptedOpenAI

CATEGORIES = ("work", "daily", "entertainment", "financing", "travel", "shopping")


def write_trajectories(directory: Path, count: int) -> Path:
    """``count`` copilot logs plus a task list with annotated steps (one judge call per task)."""
    logs = directory / "logs"
    logs.mkdir(parents=True)
    tasks = []
    for number in range(count):
        task_id = f"task-{number:03d}"
        question = f"Benchmark question {number}: look something up and write it to a file."
        tasks.append(
            task_entry(
                task_id,
                question,
                CATEGORIES[number % len(CATEGORIES)],
                steps="1. look it up\n2. write the file",
                tools="1. search\n2. write_file",
            )
        )
        write_copilot_log(
            logs / f"{task_id}.jsonl",
            task_id,
            question,
            session_id=task_id,
            answer=f"Answer {number}",
            routes=[("search", [("web", "search")])],
            executes=[{"server": "web", "tool": "search", "params": {"q": str(number)}, "text": f"result {number}"}],
        )
    write_tasks(directory / "tasks.json", tasks)
    return logs


async def timed_run(
    llm: ScriptedOpenAI, workdir: Path, logs: Path, concurrency: int, out: str, cache: str
) -> tuple[float, int, int]:
    options = JudgeOptions(
        llm=LLMSettings(base_url=llm.base_url, api_key="bench", models=["bench-judge"], timeout=30, max_retries=0),
        tasks_file=workdir / "tasks.json",
        concurrency=concurrency,
        out_dir=workdir / out,
        cache_dir=workdir / cache,
        show_progress=False,
        write_reports=False,
    )
    before = len(llm.requests)
    summary = await judge_paths([logs], options)
    if summary.errors or summary.fatal:
        raise RuntimeError(f"judging failed: {summary.fatal or summary.errors[0].error}")
    return summary.judging_seconds, len(llm.requests) - before, summary.judged_now


#: The target: judging 10x faster with 16 requests in parallel than one at a time.
SPEEDUP_TARGET = 10.0
TARGET_CONCURRENCY = 16


def speedup_target(concurrency: int, tasks: int) -> float:
    """The speed-up to reach with ``concurrency`` requests in parallel over ``tasks`` tasks: the
    target's share of the parallelism there is (a 4-way run cannot be 10x faster)."""
    return round(SPEEDUP_TARGET * min(concurrency, tasks, TARGET_CONCURRENCY) / TARGET_CONCURRENCY, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.judge", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=HelpFormatter)
    parser.add_argument("--tasks", type=positive_int, default=95)
    parser.add_argument("--delay", type=non_negative_float, default=0.2, help="seconds the endpoint takes per reply")
    parser.add_argument("--concurrency", type=positive_int, default=16)
    args = parser.parse_args(argv)

    async def run() -> int:
        with (
            tempfile.TemporaryDirectory(prefix="bench-judge-") as tmp,
            ScriptedOpenAI(
                handler=lambda request: Reply(content="Thoughts: fine\nStatus: success", delay=args.delay)
            ) as llm,
        ):
            workdir = Path(tmp)
            logs = write_trajectories(workdir, args.tasks)
            # Each timed run has a cache of its own (a shared one answered "--concurrency 1"'s parallel
            # run from the baseline's replies: 0 requests, "95x faster"); the rerun reuses the parallel one's.
            serial, serial_requests, _ = await timed_run(llm, workdir, logs, 1, "out-serial", "cache-serial")
            parallel, parallel_requests, _ = await timed_run(
                llm, workdir, logs, args.concurrency, "out-parallel", "cache-parallel"
            )
            cached, cached_requests, rejudged = await timed_run(
                llm, workdir, logs, args.concurrency, "out-cached", "cache-parallel"
            )
        ratio = serial / parallel if parallel else float("inf")
        target = speedup_target(args.concurrency, args.tasks)
        print(f"{args.tasks} trajectories, endpoint answering in {args.delay * 1000:.0f} ms")
        print(f"concurrency  1: {serial:6.2f} s  ({serial_requests} requests)  [baseline]")
        print(
            f"concurrency {args.concurrency:2d}: {parallel:6.2f} s  ({parallel_requests} requests)  {ratio:.1f}x faster "
            f"(target >= {target:g}x{'' if target == SPEEDUP_TARGET else f': {SPEEDUP_TARGET:g}x at {TARGET_CONCURRENCY} in parallel, scaled'})"
        )
        print(f"cached rerun: {cached:6.2f} s  ({cached_requests} requests for {rejudged} verdicts; target 0)")
        return 0 if ratio >= target and parallel_requests == args.tasks and cached_requests == 0 else 1

    return anyio.run(run)


if __name__ == "__main__":
    sys.exit(main())
