"""Judging a set of trajectories: read them, plan the jobs against the task list, judge what has
no verdict yet (appending to ``verdicts.jsonl`` as each arrives), then write the reports.

Library use (the benchmark runner): ``await judge_paths(paths, options)``.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.abc
from pydantic import BaseModel, Field, PrivateAttr
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from evaluation.report.build import build_report
from evaluation.report.files import FORMATS, write_reports
from evaluation.report.models import InputInfo, JudgeInfo, QuestionMismatch, Report, TaskInfo
from evaluation.judge.prompting.cache import CompletionCache
from evaluation.judge.prompting.completions import CompletionService
from evaluation.judge.judging import Job, Judge
from evaluation.judge.options import VERDICTS_FILE, JudgeError, JudgeOptions, NoTrajectoriesError
from evaluation.judge.tool_descriptions import ToolDescriptions, load_tool_descriptions
from evaluation.judge.lock import output_lock
from evaluation.judge.prompting.prompts import PROMPT_VERSIONS
from evaluation.judge.verdict_log import VerdictLog, VerdictRecord, latest_by_task
from evaluation.llm import EndpointError, LLMError
from evaluation.taxonomy.diagnose import Case, diagnose
from evaluation.taxonomy.model import Diagnosis
from evaluation.tasks import UNCATEGORISED, Task, load_human_labels, load_tasks
from evaluation.trajectories import LoadResult, load_trajectories
from index.cli.console import make_console
from index.errors import CopilotError
from index.settings import CopilotSettings, directory_problem

logger = logging.getLogger(__name__)

T = TypeVar("T")


class TaskFailure(BaseModel):
    task_id: str
    error: str


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


class JudgeSummary(BaseModel):
    out_dir: Path
    n_tasks: int = 0
    judged_now: int = 0
    resumed: int = 0
    success: int = 0
    failure: int = 0
    abstain: int = 0
    #: ``None`` when no task was judged, and then no interval either (not 0.0%-0.0%).
    success_rate: float | None = None
    ci95: tuple[float, float] | None = None
    errors: list[TaskFailure] = Field(default_factory=list)
    #: The report's tasks without an outcome: ``errors`` and the tasks an input problem kept from
    #: the judge (a task without a question).
    not_judged: list[str] = Field(default_factory=list)
    unknown_task_ids: list[str] = Field(default_factory=list)
    missing_trajectories: list[str] = Field(default_factory=list)
    #: Tasks judged again although this judge had a verdict on them, by why (:data:`REJUDGE_REASONS`).
    rejudged: dict[str, int] = Field(default_factory=dict)
    #: Unsuccessful tasks the run itself ended (task id -> error kind): see ``Report.run_broke``.
    run_broke: dict[str, str] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)
    question_mismatches: list[QuestionMismatch] = Field(default_factory=list)
    llm_requests: int = 0
    cache_hits: int = 0
    judging_seconds: float = 0.0
    report_files: list[Path] = Field(default_factory=list)
    fatal: str | None = None

    @property
    def unjudged(self) -> list[str]:
        """Every task left without an outcome, each once (before the report: the failed ones)."""
        return list(dict.fromkeys([*(failure.task_id for failure in self.errors), *self.not_judged]))

    @property
    def exit_code(self) -> int:
        if self.fatal:
            return 2
        return 1 if self.unjudged else 0


def default_out_dir(paths: Sequence[Path]) -> Path:
    first = Path(paths[0])
    return (first if first.is_dir() else first.parent) / "judge"


def _prepare_out_dir(path: Path, option: str = "--out", what: str = "output directory") -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        # A symlink loop read "(File exists)".
        raise JudgeError(f"cannot write to {what} {path} ({directory_problem(path, error)}); pass {option} DIR.") from None
    return path


def _unwritable_reason(path: Path) -> str | None:
    """Why a directory could not be created or written at ``path``, checked without creating it."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


def check_options(options: JudgeOptions) -> None:
    """Everything the judge will read or write that can be checked before there is anything to judge:
    the benchmark runner calls this before its first task, so a typo is not reported hours later."""
    if options.human_labels is not None:
        _named_by(options.option("human-labels"), load_human_labels, options.human_labels)
    if options.tools_file is not None:
        _named_by(options.option("tools"), load_tool_descriptions, options.tools_file)
    else:
        _default_catalog(options)
    for name, directory in (("out", options.out_dir), ("cache-dir", options.cache_dir if options.use_cache else None)):
        if directory is not None and (reason := _unwritable_reason(directory)):
            raise JudgeError(f"{options.option(name)} {directory}: cannot write there ({reason}); pass another directory.")


def _named_by(option: str, load: Callable[[Path], T], path: Path) -> T:
    """``load(path)``, its error naming the option that gave the file (``--judge-tools`` in the runner)."""
    try:
        return load(path)
    except CopilotError as error:
        raise JudgeError(f"{option}: {error}") from None


def _default_catalog(options: JudgeOptions) -> Path:
    """The copilot's catalog; one named explicitly (``COPILOT_CATALOG``) must exist: a mistyped
    path would have the judge run without any tool description, and nobody would notice."""
    settings = CopilotSettings.load()
    catalog = settings.catalog_file()
    if settings.catalog is not None and not catalog.is_file():
        raise JudgeError(
            f"COPILOT_CATALOG={catalog}: no such file (the judge shows the tools' descriptions from it); "
            f"fix the path, unset it to use the bundled catalog, or pass {options.option('tools')} FILE."
        )
    return catalog


def _default_descriptions(options: JudgeOptions) -> ToolDescriptions:
    if options.tools_file is not None:
        return _named_by(options.option("tools"), load_tool_descriptions, options.tools_file)
    catalog = _default_catalog(options)
    if catalog.is_file():
        try:
            return load_tool_descriptions(catalog)
        except CopilotError as error:
            logger.warning("tool descriptions unavailable (%s)", error)
    return {}


def _no_question(task: Task | None, tasks_file: Path | None) -> str:
    """What to do about a task neither the task list nor its log gives a question."""
    if task is not None:
        return f"its entry in the task list {tasks_file} has an empty Question and its log has none; add the question there"
    return "its log has none; pass --tasks FILE with a task list that holds this task"


def _plan(
    tasks: dict[str, Task], loaded: LoadResult, summary: JudgeSummary, tasks_file: Path | None = None
) -> tuple[list[Job], list[TaskInfo]]:
    """Jobs to judge and the task universe (the report's denominator)."""
    jobs: list[Job] = []
    universe: dict[str, TaskInfo] = {
        task.task_id: TaskInfo(
            task_id=task.task_id, question=task.question, category=task.category, gold_tools=task.gold_tools
        )
        for task in tasks.values()
    }
    for task_id, trajectory in loaded.trajectories.items():
        task = tasks.get(task_id)
        if tasks and task is None:
            summary.unknown_task_ids.append(task_id)  # reported, not judged: outside the list's denominator
            continue
        question = (task.question if task else None) or trajectory.question
        logged = trajectory.task_question
        if task is not None and task.question and logged and not _same_text(task.question, logged):
            # The task list is the reference; the difference is shown, never silently resolved.
            summary.question_mismatches.append(
                QuestionMismatch(task_id=task_id, task_list=task.question, trajectory=logged)
            )
        if not question:
            summary.problems.append(
                f"{', '.join(trajectory.sources)}: task {task_id} has no question ({_no_question(task, tasks_file)}); "
                "not judged"
            )
            continue
        category = task.category if task else (trajectory.category or UNCATEGORISED)
        steps = (task.steps if task else []) or trajectory.steps
        jobs.append(
            Job(
                task_id=task_id,
                question=question,
                trajectory_question=logged if logged and not _same_text(question, logged) else None,
                category=category,
                steps=steps,
                trajectory=trajectory,
            )
        )
        if task is not None and not task.question:
            universe[task_id].question = question  # the list has none: the trajectory's was judged
        if not tasks:
            universe[task_id] = TaskInfo(
                task_id=task_id, question=question, category=category, gold_tools=trajectory.gold_tools
            )
    summary.missing_trajectories = [task_id for task_id in universe if task_id not in loaded.trajectories]
    return jobs, list(universe.values())


#: Off a terminal, a progress line at least every this fraction of the tasks (and at the end).
PLAIN_PROGRESS_STEP = 0.1


class _PlainProgress:
    """Progress as plain lines, for stderr that is not a terminal (a log file, CI, ``| tee``).

    rich draws its bar there only once, when the bar stops: a judge run of an hour logged nothing
    until it ended. This keeps rich's ``Progress`` calls the pipeline makes and prints one line
    about every tenth of the tasks instead.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started = time.perf_counter()
        self.total = 0
        self.done = 0
        self.next_line = 0

    def __enter__(self) -> _PlainProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def add_task(self, description: str, total: int, tally: str = "") -> int:
        self.total = total
        if total:
            self.console.print(f"judging {total} task(s)", highlight=False)
        self.next_line = max(1, math.ceil(total * PLAIN_PROGRESS_STEP))
        return 0

    def update(self, task_id: int, advance: int = 0, tally: str = "") -> None:
        self.done += advance
        if not advance or self.total <= 0 or (self.done < self.next_line and self.done < self.total):
            return
        step = max(1, math.ceil(self.total * PLAIN_PROGRESS_STEP))
        self.next_line = (self.done // step + 1) * step
        elapsed = f" in {time.perf_counter() - self.started:.1f}s" if self.done >= self.total else ""
        counts = f": {tally}" if tally else ""
        self.console.print(
            f"judging: {self.done} of {self.total} ({self.done * 100 // self.total}%){counts}{elapsed}",
            highlight=False,
            markup=False,
        )


def _progress(options: JudgeOptions) -> Progress | _PlainProgress:
    console = make_console(stderr=True)
    if options.show_progress and not console.is_terminal:
        return _PlainProgress(console)
    return Progress(
        TextColumn("[bold]judging[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not options.show_progress,
    )


class _Inputs(BaseModel):
    """What a judge run reads before judging anything."""

    model_config = {"arbitrary_types_allowed": True}

    paths: list[Path]
    out_dir: Path
    cache_dir: Path
    loaded: LoadResult
    jobs: list[Job]
    universe: list[TaskInfo]
    human: dict[str, bool] | None
    descriptions: ToolDescriptions
    #: Fingerprints computed so far, by (kind, task id): every earlier verdict of a task is checked
    #: against the same ones, and each hashes the whole trajectory.
    _fingerprints: dict[tuple[str, str], str] = PrivateAttr(default_factory=dict)

    def trajectory_hash(self, task_id: str) -> str | None:
        trajectory = self.loaded.trajectories.get(task_id)
        if trajectory is None:
            return None
        key = ("trajectory", task_id)
        if key not in self._fingerprints:
            self._fingerprints[key] = trajectory.content_hash()
        return self._fingerprints[key]

    def inputs_hash(self, job: Job) -> str:
        key = ("inputs", job.task_id)
        if key not in self._fingerprints:
            self._fingerprints[key] = job.inputs_hash(self.descriptions, self.trajectory_hash(job.task_id))
        return self._fingerprints[key]


def _read_inputs(paths: list[Path], options: JudgeOptions, summary: JudgeSummary) -> _Inputs:
    tasks = load_tasks(options.tasks_file) if options.tasks_file else {}
    human = _named_by(options.option("human-labels"), load_human_labels, options.human_labels) if options.human_labels else None
    descriptions = _default_descriptions(options)  # a bad --tools stops here, before any judging
    cache_dir = options.cache_dir or CopilotSettings.load().home / "judge-cache"
    loaded = load_trajectories(paths, known_tasks=tasks, exclude=[summary.out_dir, cache_dir])
    summary.problems.extend(str(problem) for problem in loaded.problems)
    if not loaded.trajectories:
        where = ", ".join(str(path) for path in paths)
        detail = "" if not loaded.problems else f" ({len(loaded.problems)} problem(s), first: {loaded.problems[0]})"
        raise NoTrajectoriesError(
            f"no trajectories found in {where}{detail}. Expected copilot logs (*.jsonl) or a LiveMCPBench "
            "trajectory file (JSON list of tasks with messages)."
        )
    jobs, universe = _plan(tasks, loaded, summary, options.tasks_file)
    if not jobs:
        reason = (
            f"none of their task ids is in the task list {options.tasks_file} (first: {summary.unknown_task_ids[0]!r})"
            if summary.unknown_task_ids and len(summary.unknown_task_ids) == len(loaded.trajectories)
            else summary.problems[-1]
        )
        raise JudgeError(f"none of the {len(loaded.trajectories)} trajectories can be judged: {reason}")
    if human is None:
        inline = {t.task_id: t.human_success for t in loaded.trajectories.values() if t.human_success is not None}
        human = inline or None
    else:
        judged = {job.task_id for job in jobs}
        unlabelled = sorted(set(human) - judged)
        if unlabelled and len(unlabelled) == len(human):
            raise JudgeError(
                f"{options.human_labels}: none of its {len(human)} labels names a task judged here (first: "
                f"{unlabelled[0]!r}); check that the labels belong to these trajectories."
            )
        if unlabelled:
            summary.problems.append(
                f"{options.human_labels}: {len(unlabelled)} label(s) for tasks not judged here ({', '.join(unlabelled[:5])}"
                f"{', ...' if len(unlabelled) > 5 else ''}); agreement is over the {len(human) - len(unlabelled)} others"
            )
    return _Inputs(
        paths=paths,
        out_dir=summary.out_dir,
        cache_dir=cache_dir,
        loaded=loaded,
        jobs=jobs,
        universe=universe,
        human=human,
        descriptions=descriptions,
    )


#: Why a verdict of this judge is not used (:func:`_stale_reason`), as the judge command says it.
REJUDGE_REASONS = {
    "trajectory": "whose trajectory changed since its verdict (or whose verdict an earlier version fingerprinted differently)",
    "inputs": "whose question, key points or tool descriptions changed since its verdict",
}


def _stale_reason(record: VerdictRecord, inputs: _Inputs, jobs: dict[str, Job]) -> str | None:
    """Why ``record``, a verdict of this judge's settings, is not one on what it would be given now
    (a key of :data:`REJUDGE_REASONS`), or ``None`` when it is."""
    trajectory_hash = inputs.trajectory_hash(record.task_id)
    if trajectory_hash is None or record.trajectory_hash != trajectory_hash:
        return "trajectory"
    job = jobs.get(record.task_id)
    if job is None:
        return None
    if record.inputs_hash is not None:
        return None if record.inputs_hash == inputs.inputs_hash(job) else "inputs"
    # Verdicts of earlier versions carry no inputs hash, but they do record the question and the
    # annotated key points they were given: a task list corrected since must not keep its old verdict.
    if record.question and record.question != job.question:
        return "inputs"
    if record.key_points_source == "annotated" and job.steps and record.key_points != job.steps:
        return "inputs"
    return None


def _is_current(record: VerdictRecord, config: str, inputs: _Inputs, jobs: dict[str, Job]) -> bool:
    """Whether ``record`` is a verdict on what a judge with ``config`` would be given now."""
    return record.config_hash == config and _stale_reason(record, inputs, jobs) is None


def _rejudged(records: list[VerdictRecord], todo: list[Job], config: str, inputs: _Inputs, jobs: dict[str, Job]) -> dict[str, int]:
    """Of the tasks to judge, how many this judge had a verdict on that is stale, by reason."""
    latest = latest_by_task([record for record in records if record.config_hash == config])
    reasons: dict[str, int] = {}
    for job in todo:
        record = latest.get(job.task_id)
        if record is not None and (why := _stale_reason(record, inputs, jobs)) is not None:
            reasons[why] = reasons.get(why, 0) + 1
    return reasons


async def judge_paths(paths: Sequence[str | Path], options: JudgeOptions) -> JudgeSummary:
    """Judge every trajectory under ``paths``, append to ``verdicts.jsonl`` and write the reports.

    Raises :class:`CopilotError` subclasses for bad input (nothing judged) and when another judge
    is writing to the same output directory; per-task LLM failures are collected in
    ``summary.errors`` and the endpoint becoming unusable in ``summary.fatal`` (then no report
    is written: the verdicts appended so far stay for a rerun).
    """
    paths = [Path(path) for path in paths]
    if not paths:
        raise JudgeError("no trajectory paths given.")
    summary = JudgeSummary(out_dir=options.out_dir or default_out_dir(paths))
    inputs = _read_inputs(paths, options, summary)
    _prepare_out_dir(summary.out_dir, options.option("out"))  # only now: bad input must not leave an empty output directory behind
    if options.use_cache:
        # Else every entry failed alike: one warning per entry, and every reply asked again.
        _prepare_out_dir(inputs.cache_dir, options.option("cache-dir"), "the reply cache directory")
    with output_lock(summary.out_dir):
        log = VerdictLog(summary.out_dir / VERDICTS_FILE)
        log.set_aside_damaged()  # warned about once, here, not on every later run
        config = options.config_hash()
        jobs = {job.task_id: job for job in inputs.jobs}
        # Current first, then the latest: another judge's later verdict on a task (--model m2 into
        # the same --out) hid this judge's, which was then asked for again.
        def current_verdicts(records: list[VerdictRecord]) -> dict[str, VerdictRecord]:
            return latest_by_task([record for record in records if _is_current(record, config, inputs, jobs)])

        earlier = log.read()  # read once for what is done and why the rest is judged again
        done = set(current_verdicts(earlier))
        todo = [job for job in inputs.jobs if job.task_id not in done]
        summary.resumed = len(inputs.jobs) - len(todo)
        summary.rejudged = _rejudged(earlier, todo, config, inputs, jobs)
        await _judge_jobs(todo, options, inputs, log, summary)
        if summary.fatal:
            # A report now would count every task the endpoint never saw as a failure: write
            # none; the verdicts so far are in verdicts.jsonl and a rerun continues from them.
            return summary
        # Only verdicts on what the judge would be given now: a task whose re-judging failed is
        # not judged, not counted with the verdict on its earlier trajectory or question.
        verdicts = current_verdicts(log.read())
        diagnoses = await _diagnoses(inputs, verdicts, options)
        built = _build(inputs, verdicts, options, summary, diagnoses)
        summary.n_tasks = built.n_tasks
        summary.success, summary.failure, summary.abstain = built.success, built.failure, len(built.abstains)
        summary.success_rate, summary.ci95 = built.success_rate, built.ci95
        summary.not_judged = built.not_judged
        summary.run_broke = built.run_broke
        formats = FORMATS if options.write_reports else ("json",)
        summary.report_files = write_reports(
            built, summary.out_dir, formats=formats, trajectories=inputs.loaded.trajectories, verdicts=verdicts
        )
    return summary


async def _judge_jobs(
    todo: list[Job], options: JudgeOptions, inputs: _Inputs, log: VerdictLog, summary: JudgeSummary
) -> None:
    """Judge ``todo`` with bounded concurrency, appending each verdict as it arrives."""
    cache = CompletionCache(inputs.cache_dir) if options.use_cache else None
    service = CompletionService(options.llm, cache, options.concurrency)
    judge = Judge(options, service, inputs.descriptions)
    tally = {"success": 0, "failure": 0, "abstain": 0, "error": 0}
    started = time.perf_counter()
    try:
        with _progress(options) as progress:
            bar = progress.add_task("judging", total=len(todo), tally="")

            async def run(job: Job, group: anyio.abc.TaskGroup) -> None:
                try:
                    record = await judge.judge(job)
                except EndpointError as error:
                    # The endpoint cannot serve anything: stop now, keep every verdict so far.
                    summary.fatal = summary.fatal or str(error)
                    group.cancel_scope.cancel()
                    return
                except LLMError as error:
                    summary.errors.append(TaskFailure(task_id=job.task_id, error=str(error)))
                    tally["error"] += 1
                else:
                    try:
                        log.append(record)
                    except OSError as error:
                        # Disk full or the file removed: stop like a dead endpoint (the reply cache
                        # keeps this verdict cheap), not as an exception group out of the task group.
                        summary.fatal = summary.fatal or f"cannot write {log.path} ({error.strerror or error})"
                        group.cancel_scope.cancel()
                        return
                    summary.judged_now += 1
                    tally[record.verdict] += 1
                text = " ".join(f"{name} {count}" for name, count in tally.items() if count)
                progress.update(bar, advance=1, tally=text)

            async with anyio.create_task_group() as group:
                for job in todo:
                    group.start_soon(run, job, group)
    finally:
        summary.judging_seconds = time.perf_counter() - started
        log.close()
        await service.aclose()
        summary.llm_requests = service.requests
        summary.cache_hits = cache.hits if cache else 0


async def _diagnoses(inputs: _Inputs, verdicts: dict[str, VerdictRecord], options: JudgeOptions) -> dict[str, Diagnosis]:
    """The error class of every judged task that did not succeed (see :mod:`evaluation.taxonomy`)."""
    jobs = {job.task_id: job for job in inputs.jobs}
    gold = {info.task_id: info.gold_tools for info in inputs.universe}
    cases = [
        Case(
            trajectory=jobs[task_id].trajectory,
            question=jobs[task_id].question,
            gold_tools=gold.get(task_id) or jobs[task_id].trajectory.gold_tools,
        )
        for task_id, record in verdicts.items()
        if record.verdict != "success" and task_id in jobs
    ]
    if not cases:
        return {}
    service = None
    if options.taxonomy_llm:
        cache = CompletionCache(inputs.cache_dir) if options.use_cache else None
        service = CompletionService(options.llm, cache, options.concurrency)
    try:
        return await diagnose(cases, inputs.descriptions, service=service, model=options.llm.model)
    finally:
        if service is not None:
            await service.aclose()


def _build(
    inputs: _Inputs,
    verdicts: dict[str, VerdictRecord],
    options: JudgeOptions,
    summary: JudgeSummary,
    diagnoses: dict[str, Diagnosis],
) -> Report:
    return build_report(
        diagnoses=diagnoses,
        universe=inputs.universe,
        trajectories=inputs.loaded.trajectories,
        verdicts=verdicts,
        human=inputs.human,
        judge=JudgeInfo(
            models=options.llm.models,
            prompt=options.prompt,
            prompt_version=PROMPT_VERSIONS[options.prompt],
            key_points="extracted" if options.auto_key_points else "annotated (extracted when missing)",
            base_url=options.llm.shown_url,  # reports are shared: no gateway credentials
            config_hash=options.config_hash(),
        ),
        inputs=InputInfo(
            paths=[str(path) for path in inputs.paths],
            tasks_file=str(options.tasks_file) if options.tasks_file else None,
            human_labels=str(options.human_labels) if options.human_labels else None,
            files_read=inputs.loaded.files_read,
            malformed_lines=inputs.loaded.malformed_lines,
            problems=summary.problems,
            unknown_task_ids=summary.unknown_task_ids,
            errors={failure.task_id: failure.error for failure in summary.errors},
            question_mismatches=summary.question_mismatches,
        ),
    )
