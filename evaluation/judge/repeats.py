"""Judging repeated runs: each repeat on its own, then pass@k across them.

A run made with ``--repeats N`` (``repeats.json`` names its ``repeat-k`` directories), or several
run directories of the same agent passed with ``--repeats``: every repeat is judged exactly like a
single run (its own ``judge/`` with ``verdicts.jsonl`` and ``report.*``, resumable, cached), and
the repeats report (``repeats.json``/``.md``/``.html``) pairs their verdicts by task.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from evaluation.judge.options import JudgeError, JudgeOptions, NoTrajectoriesError
from evaluation.judge.pipeline import JudgeSummary, judge_paths
from evaluation.report.files import load_report
from evaluation.report.across_runs.repeats import RepeatsReport, build_repeats_report
from evaluation.report.across_runs.repeats_render import write_repeats_reports
from evaluation.run.layout import read_repeats

RUN_TASKS_FILE = "tasks.json"


class RepeatsSummary(BaseModel):
    out_dir: Path
    #: The repeats judged, with their directories (in the same order).
    repeats: list[JudgeSummary] = Field(default_factory=list)
    directories: list[Path] = Field(default_factory=list)
    #: Repeats without any trajectory yet (an interrupted run stopped before them): not judged,
    #: left out of pass@k, named so the run is resumed.
    not_run: list[Path] = Field(default_factory=list)
    report: RepeatsReport | None = None
    report_files: list[Path] = Field(default_factory=list)

    @property
    def fatal(self) -> str | None:
        return next((summary.fatal for summary in self.repeats if summary.fatal), None)

    @property
    def exit_code(self) -> int:
        code = max((summary.exit_code for summary in self.repeats), default=2)
        return max(code, 1) if self.not_run else code


def repeat_directories(paths: Sequence[Path], as_repeats: bool) -> list[Path] | None:
    """The repeats to judge: a run directory's ``repeats.json``, or every PATH with ``--repeats``;
    ``None`` for an ordinary (single) judge run."""
    if as_repeats:
        missing = [str(path) for path in paths if not path.is_dir()]
        if missing:
            raise JudgeError(f"--repeats: each PATH must be a run directory; not a directory: {', '.join(missing)}.")
        if len(paths) < 2:
            raise JudgeError("--repeats: give two or more run directories of the same agent (one per repeat).")
        seen: dict[Path, Path] = {}
        for path in paths:
            earlier = seen.setdefault(path.resolve(), path)
            if earlier is not path:
                # One run counted twice would look like a perfectly consistent agent.
                raise JudgeError(f"--repeats: {earlier} and {path} are the same run directory; give each repeat once.")
        return list(paths)
    if len(paths) == 1 and paths[0].is_dir():
        return read_repeats(paths[0])
    return None


async def _judge_repeat(name: str, directory: Path, options: JudgeOptions) -> JudgeSummary:
    """One repeat, judged like a single run against its own task list (``tasks.json``) unless
    ``--tasks`` was given."""
    own_tasks = directory / RUN_TASKS_FILE
    tasks_file = options.tasks_file or (own_tasks if own_tasks.is_file() else None)
    judged_into = options.out_dir / name.replace(":", "-") if options.out_dir else directory / "judge"
    return await judge_paths([directory], options.model_copy(update={"tasks_file": tasks_file, "out_dir": judged_into}))


def _names(directories: Sequence[Path]) -> list[str]:
    names = [directory.name or str(directory) for directory in directories]
    if len(set(names)) < len(names):  # e.g. run-a/out and run-b/out
        names = [f"{number}:{name}" for number, name in enumerate(names, 1)]
    return names


async def judge_repeats(directories: Sequence[Path], options: JudgeOptions, out_dir: Path) -> RepeatsSummary:
    """Judge each repeat (stopping at an endpoint that cannot serve), then write the repeats report
    into ``out_dir``; each repeat's own verdicts and report go to ``<repeat>/judge`` (or, with
    ``options.out_dir``, to ``<out>/<repeat name>``)."""
    summary = RepeatsSummary(out_dir=out_dir)
    names = _names(directories)
    judged_names: list[str] = []
    for name, directory in zip(names, directories, strict=True):
        try:
            one = await _judge_repeat(name, directory, options)
        except NoTrajectoriesError:
            # An interrupted run stops before its later repeats: the judge reports the ones that ran.
            summary.not_run.append(directory)
            continue
        summary.repeats.append(one)
        summary.directories.append(directory)
        judged_names.append(name)
        if one.fatal:
            return summary
    if not summary.repeats:
        raise JudgeError(
            f"none of the {len(directories)} repeats holds a trajectory yet ({', '.join(map(str, directories))}); "
            "run them first (rerun the same python -m evaluation.run command to resume)."
        )
    reports = [load_report(one.out_dir) for one in summary.repeats]
    not_run = [name for name, directory in zip(names, directories, strict=True) if directory in summary.not_run]
    summary.report = build_repeats_report(reports, judged_names, summary.directories, not_run=not_run)
    summary.report_files = write_repeats_reports(summary.report, out_dir, formats=("json", "md", "html") if options.write_reports else ("json",))
    return summary
