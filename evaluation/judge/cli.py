"""``python -m evaluation.judge PATH...``: LiveMCPEval -- did each logged agent complete its task?

Per task: key points (the annotated ``Steps``, or extracted by the LLM with the paper's prompt
and cached), then one verdict per judge model from the task, key points, final answer and
tool-call history (``--prompt evidence`` adds the tool outputs), parsed strictly. A comma-separated
``--model`` list is a jury: majority vote, ties and no-majority go to failure.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from rich.console import Console
from rich.markup import escape

from evaluation.judge.options import VERDICTS_FILE, JudgeOptions, add_judge_arguments
from evaluation.judge.pipeline import JudgeSummary, default_out_dir, judge_paths
from index.console import make_console
from index.errors import CopilotError

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.judge",
        description="Judge agent trajectories with LiveMCPEval and write verdicts.jsonl, report.json/.md/.html.",
    )
    parser.add_argument(
        "paths", nargs="+", type=Path, help="trajectory directories or files (copilot JSONL, LiveMCPBench JSON)"
    )
    add_judge_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    return parser


def _print_summary(summary: JudgeSummary, console: Console) -> None:
    lo, hi = summary.ci95
    console.print(
        f"[bold]{summary.success}/{summary.n_tasks}[/] tasks succeeded: "
        f"{summary.success_rate:.1%} (95% CI {lo:.1%}-{hi:.1%}); "
        f"{summary.abstain} abstain, {len(summary.missing_trajectories)} without trajectory (counted as failures)"
    )
    console.print(
        f"judged {summary.judged_now} now, {summary.resumed} already done; "
        f"{summary.llm_requests} LLM requests, {summary.cache_hits} cached replies; {summary.judging_seconds:.1f}s"
    )
    if summary.problems:
        console.print(f"[yellow]{len(summary.problems)} input problem(s)[/] (skipped), e.g.:")
        for problem in summary.problems[:5]:
            console.print(f"  {problem}", markup=False, highlight=False)
    if summary.unknown_task_ids:
        console.print(
            f"[yellow]{len(summary.unknown_task_ids)} task id(s) not in the task list[/]: "
            + escape(", ".join(summary.unknown_task_ids[:5]))
        )
    for failure in summary.errors[:5]:
        # Error texts quote the endpoint's replies: "[...]" in them must print as text, not markup.
        console.print(f"[red]not judged[/] {escape(failure.task_id)}: {escape(failure.error)}", highlight=False)
    if summary.errors:
        console.print(f"[red]{len(summary.errors)} task(s) not judged[/]; rerun the same command to retry only those.")
    for path in summary.report_files:
        console.print(f"wrote {path}", highlight=False)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    console = make_console(stderr=True)
    try:
        options = JudgeOptions.from_args(args)
        summary = anyio.run(judge_paths, args.paths, options)
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        verdicts = (args.out or default_out_dir(args.paths)) / VERDICTS_FILE
        print(f"interrupted: finished verdicts are saved in {verdicts}; rerun the same command to continue.", file=sys.stderr)
        return 130
    _print_summary(summary, console)
    if summary.fatal:
        print(f"error: {summary.fatal}", file=sys.stderr)
    return summary.exit_code


