"""``python -m evaluation.judge PATH...``: LiveMCPEval -- did each logged agent complete its task?

Per task: key points (the annotated ``Steps``, or extracted by the LLM with the paper's prompt
and cached), then one verdict per judge model from the task, key points, final answer and
tool-call history (``--prompt evidence`` adds the tool outputs), parsed strictly. A comma-separated
``--model`` list is a jury: majority vote, ties and no-majority go to failure.

Library use (the benchmark runner): ``add_judge_arguments(parser, prefix="judge-")`` adds the
same options, ``JudgeOptions.from_args(args, prefix="judge-")`` reads them back and
``await judge_paths(paths, options)`` judges and writes the reports.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path

import anyio
import anyio.abc
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from evaluation import report as reporting
from evaluation.cache import CompletionCache
from evaluation.completions import CompletionService
from evaluation.llm import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    EndpointError,
    LLMError,
    LLMSettings,
    resolve_llm_settings,
)
from evaluation.prompts import (
    KEY_POINTS_RETRY_MESSAGE,
    PROMPT_KINDS,
    PROMPT_VERSION,
    RETRY_MESSAGE,
    PromptKind,
    judge_messages,
    key_point_messages,
    prompt_hash,
)
from evaluation.tasks import UNCATEGORISED, Task, load_human_labels, load_tasks
from evaluation.tool_descriptions import ToolDescriptions, load_tool_descriptions
from evaluation.trajectories import LoadResult, Trajectory, load_trajectories
from evaluation.verdict_log import JudgeVote, Verdict, VerdictLog, VerdictRecord, latest_by_task
from evaluation.verdicts import parse_key_points, parse_verdict
from index.errors import CopilotError
from index.settings import CopilotSettings
from index.console import HelpFormatter, make_console

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 8
DEFAULT_PARSE_RETRIES = 2
VERDICTS_FILE = "verdicts.jsonl"


class JudgeError(CopilotError):
    """Judging cannot start or produced nothing (bad paths, nothing to judge, unwritable output)."""


class JudgeOptions(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: LLMSettings
    tasks_file: Path | None = None
    human_labels: Path | None = None
    tools_file: Path | None = None
    prompt: PromptKind = "livemcpeval"
    auto_key_points: bool = False
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1)
    parse_retries: int = Field(default=DEFAULT_PARSE_RETRIES, ge=0)
    #: Default: ``<first path>/judge`` (beside the logs).
    out_dir: Path | None = None
    #: Default: ``$COPILOT_HOME/judge-cache``.
    cache_dir: Path | None = None
    use_cache: bool = True
    show_progress: bool = True
    write_reports: bool = True

    @classmethod
    def from_args(cls, args: argparse.Namespace, prefix: str = "", **overrides: object) -> JudgeOptions:
        """Read options added by :func:`add_judge_arguments` with the same ``prefix``."""
        dest = prefix.replace("-", "_")

        def get(name: str, default: object = None) -> object:
            return getattr(args, dest + name, default)

        env_names = _env_names(prefix)
        llm = resolve_llm_settings(
            get("base_url"),  # type: ignore[arg-type]
            get("api_key"),  # type: ignore[arg-type]
            get("model"),  # type: ignore[arg-type]
            timeout=get("timeout"),  # type: ignore[arg-type]
            max_retries=get("max_retries"),  # type: ignore[arg-type]
            env_names=env_names,
        )
        values: dict[str, object] = {
            "llm": llm,
            "tasks_file": get("tasks"),
            "human_labels": get("human_labels"),
            "tools_file": get("tools"),
            "prompt": get("prompt", "livemcpeval"),
            "auto_key_points": bool(get("auto_key_points", False)),
            "concurrency": get("concurrency", DEFAULT_CONCURRENCY),
            "parse_retries": get("parse_retries", DEFAULT_PARSE_RETRIES),
            "out_dir": get("out"),
            "cache_dir": get("cache_dir"),
            "use_cache": not get("no_cache", False),
            "show_progress": not get("no_progress", False),
        }
        values.update(overrides)
        try:
            return cls.model_validate({key: value for key, value in values.items() if value is not None})
        except ValidationError as error:
            first = error.errors()[0]
            option = "--" + prefix + str(first["loc"][0]).replace("_", "-")
            raise JudgeError(f"{option}: {first['msg']} (got {first.get('input')!r}).") from None

    def config_hash(self) -> str:
        """What a verdict depends on besides the trajectory: judges, prompt, key-point mode."""
        payload = {
            "models": self.llm.models,
            "prompt": self.prompt,
            "auto_key_points": self.auto_key_points,
            "version": PROMPT_VERSION,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def judge_name(self) -> str:
        models = self.llm.models
        return models[0] if len(models) == 1 else f"jury({','.join(models)})"


class TaskFailure(BaseModel):
    task_id: str
    error: str


class JudgeSummary(BaseModel):
    out_dir: Path
    n_tasks: int = 0
    judged_now: int = 0
    resumed: int = 0
    success: int = 0
    failure: int = 0
    abstain: int = 0
    success_rate: float = 0.0
    ci95: tuple[float, float] = (0.0, 0.0)
    errors: list[TaskFailure] = Field(default_factory=list)
    unknown_task_ids: list[str] = Field(default_factory=list)
    missing_trajectories: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    llm_requests: int = 0
    cache_hits: int = 0
    judging_seconds: float = 0.0
    report_files: list[Path] = Field(default_factory=list)
    fatal: str | None = None

    @property
    def exit_code(self) -> int:
        if self.fatal:
            return 2
        return 1 if self.errors else 0


# ---------------------------------------------------------------------------------------------
# CLI options


def _env_names(prefix: str) -> dict[str, tuple[str, ...]]:
    if not prefix:
        return {}
    upper = prefix.replace("-", "_").upper()
    return {
        "base_url": (f"{upper}BASE_URL", "OPENAI_BASE_URL"),
        "api_key": (f"{upper}API_KEY", "OPENAI_API_KEY"),
        "model": (f"{upper}MODEL",),
    }


def add_judge_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, prefix: str = "", exclude: Collection[str] = ()
) -> None:
    """The judge's options (not the input paths). ``prefix="judge-"`` gives ``--judge-model`` etc.;
    ``exclude`` drops options the caller defines itself (e.g. ``{"tasks", "out"}``)."""
    env = _env_names(prefix)
    model_env = " / ".join(env.get("model", ("MODEL",)))
    url_env = " / ".join(env.get("base_url", ("OPENAI_BASE_URL",)))
    key_env = " / ".join(env.get("api_key", ("OPENAI_API_KEY",)))
    options: list[tuple[str, dict]] = [
        (
            "tasks",
            {
                "type": Path,
                "metavar": "FILE",
                "help": "task list (LiveMCPBench all_annotations.json): the denominator, questions and annotated key points",
            },
        ),
        (
            "human-labels",
            {
                "type": Path,
                "metavar": "FILE",
                "help": "human verdicts (JSON list of {task_id, task_success}) to measure the judge against",
            },
        ),
        (
            "tools",
            {
                "type": Path,
                "metavar": "FILE",
                "help": "tool descriptions for the prompt: a copilot catalog or LiveMCPBench tools.json (default: the copilot's catalog)",
            },
        ),
        ("base-url", {"metavar": "URL", "help": f"OpenAI-compatible endpoint (default: ${url_env})"}),
        ("api-key", {"metavar": "KEY", "help": f"API key (default: ${key_env})"}),
        (
            "model",
            {
                "metavar": "NAME[,NAME...]",
                "help": f"judge model; a comma-separated list is a jury (default: ${model_env})",
            },
        ),
        (
            "prompt",
            {
                "choices": PROMPT_KINDS,
                "default": "livemcpeval",
                "help": "livemcpeval: the paper's judge; evidence: also shows tool outputs and asks per key point for the supporting calls",
            },
        ),
        (
            "auto-key-points",
            {"action": "store_true", "help": "extract key points with the LLM even when annotated Steps exist"},
        ),
        (
            "concurrency",
            {
                "type": int,
                "default": DEFAULT_CONCURRENCY,
                "metavar": "N",
                "help": f"parallel LLM requests (default {DEFAULT_CONCURRENCY})",
            },
        ),
        (
            "timeout",
            {
                "type": float,
                "default": DEFAULT_TIMEOUT,
                "metavar": "SECONDS",
                "help": f"per-request timeout (default {DEFAULT_TIMEOUT:g})",
            },
        ),
        (
            "max-retries",
            {
                "type": int,
                "default": DEFAULT_MAX_RETRIES,
                "metavar": "N",
                "help": f"retries with backoff on 429/5xx/timeouts (default {DEFAULT_MAX_RETRIES})",
            },
        ),
        (
            "parse-retries",
            {
                "type": int,
                "default": DEFAULT_PARSE_RETRIES,
                "metavar": "N",
                "help": f"re-asks after an unparseable verdict before recording abstain (default {DEFAULT_PARSE_RETRIES})",
            },
        ),
        ("out", {"type": Path, "metavar": "DIR", "help": "output directory (default: <first path>/judge)"}),
        ("cache-dir", {"type": Path, "metavar": "DIR", "help": "LLM reply cache (default: $COPILOT_HOME/judge-cache)"}),
        ("no-cache", {"action": "store_true", "help": "neither read nor write the reply cache"}),
        ("no-progress", {"action": "store_true", "help": "no progress bar"}),
    ]
    for name, kwargs in options:
        if name in exclude:
            continue
        parser.add_argument(f"--{prefix}{name}", dest=(prefix + name).replace("-", "_"), **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.judge",
        description="Judge agent trajectories with LiveMCPEval and write verdicts.jsonl, report.json/.md/.html.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "paths", nargs="+", type=Path, help="trajectory directories or files (copilot JSONL, LiveMCPBench JSON)"
    )
    add_judge_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    return parser


# ---------------------------------------------------------------------------------------------
# judging


class Job(BaseModel):
    task_id: str
    question: str
    category: str
    steps: list[str]
    trajectory: Trajectory


def majority(votes: Sequence[Verdict]) -> Verdict:
    """Jury rule: success needs more success votes than failure votes; abstains do not vote;
    a tie is a failure; all abstaining is an abstain."""
    successes = votes.count("success")
    failures = votes.count("failure")
    if successes == 0 and failures == 0:
        return "abstain"
    return "success" if successes > failures else "failure"


class Judge:
    def __init__(self, options: JudgeOptions, service: CompletionService, descriptions: ToolDescriptions) -> None:
        self.options = options
        self.service = service
        self.descriptions = descriptions

    async def key_points(self, job: Job) -> tuple[list[str], str]:
        if job.steps and not self.options.auto_key_points:
            return job.steps, "annotated"
        # One extraction per task with the first judge model, shared by a jury so all judges
        # see the same key points; the reply cache makes it a one-time cost per task.
        conversation = key_point_messages(job.question)
        for _ in range(1 + self.options.parse_retries):
            completion = await self.service.complete(self.options.llm.model, conversation)
            points = parse_key_points(completion.text)
            if points:
                return points, "extracted"
            conversation = [
                *conversation,
                {"role": "assistant", "content": completion.text or ""},
                {"role": "user", "content": KEY_POINTS_RETRY_MESSAGE},
            ]
        logger.warning("task %s: no key points could be extracted; judging against the task itself", job.task_id)
        return [job.question], "fallback"

    async def vote(self, model: str, messages: list[dict[str, str]]) -> JudgeVote:
        vote = JudgeVote(model=model, verdict="abstain", prompt_hash=prompt_hash(messages), cached=True, attempts=0)
        conversation = list(messages)
        for _ in range(1 + self.options.parse_retries):
            completion = await self.service.complete(model, conversation)
            vote.attempts += 1
            vote.input_tokens += completion.input_tokens
            vote.output_tokens += completion.output_tokens
            vote.latency_ms += completion.latency_ms
            vote.cached = vote.cached and completion.cached
            parsed = parse_verdict(completion.text)
            if parsed is not None:
                vote.verdict = parsed.status
                vote.thoughts = parsed.thoughts
                vote.key_point_verdicts = parsed.key_points
                return vote
            conversation = [
                *conversation,
                {"role": "assistant", "content": completion.text or ""},
                {"role": "user", "content": RETRY_MESSAGE},
            ]
            vote.unparsed_reply = (completion.text or "")[-2000:]
        vote.thoughts = f"no parseable verdict in {vote.attempts} replies"
        return vote

    async def judge(self, job: Job) -> VerdictRecord:
        key_points, source = await self.key_points(job)
        messages = judge_messages(self.options.prompt, job.trajectory, job.question, key_points, self.descriptions)
        votes: list[JudgeVote | None] = [None] * len(self.options.llm.models)
        failures: list[LLMError] = []

        async def cast(index: int, model: str) -> None:
            # Errors are collected, not raised, so one failing judge does not surface as an
            # exception group; the task is then left unjudged as a whole.
            try:
                votes[index] = await self.vote(model, messages)
            except LLMError as error:
                failures.append(error)

        async with anyio.create_task_group() as group:
            for index, model in enumerate(self.options.llm.models):
                group.start_soon(cast, index, model)
        if failures:
            raise next((error for error in failures if isinstance(error, EndpointError)), failures[0])
        cast_votes = [vote for vote in votes if vote is not None]
        verdict = majority([vote.verdict for vote in cast_votes])
        if len(cast_votes) == 1:
            thoughts = cast_votes[0].thoughts
        else:
            thoughts = "\n\n".join(f"[{vote.model}: {vote.verdict}] {vote.thoughts}" for vote in cast_votes)
        return VerdictRecord(
            task_id=job.task_id,
            category=job.category,
            verdict=verdict,
            key_points=key_points,
            key_points_source=source,  # type: ignore[arg-type]
            thoughts=thoughts,
            judge_model=self.options.judge_name,
            prompt=self.options.prompt,
            prompt_hash=prompt_hash(messages),
            input_tokens=sum(vote.input_tokens for vote in cast_votes),
            output_tokens=sum(vote.output_tokens for vote in cast_votes),
            latency_ms=max((vote.latency_ms for vote in cast_votes), default=0.0),
            judges=cast_votes,
            config_hash=self.options.config_hash(),
            trajectory_hash=job.trajectory.content_hash(),
            sources=job.trajectory.sources,
        )


def default_out_dir(paths: Sequence[Path]) -> Path:
    first = Path(paths[0])
    return (first if first.is_dir() else first.parent) / "judge"


def _prepare_out_dir(path: Path) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise JudgeError(f"cannot write to output directory {path} ({error.strerror}); pass --out DIR.") from None
    return path


def _default_descriptions(options: JudgeOptions) -> ToolDescriptions:
    if options.tools_file is not None:
        return load_tool_descriptions(options.tools_file)
    catalog = CopilotSettings.load().catalog_file()
    if catalog.is_file():
        try:
            return load_tool_descriptions(catalog)
        except CopilotError as error:
            logger.warning("tool descriptions unavailable (%s)", error)
    return {}


def _plan(
    tasks: dict[str, Task], loaded: LoadResult, summary: JudgeSummary
) -> tuple[list[Job], list[reporting.TaskInfo]]:
    """Jobs to judge and the task universe (the report's denominator)."""
    jobs: list[Job] = []
    universe: dict[str, reporting.TaskInfo] = {
        task.task_id: reporting.TaskInfo(
            task_id=task.task_id, question=task.question, category=task.category, gold_tools=task.gold_tools
        )
        for task in tasks.values()
    }
    for task_id, trajectory in loaded.trajectories.items():
        task = tasks.get(task_id)
        if tasks and task is None:
            summary.unknown_task_ids.append(task_id)
        question = (task.question if task else None) or trajectory.question
        if not question:
            summary.problems.append(
                f"{', '.join(trajectory.sources)}: task {task_id} has no question (pass --tasks FILE with this task); not judged"
            )
            continue
        category = task.category if task else (trajectory.category or UNCATEGORISED)
        steps = (task.steps if task else []) or trajectory.steps
        jobs.append(Job(task_id=task_id, question=question, category=category, steps=steps, trajectory=trajectory))
        if not tasks:
            universe[task_id] = reporting.TaskInfo(
                task_id=task_id, question=question, category=category, gold_tools=trajectory.gold_tools
            )
    summary.missing_trajectories = [task_id for task_id in universe if task_id not in loaded.trajectories]
    return jobs, list(universe.values())


def _progress(options: JudgeOptions) -> Progress:
    return Progress(
        TextColumn("[bold]judging[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=make_console(stderr=True),
        disable=not options.show_progress,
    )


async def judge_paths(paths: Sequence[str | Path], options: JudgeOptions) -> JudgeSummary:
    """Judge every trajectory under ``paths``, append to ``verdicts.jsonl`` and write the reports.

    Raises :class:`CopilotError` subclasses for bad input (nothing judged); per-task LLM failures
    are collected in ``summary.errors`` and the endpoint becoming unusable in ``summary.fatal``.
    """
    paths = [Path(path) for path in paths]
    if not paths:
        raise JudgeError("no trajectory paths given.")
    out_dir = options.out_dir or default_out_dir(paths)
    summary = JudgeSummary(out_dir=out_dir)
    tasks = load_tasks(options.tasks_file) if options.tasks_file else {}
    human = load_human_labels(options.human_labels) if options.human_labels else None
    cache_dir = options.cache_dir or CopilotSettings.load().home / "judge-cache"
    loaded = load_trajectories(paths, known_tasks=tasks, exclude=[out_dir, cache_dir])
    summary.problems.extend(str(problem) for problem in loaded.problems)
    if not loaded.trajectories:
        where = ", ".join(str(path) for path in paths)
        detail = "" if not loaded.problems else f" ({len(loaded.problems)} problem(s), first: {loaded.problems[0]})"
        raise JudgeError(
            f"no trajectories found in {where}{detail}. Expected copilot logs (*.jsonl) or a LiveMCPBench "
            "trajectory file (JSON list of tasks with messages)."
        )
    jobs, universe = _plan(tasks, loaded, summary)
    if not jobs:
        raise JudgeError(f"none of the {len(loaded.trajectories)} trajectories can be judged: {summary.problems[-1]}")
    _prepare_out_dir(out_dir)  # only now: bad input must not leave an empty output directory behind
    if human is None:
        inline = {t.task_id: t.human_success for t in loaded.trajectories.values() if t.human_success is not None}
        human = inline or None

    log = VerdictLog(out_dir / VERDICTS_FILE)
    config = options.config_hash()
    done = {
        record.task_id
        for record in latest_by_task(log.read()).values()
        if record.config_hash == config
        and record.task_id in loaded.trajectories
        and record.trajectory_hash == loaded.trajectories[record.task_id].content_hash()
    }
    todo = [job for job in jobs if job.task_id not in done]
    summary.resumed = len(jobs) - len(todo)

    cache = CompletionCache(cache_dir) if options.use_cache else None
    service = CompletionService(options.llm, cache, options.concurrency)
    judge = Judge(options, service, _default_descriptions(options) if todo else {})
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

    verdicts = {
        record.task_id: record
        for record in latest_by_task(log.read()).values()
        if record.config_hash == config and record.task_id in loaded.trajectories
    }
    built = reporting.build_report(
        universe=universe,
        trajectories=loaded.trajectories,
        verdicts=verdicts,
        human=human,
        judge=reporting.JudgeInfo(
            models=options.llm.models,
            prompt=options.prompt,
            key_points="extracted" if options.auto_key_points else "annotated (extracted when missing)",
            base_url=options.llm.base_url,
        ),
        inputs=reporting.InputInfo(
            paths=[str(path) for path in paths],
            tasks_file=str(options.tasks_file) if options.tasks_file else None,
            human_labels=str(options.human_labels) if options.human_labels else None,
            files_read=loaded.files_read,
            malformed_lines=loaded.malformed_lines,
            problems=summary.problems,
            unknown_task_ids=summary.unknown_task_ids,
            errors={failure.task_id: failure.error for failure in summary.errors},
        ),
    )
    summary.n_tasks = built.n_tasks
    summary.success, summary.failure, summary.abstain = built.success, built.failure, len(built.abstains)
    summary.success_rate, summary.ci95 = built.success_rate, built.ci95
    if options.write_reports:
        summary.report_files = reporting.write_reports(built, out_dir)
    else:
        summary.report_files = reporting.write_reports(built, out_dir, formats=("json",))
    return summary


# ---------------------------------------------------------------------------------------------
# CLI


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


if __name__ == "__main__":
    sys.exit(main())
