"""Runs benchmark tasks through the copilot: workspace, agent, trajectory, manifest, progress.

Per task, in ``<out>``:

- ``<task_id>.jsonl`` — the trajectory. The runner writes ``session_start`` (task, category,
  agent, model, catalog hash, date, runner version, workspace) *before* the copilot starts; the
  copilot appends its own session with every ``route``/``execute``; the runner then adds
  ``usage`` (per model call), ``final_answer``, the ``workspace`` changes and ``session_end``
  (whose ``reason`` says how the task ended).
- ``tasks/<task_id>/`` — the workspace (``workspace/``, also the child servers' ``HOME``, see
  :mod:`evaluation.run.task_setup.child_home`), their working and temp directories (``work/<server>/tmp``) and
  stderr logs (``children/``), the per-task ``servers.json`` and ``mcp_config.json``, the
  question and answer files, the agent's stdout/stderr and, for the built-in agent, the copilot's
  stderr (each capped at ``--max-agent-log-bytes``, head and tail: :mod:`evaluation.run.agents.bounded_log`),
  and the built-in agent's conversation (``messages.json``). Only ``workspace/`` is listed as the
  task's output.
- ``summary.json`` — one record per finished task (see :mod:`evaluation.run.models`); an agent log
  that was capped is named there and in ``session_end`` (``agent_logs_cut``: bytes cut per log).

Every failure of a task — missing inputs, a missing agent program, a model endpoint that refuses
tools, a copilot that does not start, a timeout, even a runner bug — is recorded for that task;
the run goes on.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import traceback
import uuid
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from evaluation.run.agents.agent import AgentConfig, AgentError, CopilotAgent, copilot_session, stderr_tail
from evaluation.run.agents.bounded_log import DEFAULT_MAX_AGENT_LOG_BYTES, BoundedLog, LogCut, piped_into
from evaluation.run.task_setup.child_home import child_environment, shared_locations
from evaluation.run.agents.confirm import DEFAULT_POLICY, ConfirmPolicy, elicitation_answerer
from evaluation.run.task_setup.copilot_launch import CopilotLaunch, copilot_launch, sweep_stale_agent_configs
from evaluation.run.agents.external_agent import missing_program, render_command, run_external_agent
from evaluation.llm import EndpointError, probe_endpoint
from evaluation.run.models import ErrorKind, ModelPrice, RunManifest, TaskRecord, TaskStatus, price_for
from evaluation.run.tasks import BenchmarkTask
from evaluation.run.task_setup.workspace import (
    OUTSIDE_ROOT,
    TASK_ROOT,
    ServerRewrite,
    copy_task_files,
    diff,
    map_question,
    missing_inputs,
    snapshot,
    write_task_servers,
)
from index.errors import ConfigError, CopilotError
from server.bounded import cap_for_log
from server.trajectory.records import FinalAnswer, SessionEnd, SessionStart, TrajectoryWriter, parse_event
from index.cli.console import make_console

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

BUILTIN_AGENT = "copilot"


class RunnerConfig(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    out: Path
    tasks_file: Path
    task_files: Path | None
    servers_file: Path
    #: ``servers_file``'s text as checked at the run's start (None: each task reads the file).
    servers_text: str | None = None
    copilot_home: Path | None = None
    concurrency: int = 1
    task_timeout: float = 1200.0
    retry_failed: bool = False
    allow_missing_files: bool = False
    #: ``copilot`` (built-in agent) or the label of the ``--agent-cmd`` agent.
    agent: str = BUILTIN_AGENT
    agent_cmd: str | None = None
    #: Most bytes kept of each agent log (head and tail): the ``--agent-cmd`` agent's stdout and
    #: stderr, the built-in agent's copilot's stderr.
    max_agent_log_bytes: int = DEFAULT_MAX_AGENT_LOG_BYTES
    agent_config: AgentConfig | None = None
    api_key: str | None = None
    price_table: dict[str, ModelPrice] | None = None
    catalog_hash: str | None = None
    runner_version: str = ""
    #: Working directory of the copilot process (where its ``.env`` is read); children run in
    #: the workspace regardless.
    cwd: Path = Field(default_factory=Path.cwd)
    #: Who answers the copilot's confirmation questions (see :mod:`evaluation.run.agents.confirm`).
    confirm: ConfirmPolicy = DEFAULT_POLICY
    #: Variables the servers opt into with ``inherit_env``: the copilot must receive them to pass them on.
    inherit_env: list[str] = Field(default_factory=list)
    #: Variables the servers file's ``${VAR}`` placeholders take: a task's copilot, started with only
    #: its config's environment, switched such a server off ("FX_API_KEY not set") in every task.
    placeholder_env: list[str] = Field(default_factory=list)
    #: Servers the index does not cover (``--allow-partial-index``), noted in every task's log.
    unindexed_servers: list[str] = Field(default_factory=list)


@dataclass
class TaskPaths:
    out: Path
    task_id: str

    @property
    def dir(self) -> Path:
        return self.out / "tasks" / self.task_id

    @property
    def workspace(self) -> Path:
        return self.dir / "workspace"

    @property
    def home(self) -> Path:
        """The child servers' ``HOME``: the workspace itself.

        LiveMCPBench ran its servers as root in a container, so ``~`` was ``/root`` -- which the
        workspace stands for. A server that saves to ``~/Downloads`` thus leaves its output where
        the task's file listing (and so the judge) sees it; tool state under ``~/.*`` is not listed.
        """
        return self.workspace

    @property
    def work(self) -> Path:
        """The pool's work directory: each child's temp directory is ``work/<server>/tmp``."""
        return self.dir / "work"

    @property
    def child_logs(self) -> Path:
        return self.dir / "children"

    @property
    def trajectory(self) -> Path:
        return self.out / f"{self.task_id}.jsonl"

    def file(self, name: str) -> Path:
        return self.dir / name


@dataclass
class _Outcome:
    status: TaskStatus = "completed"
    error: str | None = None
    error_kind: ErrorKind | None = None
    answer: str | None = None
    turns: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    answer_logged: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    #: Agent log file name -> bytes cut from it (``--max-agent-log-bytes``).
    logs_cut: dict[str, int] = field(default_factory=dict)

    def fail(self, kind: ErrorKind, message: str) -> None:
        self.status = "timeout" if kind == "timeout" else "failed"
        self.error_kind, self.error = kind, message


async def check_setup(config: RunnerConfig, pending: int) -> None:
    """The model endpoint answers and the ``--agent-cmd`` program exists, before any task runs.

    Either failing is the setup's failure, not any task's: recording every task as failed would
    make a resume skip them all and a report count them as the agent's failures. So the run stops
    with what to fix and records nothing; the rerun runs every task."""
    nothing_recorded = (
        f"None of the {pending} pending task(s) was run or recorded in {config.out}: "
        "fix this, then rerun the same command (it runs them all)."
    )
    if config.agent_cmd is not None:
        if problem := missing_program(config.agent_cmd):
            raise ConfigError(f"--agent-cmd: {problem} (install it, or give its full path). {nothing_recorded}")
        return
    if config.agent_config is not None:
        try:
            await probe_endpoint(config.agent_config.base_url, config.api_key)
        except EndpointError as error:
            raise EndpointError(f"the model endpoint check failed before any task ran: {error} {nothing_recorded}") from None


class BenchmarkRunner:
    """Runs the tasks of one run directory.

    Its caller must have run :func:`check_setup` first (the CLI does, once, before indexing, for
    all repeats): the runner does not check again, so a missing ``--agent-cmd`` program or a dead
    model endpoint is otherwise found task by task.
    """

    def __init__(
        self,
        config: RunnerConfig,
        manifest: RunManifest,
        llm: openai.AsyncOpenAI | None = None,
        console: Console | None = None,
        label: str = "",
    ) -> None:
        self.config = config
        #: Names this runner's lines (``repeat-2``) when one command runs several repeats: their
        #: ``[k/N]`` counts restart per repeat and the same task ids recur.
        self.label = label
        self.manifest = manifest
        self.llm = llm
        self.console = console or make_console(stderr=True)
        self._done = 0
        self._failed = 0
        #: The real package caches every task's children share (resolved once, on first use).
        self._shared_locations: dict[str, str] | None = None

    # ------------------------------------------------------------------------------ run

    async def run(self, tasks: list[BenchmarkTask]) -> list[TaskRecord]:
        """Run ``tasks`` (already filtered for resume) ``concurrency`` at a time."""
        if not tasks:
            return []
        await anyio.to_thread.run_sync(sweep_stale_agent_configs)
        limiter = anyio.CapacityLimiter(max(1, self.config.concurrency))
        records: list[TaskRecord] = []
        progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        with progress:
            bar = progress.add_task(self._describe(0), total=len(tasks))

            async def one(task: BenchmarkTask) -> None:
                async with limiter:
                    progress.update(bar, description=self._describe(limiter.borrowed_tokens))
                    record = await self.run_task(task)
                records.append(record)
                self._done += 1
                counted = f"{self.label} [{self._done}/{len(tasks)}]".lstrip()
                if record.status != "completed":
                    self._failed += 1
                    progress.console.print(
                        f"[red]✗[/red] {counted} {escape(record.task_id)} {record.status}"
                        f" ({record.error_kind}): {escape((record.error or '')[:200])}",
                        highlight=False,
                    )
                elif not self.console.is_terminal:
                    # Off a terminal the bar is drawn once, at the end: a line per task is the progress.
                    progress.console.print(f"✓ {counted} {escape(record.task_id)} completed", highlight=False)
                progress.update(bar, advance=1, description=self._describe(limiter.borrowed_tokens))

            async with anyio.create_task_group() as group:
                for task in tasks:
                    group.start_soon(one, task)
        return records

    def _describe(self, running: int) -> str:
        return f"{self._done - self._failed} done · [red]{self._failed} failed[/red] · {running} running"

    # ------------------------------------------------------------------------------ one task

    async def run_task(self, task: BenchmarkTask) -> TaskRecord:
        """Run one task to a :class:`TaskRecord` (also saved in ``summary.json``)."""
        paths = TaskPaths(self.config.out, task.task_id)
        started = time.monotonic()
        outcome = _Outcome()
        writer: TrajectoryWriter | None = None
        try:
            await anyio.to_thread.run_sync(self._reset, paths)
            writer = TrajectoryWriter(paths.trajectory)
            await self._attempt(task, paths, writer, outcome)
        except anyio.get_cancelled_exc_class():
            if writer is not None:
                writer.write(SessionEnd(reason="interrupted"))
                writer.close()
            raise
        except OSError as error:  # the run directory itself is unusable (disk full, permissions)
            outcome.fail("workspace", f"cannot write the task's files in {paths.dir}: {error}")
        except Exception as error:  # a runner bug must cost one task, not the run
            outcome.fail("internal", f"{type(error).__name__}: {error} ({self._save_traceback(paths)})")
        if writer is not None:
            # ``agent_logs_cut`` tells a reader of the trajectory that the agent's logs are partial.
            end = SessionEnd(
                reason=_end_reason(outcome),
                status=outcome.status,
                error_kind=outcome.error_kind,
                agent_logs_cut=outcome.logs_cut or None,
            )
            try:
                writer.write(end)
                writer.close()
            except OSError as error:  # the disk filled during the task: its end cannot be logged
                with suppress(OSError):
                    writer.close()
                if outcome.status == "completed":
                    outcome.fail("workspace", f"cannot write the task's trajectory in {paths.dir}: {error}")
        record = TaskRecord(
            task_id=task.task_id,
            category=task.category,
            status=outcome.status,
            error=outcome.error,
            error_kind=outcome.error_kind,
            turns=outcome.turns,
            tool_calls=_count_tool_calls(paths.trajectory),
            duration_s=round(time.monotonic() - started, 3),
            input_tokens=outcome.input_tokens,
            output_tokens=outcome.output_tokens,
            cost=outcome.cost,
            trajectory=paths.trajectory.name,
            agent_logs_cut=outcome.logs_cut or None,
        )
        self.manifest.record(record)
        return record

    @staticmethod
    def _save_traceback(paths: TaskPaths) -> str:
        logger.debug("task %s: internal error", paths.task_id, exc_info=True)
        detail = paths.file("runner-error.log")
        try:
            detail.parent.mkdir(parents=True, exist_ok=True)
            detail.write_text(traceback.format_exc(), encoding="utf-8")
        except OSError:
            return "run with -v for the traceback"
        return f"traceback in {detail}"

    def _reset(self, paths: TaskPaths) -> None:
        """A rerun starts clean; an earlier attempt's trajectory is kept aside, not merged."""
        if paths.trajectory.exists():
            attempt = 1
            while (old := paths.out / "tasks" / f"{paths.task_id}.attempt-{attempt}.jsonl.old").exists():
                attempt += 1
            old.parent.mkdir(parents=True, exist_ok=True)
            paths.trajectory.replace(old)
        if paths.dir.exists():
            shutil.rmtree(paths.dir)
        paths.dir.mkdir(parents=True)

    async def _attempt(self, task: BenchmarkTask, paths: TaskPaths, writer: TrajectoryWriter, outcome: _Outcome) -> None:
        """One run of ``task``: refuse it early, or prepare its workspace, log ``session_start``,
        run the agent through a fresh copilot, and log the answer and the workspace's changes."""
        workspace = paths.workspace.resolve()
        question = map_question(task.question, workspace)
        start = self._session_start(task, question, workspace)
        missing = missing_inputs(task.file_name, self.config.task_files)
        refusal = self._refusal(missing)
        if refusal is not None:
            writer.write(start)
            outcome.fail(*refusal)
            return
        try:
            warnings, rewrites = await self._prepare_workspace(paths, workspace)
        except (OSError, CopilotError) as error:
            writer.write(start)
            outcome.fail("workspace", f"cannot prepare the workspace: {error}")
            return
        if missing:
            warnings.append(f"input file(s) missing: {', '.join(missing)}")
        before = await anyio.to_thread.run_sync(snapshot, workspace)
        writer.write(self._with_preparation(start, paths, warnings, rewrites))
        launch = self._launch(task, question, paths)
        if self.config.agent_cmd is None:
            await self._run_builtin(question, launch, paths, writer, outcome)
        else:
            await self._run_command(task, question, launch, paths, writer, outcome)
        if outcome.answer and not outcome.answer_logged:
            writer.write(FinalAnswer(text=_bounded_answer(outcome.answer), **outcome.extra))
        changes = await anyio.to_thread.run_sync(lambda: diff(workspace, before))
        writer.write(changes)

    def _session_start(self, task: BenchmarkTask, question: str, workspace: Path) -> SessionStart:
        config = self.config
        return SessionStart(
            session_id=f"run-{uuid.uuid4().hex[:12]}",
            task_id=task.task_id,
            question=question,
            category=task.category or None,
            client={"name": "evaluation.run", "version": config.runner_version},
            agent=config.agent,
            model=config.agent_config.model if config.agent_cmd is None and config.agent_config else None,
            catalog_hash=config.catalog_hash,
            date=datetime.now(UTC).date().isoformat(),
            runner_version=config.runner_version,
            original_question=task.question,
            workspace=str(workspace),
            path_map={TASK_ROOT: str(workspace)},
            confirm=config.confirm,
        )

    def _refusal(self, missing: list[str]) -> tuple[ErrorKind, str] | None:
        """Why the task cannot start at all: its input files are missing."""
        if missing and not self.config.allow_missing_files:
            where = self.config.task_files or "(no --task-files)"
            # "Add them there" cannot fix a path that leads out of /root: the task list must change.
            outside = any(path.endswith(OUTSIDE_ROOT) for path in missing)
            fix = (
                f"correct the task's file_name (a path outside {TASK_ROOT} is never in the workspace)"
                if outside
                else "add them there"
            )
            return (
                "missing_files",
                f"input file(s) {', '.join(missing)} not found in {where}; "
                f"{fix} or pass --allow-missing-files to run the task anyway",
            )
        return None

    async def _prepare_workspace(self, paths: TaskPaths, workspace: Path) -> tuple[list[str], list[ServerRewrite]]:
        """Copy the task files in, give the children their home, and write the task's servers
        file; the copy's warnings and the servers' rewritten paths."""
        config = self.config
        warnings = await anyio.to_thread.run_sync(
            lambda: copy_task_files(config.task_files, workspace, skip={config.tasks_file, config.out})
        )
        if self._shared_locations is None:
            self._shared_locations = await anyio.to_thread.run_sync(shared_locations)
        home = paths.home.resolve()
        home.mkdir(parents=True, exist_ok=True)
        child_env = child_environment(home, self._shared_locations)
        rewrites = await anyio.to_thread.run_sync(
            lambda: write_task_servers(
                config.servers_file, paths.file("servers.json"), workspace, config.task_files, config.cwd, child_env,
                config.servers_text,
            )
        )
        return warnings, rewrites

    def _with_preparation(
        self, start: SessionStart, paths: TaskPaths, warnings: list[str], rewrites: list[ServerRewrite]
    ) -> SessionStart:
        """``session_start`` with what preparing the workspace found."""
        if self.config.unindexed_servers:
            warnings.append(f"not in the index (--allow-partial-index): {', '.join(self.config.unindexed_servers)}")
        start.servers_file = str(paths.file("servers.json"))  # type: ignore[attr-defined]
        if warnings:
            start.warnings = warnings  # type: ignore[attr-defined]
        if rewrites:
            start.server_rewrites = {  # type: ignore[attr-defined]
                r.server: [f"{old} -> {new}" for old, new in r.args] + [f"env {k}" for k in r.env] for r in rewrites
            }
        return start

    def _launch(self, task: BenchmarkTask, question: str, paths: TaskPaths) -> CopilotLaunch:
        config = self.config
        return copilot_launch(
            servers_file=paths.file("servers.json"),
            task_id=task.task_id,
            question=question,
            log_file=paths.trajectory.resolve(),
            copilot_home=config.copilot_home,
            cwd=config.cwd,
            category=task.category or None,
            workdir=paths.work.resolve(),
            child_log_dir=paths.child_logs.resolve(),
            inherit=config.inherit_env,
            placeholders=config.placeholder_env,
            roots=[paths.workspace.resolve()],
        )

    async def _run_builtin(
        self, question: str, launch: CopilotLaunch, paths: TaskPaths, writer: TrajectoryWriter, outcome: _Outcome
    ) -> None:
        agent_config = self.config.agent_config
        assert agent_config is not None and self.llm is not None
        price = price_for(self.config.price_table, agent_config.model)
        agent = CopilotAgent(self.llm, agent_config, on_usage=writer.write, price=price)
        stderr_path = paths.file("copilot.stderr.log")
        # Capped as an --agent-cmd agent's logs are: a copilot flooding its stderr must not fill the disk.
        stderr_log = BoundedLog(stderr_path, "stderr", self.config.max_agent_log_bytes, writer="the copilot")
        failure: tuple[ErrorKind, str] | None = None
        try:
            async with piped_into(stderr_log) as stderr:
                with anyio.move_on_after(self.config.task_timeout) as scope:
                    try:
                        answerer = elicitation_answerer(self.config.confirm, writer.write)
                        async with copilot_session(launch, stderr, agent_config.startup_timeout, answerer) as session:
                            outcome.answer = await agent.run(session, question)
                            # Logged at once, before the copilot's session ends: the log stays in time order.
                            writer.write(FinalAnswer(text=_bounded_answer(outcome.answer)))
                            outcome.answer_logged = True
                    except Exception as error:  # noqa: BLE001 -- classified below, never re-raised
                        failure = _classify(error)
        finally:
            cut = stderr_log.close()  # (also on cancellation: the tail and the note of what was cut)
        _record_cuts(outcome, paths.task_id, "the copilot", {stderr_path.name: cut} if cut is not None else {})
        if failure is not None:
            kind, message = failure
            if kind == "copilot_failed":  # its stderr says why (read once all of it is in)
                tail = stderr_tail(stderr_path, cut=cut)
                message += f" (copilot stderr: {tail})" if tail else f" (see {stderr_path})"
            outcome.fail(kind, message)
        if scope.cancelled_caught:
            outcome.fail("timeout", f"the task did not finish within {self.config.task_timeout:g} s (--task-timeout)")
        outcome.turns = agent.turns
        outcome.input_tokens, outcome.output_tokens, outcome.cost = agent.input_tokens, agent.output_tokens, agent.cost
        paths.file("messages.json").write_text(
            json.dumps(agent.messages, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
        )

    async def _run_command(
        self,
        task: BenchmarkTask,
        question: str,
        launch: CopilotLaunch,
        paths: TaskPaths,
        writer: TrajectoryWriter,
        outcome: _Outcome,
    ) -> None:
        assert self.config.agent_cmd is not None
        question_file = paths.file("question.txt")
        question_file.write_text(question, encoding="utf-8")
        # The run keeps a redacted copy; the agent reads the real one, kept outside the run if it holds a secret.
        shown_config = launch.write_mcp_config(paths.file("mcp_config.json"))
        answer_file = paths.file("answer.txt").resolve()
        with launch.agent_mcp_config(shown_config) as mcp_config:
            values = {
                "question": question,
                "question_file": str(question_file.resolve()),
                "mcp_config": str(mcp_config.resolve()),
                "workspace": str(paths.workspace.resolve()),
                "task_id": task.task_id,
                "answer_file": str(answer_file),
            }
            command = render_command(self.config.agent_cmd, values)
            paths.file("command.txt").write_text(command + "\n", encoding="utf-8")
            result = await run_external_agent(
                command,
                cwd=paths.workspace.resolve(),
                env=dict(os.environ),
                stdout_path=paths.file("agent.stdout.log"),
                stderr_path=paths.file("agent.stderr.log"),
                answer_file=answer_file,
                timeout=self.config.task_timeout,
                max_log_bytes=self.config.max_agent_log_bytes,
            )
        _record_cuts(outcome, task.task_id, "the agent", result.logs_cut)
        if result.usage is not None:
            writer.write(result.usage)
            outcome.input_tokens, outcome.output_tokens = result.usage.input_tokens, result.usage.output_tokens
            outcome.cost = result.usage.cost
        outcome.answer = result.answer
        if result.answer_source:
            outcome.extra["source"] = result.answer_source
        if result.error_kind is not None:
            outcome.fail(result.error_kind, result.error or result.error_kind)


def _record_cuts(outcome: _Outcome, task_id: str, writer: str, cuts: dict[str, LogCut]) -> None:
    """What ``--max-agent-log-bytes`` cut from each of ``writer``'s logs (file name -> cut), in the
    task's record and the runner's log."""
    for name, cut in cuts.items():
        outcome.logs_cut[name] = cut.cut
        logger.info(
            "task %s: %s wrote %d bytes to %s; %d cut from its middle (--max-agent-log-bytes)",
            task_id, writer, cut.written, name, cut.cut,
        )  # fmt: skip


def _classify(error: BaseException) -> tuple[ErrorKind, str]:
    """An agent failure (possibly inside an exception group from the MCP transport) as kind + text."""
    found = _find(error, AgentError)
    if isinstance(found, AgentError):
        return found.kind, str(found)
    leaf = _first_leaf(error)
    if isinstance(leaf, OSError):
        return "copilot_failed", f"cannot run the copilot: {leaf}"
    return "copilot_failed", f"the copilot connection failed ({type(leaf).__name__}: {leaf})"


def _find(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    if isinstance(error, kind):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    return None


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _end_reason(outcome: _Outcome) -> str:
    if outcome.status == "completed":
        return "task completed"
    return f"task {outcome.status} ({outcome.error_kind}): {outcome.error}"


def _count_tool_calls(trajectory: Path) -> int:
    count = 0
    try:
        with trajectory.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if '"event"' not in line:
                    continue
                try:
                    event = parse_event(line)
                except ValueError:
                    continue
                if event.event in ("route", "execute"):
                    count += 1
    except OSError:
        return 0
    return count


#: Longest final answer logged: the copilot's own bound on one logged string
#: (``COPILOT_LOG_MAX_FIELD_CHARS``'s default); what is beyond is cut with a note.
MAX_ANSWER_CHARS = 100_000


def _bounded_answer(text: str) -> str:
    capped, _ = cap_for_log(text, field_chars=MAX_ANSWER_CHARS, total_chars=MAX_ANSWER_CHARS)
    return str(capped)
