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
from evaluation.judge.options import JudgeError
from evaluation.judge.pipeline import REJUDGE_REASONS, JudgeSummary, default_out_dir, judge_paths
from evaluation.judge.repeats import RepeatsSummary, judge_repeats, repeat_directories
from evaluation.report.tables import pct, run_broke_line, with_interval
from index.cli.console import HelpFormatter, make_console, prepare_text_io
from index.cli.log_setup import log_handler, quiet_noisy_loggers
from index.errors import CopilotError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.judge",
        description="Judge agent trajectories with LiveMCPEval and write verdicts.jsonl, report.json/.md/.html "
        "and the CSV tables tasks.csv, categories.csv, tools.csv.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "paths", nargs="+", type=Path, help="trajectory directories or files (copilot JSONL, LiveMCPBench JSON)"
    )
    add_judge_arguments(parser)
    parser.add_argument(
        "--repeats",
        action="store_true",
        help="each PATH is one repeat (a run directory) of the same agent: judge each, then report pass@k "
        "(a run made with evaluation.run --repeats is recognised without this)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    return parser


def _saved_before_stopping(summary: JudgeSummary) -> int:
    return summary.judged_now + summary.resumed


def _print_summary(summary: JudgeSummary, console: Console) -> None:
    if summary.fatal:
        # The endpoint stopped the run: no success figure (the unjudged tasks would count as
        # failures), only what is kept for the rerun; the error line itself comes last.
        if saved := _saved_before_stopping(summary):
            console.print(
                f"{saved} verdict(s) kept in {summary.out_dir / VERDICTS_FILE} ({summary.judged_now} judged now); "
                "no report written: rerun the same command to judge the rest.",
                highlight=False,
                markup=False,
            )
        return
    unjudged_ids = summary.unjudged
    unjudged = f"; {len(unjudged_ids)} not judged (left out of the rate)" if unjudged_ids else ""
    if summary.success_rate is None:
        # No verdict at all: a 0% headline would read as an agent that failed every task.
        console.print(
            f"[bold red]nothing could be judged[/]: {len(unjudged_ids)} task(s) not judged (see below), "
            f"{len(summary.missing_trajectories)} without trajectory; no success rate."
        )
    else:
        console.print(
            # success + failure: the tasks with an outcome (an unjudged one is none).
            f"[bold]{summary.success}/{summary.success + summary.failure}[/] tasks succeeded: "
            f"{with_interval(summary.success_rate, summary.ci95)}; "
            f"{summary.abstain} abstain, {len(summary.missing_trajectories)} without trajectory "
            f"(counted as failures){unjudged}"
        )
    console.print(
        f"judged {summary.judged_now} now, {summary.resumed} already done; "
        f"{summary.llm_requests} LLM requests, {summary.cache_hits} cached replies; {summary.judging_seconds:.1f}s"
    )
    if summary.rejudged:
        # Paid for again: say why, or a rerun that costs requests looks like a resume that failed.
        reasons = "; ".join(f"{count} {REJUDGE_REASONS[why]}" for why, count in sorted(summary.rejudged.items()))
        console.print(f"judged again: {reasons}", highlight=False, markup=False)
    if broke := run_broke_line(summary.run_broke):
        shown = ", ".join(list(summary.run_broke)[:5]) + (", ..." if len(summary.run_broke) > 5 else "")
        console.print(f"[yellow]warning:[/] {escape(broke)} ({escape(shown)})", highlight=False)
    for mismatch in summary.question_mismatches[:5]:
        console.print(
            f"[yellow]warning:[/] task {escape(mismatch.task_id)}: the trajectory's question differs from the task "
            f"list's; judged with the task list's (both are recorded in verdicts.jsonl and the report)\n"
            f"  task list:  {escape(mismatch.task_list[:300])}\n  trajectory: {escape(mismatch.trajectory[:300])}",
            highlight=False,
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
    failed = {failure.task_id for failure in summary.errors}
    if kept_out := [task_id for task_id in unjudged_ids if task_id not in failed]:
        # Not the endpoint's doing: a rerun alone changes nothing, the input problem above must be fixed.
        console.print(
            f"[red]{len(kept_out)} task(s) not judged because of an input problem above[/] "
            f"({escape(', '.join(kept_out[:5]))}{', ...' if len(kept_out) > 5 else ''}); fix it and rerun.",
            highlight=False,
        )
    for path in summary.report_files:
        console.print(f"wrote {path}", highlight=False)


def print_repeats(summary: RepeatsSummary, console: Console) -> None:
    report = summary.report
    if report is None:
        return
    n = report.n_repeats
    # pass@n rests on the tasks with n judged attempts only, which may be fewer than all: said.
    tasks_at_n = report.tasks_at_k.get(n)
    over = f" (over {tasks_at_n} task{'' if tasks_at_n == 1 else 's'})" if tasks_at_n else ""
    console.print(
        f"[bold]{n} repeats[/] of {report.n_tasks} tasks: pass@1 {with_interval(report.pass_at_1, report.pass_at_1_ci95)}, "
        f"pass@{n} {pct(report.pass_at_k.get(n))}, pass^{n} {pct(report.pass_hat_k.get(n))}{over}; "
        f"{report.flaky_tasks} task(s) changed outcome between repeats",
        highlight=False,
    )
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    for path in summary.report_files:
        console.print(f"wrote {path}", highlight=False)


async def judge_any(paths: Sequence[Path], options: JudgeOptions, as_repeats: bool, console: Console) -> int:
    """Judge ``paths`` as one run, or as repeats (``repeats.json`` or ``--repeats``); print the
    summary; the exit code (0 fine, 1 some tasks not judged, 2 nothing usable)."""
    directories = repeat_directories([Path(p) for p in paths], as_repeats)
    if directories is None:
        summary = await judge_paths(paths, options)
        _print_summary(summary, console)
        fatal = summary.fatal
        code = summary.exit_code
    else:
        if options.out_dir is None and as_repeats:
            raise JudgeError("--repeats: pass --out DIR for the report across the run directories.")
        out = options.out_dir or Path(paths[0]) / "judge"
        repeats = await judge_repeats(directories, options.model_copy(update={"out_dir": None}), out)
        for directory, one in zip(repeats.directories, repeats.repeats, strict=True):
            if one.fatal and not _saved_before_stopping(one):
                continue  # nothing to show for this repeat but the error line
            console.print(f"[bold]{escape(str(directory))}[/]", highlight=False)
            _print_summary(one, console)
        for directory in repeats.not_run:
            console.print(
                f"[bold]{escape(str(directory))}[/]: [yellow]not run yet[/] (no trajectory); resume the run "
                "(the same python -m evaluation.run command), then judge again.",
                highlight=False,
            )
        print_repeats(repeats, console)
        fatal = repeats.fatal
        code = repeats.exit_code
    if fatal:
        print(f"error: {fatal}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    prepare_text_io()
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[log_handler()])
    quiet_noisy_loggers()  # HTTP clients log URLs with credentials at INFO
    console = make_console(stderr=True)
    try:
        options = JudgeOptions.from_args(args)
        return anyio.run(judge_any, args.paths, options, args.repeats, console)
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        verdicts = (args.out or default_out_dir(args.paths)) / VERDICTS_FILE
        print(f"interrupted: finished verdicts are saved in {verdicts}; rerun the same command to continue.", file=sys.stderr)
        return 130


