"""Retrieval quality on the LiveMCPBench tasks: BM25, dense, two-level and hybrid side by side.

``python -m bench retrieval`` (or ``python -m bench.retrieval [--tools-json F] [--annotations F]
[--home DIR] [--json OUT]``)

Corpus: LiveMCPBench's own snapshot of 527 tools (``import-livemcpbench``), embedded into a
Chroma index under ``--home`` (reused between runs; only changes are re-embedded).
Queries: each task's ``Question``. Relevant: the tool names annotated in ``Annotator Metadata ->
Tools`` (``1. get-weread-rank``), matched by tool name (a name several servers share counts
once). Tasks none of whose annotated tools is in the snapshot are left out and counted.

A second table uses the 12 ``route`` queries the paper's agent actually wrote (``<tool_assistant>``
form, in ``sample_trajectories.json``) against the annotated tools of their task.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from index.console import HelpFormatter
from index.errors import CopilotError
from index.livemcpbench import load_livemcpbench
from index.ranking import METHODS, Method
from index.settings import CopilotSettings, livemcpbench_dir
from index.tool_index import ToolIndex

SHARED = livemcpbench_dir()
DEFAULT_TOOLS = SHARED / "tools" / "LiveMCPTool" / "tools.json"
DEFAULT_ANNOTATIONS = SHARED / "annotated_data" / "all_annotations.json"
DEFAULT_TRAJECTORIES = SHARED / "sample_trajectories.json"
CUTOFFS = (3, 5, 10)
_NUMBERED = re.compile(r"^\s*\d+[.)]\s*")


@dataclass(frozen=True)
class Task:
    task_id: str
    query: str
    relevant: frozenset[str]


def annotated_tools(task: dict) -> list[str]:
    text = str((task.get("Annotator Metadata") or {}).get("Tools") or "")
    return [_NUMBERED.sub("", line).strip() for line in text.splitlines() if line.strip()]


def load_tasks(path: Path, known_tools: set[str]) -> tuple[list[Task], int]:
    """Tasks with at least one annotated tool in the corpus, and how many were left out."""
    data = json.loads(path.read_text(encoding="utf-8"))
    tasks, skipped = [], 0
    for item in data:
        relevant = frozenset(name for name in annotated_tools(item) if name in known_tools)
        if relevant:
            tasks.append(Task(str(item["task_id"]), str(item["Question"]), relevant))
        else:
            skipped += 1
    return tasks, skipped


def route_queries(path: Path) -> list[tuple[str, str]]:
    """``(task_id, query)`` of every ``route`` call in LiveMCPBench's sample trajectories."""
    if not path.exists():
        return []
    queries = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        for message in item.get("messages") or []:
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                if function.get("name") != "route":
                    continue
                try:
                    query = json.loads(function.get("arguments") or "{}").get("query")
                except json.JSONDecodeError:
                    continue
                if isinstance(query, str) and query.strip():
                    queries.append((str(item.get("task_id")), query))
    return queries


def load_agent_queries(path: Path, tasks: dict[str, Task]) -> list[Task]:
    """The ``route`` queries in LiveMCPBench's sample trajectories, judged against their task."""
    return [
        Task(task_id, query, tasks[task_id].relevant) for task_id, query in route_queries(path) if task_id in tasks
    ]


def metrics(ranked: Sequence[str], relevant: frozenset[str]) -> dict[str, float]:
    """Recall@k, nDCG@10, MRR, hit@3 for one query (``ranked``: tool names, best first)."""
    gains: list[int] = []
    seen: set[str] = set()
    for position, name in enumerate(ranked):
        if name in relevant and name not in seen:
            seen.add(name)
            gains.append(position)
    result = {f"R@{k}": len(set(ranked[:k]) & relevant) / len(relevant) for k in CUTOFFS}
    dcg = sum(1 / math.log2(p + 2) for p in gains if p < 10)
    ideal = sum(1 / math.log2(p + 2) for p in range(min(10, len(relevant))))
    result["nDCG@10"] = dcg / ideal
    result["MRR"] = 1 / (gains[0] + 1) if gains else 0.0
    result["hit@3"] = 1.0 if gains and gains[0] < 3 else 0.0
    return result


def evaluate(index: ToolIndex, tasks: Sequence[Task], method: Method) -> dict[str, float]:
    totals: dict[str, float] = {}
    for task in tasks:
        names = [hit.tool for hit in index.search(task.query, top_k=10, method=method)]
        for key, value in metrics(names, task.relevant).items():
            totals[key] = totals.get(key, 0.0) + value
    return {key: value / len(tasks) for key, value in totals.items()}


def _table(title: str, rows: dict[str, dict[str, float]]) -> str:
    columns = [f"R@{k}" for k in CUTOFFS] + ["nDCG@10", "MRR", "hit@3"]
    lines = [title, f"{'method':<10} " + " ".join(f"{c:>8}" for c in columns)]
    for method, values in rows.items():
        lines.append(f"{method:<10} " + " ".join(f"{values[c]:>8.3f}" for c in columns))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--tools-json", type=Path, default=DEFAULT_TOOLS)
    parser.add_argument("--annotations", type=Path, default=DEFAULT_ANNOTATIONS)
    parser.add_argument("--trajectories", type=Path, default=DEFAULT_TRAJECTORIES)
    parser.add_argument("--home", type=Path, help="index home (default: COPILOT_HOME/bench/livemcpbench)")
    parser.add_argument("--json", type=Path, dest="json_out", help="also write the numbers as JSON here")
    args = parser.parse_args(argv)
    for path in (args.tools_json, args.annotations):
        if not path.exists():
            print(f"skipped: {path} not found (LiveMCPBench data is read from {SHARED}).", file=sys.stderr)
            return 0
    try:
        catalog = load_livemcpbench(args.tools_json)
        home = args.home or CopilotSettings.load().home / "bench" / "livemcpbench"
        index = ToolIndex.open(CopilotSettings(home=home))
        started = time.perf_counter()
        from index.build import progress_bar

        with progress_bar("embedding") as progress:
            report = index.sync(catalog.tools, catalog=str(args.tools_json), catalog_digest=catalog.digest(), progress=progress)
        print(f"index: {len(catalog.tools)} tools ({report.added + report.updated} embedded) in {time.perf_counter() - started:.1f} s at {home}")
        index.warm()
        tasks, skipped = load_tasks(args.annotations, {t.name for t in catalog.tools})
        rows = {method: evaluate(index, tasks, method) for method in METHODS}
        print(
            _table(
                f"\nLiveMCPBench task questions: {len(tasks)} tasks ({skipped} without an annotated tool in the snapshot), "
                f"{len(catalog.tools)} tools",
                rows,
            )
        )
        best_single = max(rows[m]["nDCG@10"] for m in METHODS if m != "hybrid")
        print(f"hybrid nDCG@10 / best other method: {rows['hybrid']['nDCG@10'] / best_single:.2f}x")
        agent_queries = load_agent_queries(args.trajectories, {t.task_id: t for t in tasks})
        agent_rows = {}
        if agent_queries:
            agent_rows = {method: evaluate(index, agent_queries, method) for method in METHODS}
            print(_table(f"\n<tool_assistant> queries written by the paper's agent: {len(agent_queries)} queries", agent_rows))
        if args.json_out:
            args.json_out.write_text(
                json.dumps({"tasks": len(tasks), "skipped": skipped, "questions": rows, "agent_queries": agent_rows}, indent=1)
            )
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
