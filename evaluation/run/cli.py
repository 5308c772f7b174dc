"""``python -m evaluation.run``: run an agent on LiveMCPBench tasks through the copilot.

    python -m evaluation.run --tasks annotated_data/all_annotations.json --out runs/gpt-4o \\
        --model gpt-4o                                            # the built-in MCP Copilot Agent
    python -m evaluation.run --tasks … --out runs/claude \\
        --agent-cmd 'claude -p {question} --mcp-config {mcp_config} --output-format json'

See the README's "Benchmark your own agent" section and :mod:`evaluation.run.runner` for the files
a run writes. A rerun with the same ``--out`` resumes: finished tasks are skipped.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import math
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from pydantic import ValidationError
from rich.console import Console

from evaluation.run.agents.agent import AgentConfig
from evaluation.run.agents.bounded_log import DEFAULT_MAX_AGENT_LOG_BYTES, MIN_AGENT_LOG_BYTES
from evaluation.run.agents.confirm import CLIENT_POLICIES, DEFAULT_POLICY, ConfirmPolicy
from evaluation.run.agents.external_agent import check_template
from evaluation.judge.options import JudgeOptions, add_judge_arguments
from evaluation.judge.cli import judge_any
from evaluation.judge.pipeline import check_options
from evaluation.llm import LLMError, client_for, resolve_llm_settings
from evaluation.run.models import ModelPrice, RunManifest, TaskRecord, load_price_table, price_for
from evaluation.run.tasks import BenchmarkTask, load_tasks, select_tasks
from evaluation.run.task_setup.index_ready import ensure_index, refuse_partial
from evaluation.run.layout import run_directories
from evaluation.run.runner import BUILTIN_AGENT, BenchmarkRunner, RunnerConfig, check_setup
from evaluation.run.run_lock import run_lock
from evaluation.run.summary_view import summary_table
from index.errors import ConfigError, CopilotError
from index.catalog.servers import ServersFile, load_servers
from index.settings import CopilotSettings
from index.cli.console import HelpFormatter, argv_text, make_console, prepare_text_io
from index.cli.log_setup import log_handler, quiet_noisy_loggers

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

JUDGE_PREFIX = "judge-"


def runner_version() -> str:
    try:
        return importlib.metadata.version("mcp-copilot")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.run",
        description="Run an agent on LiveMCPBench tasks through the copilot; one trajectory per task in --out.",
        formatter_class=HelpFormatter,
    )
    tasks = parser.add_argument_group("tasks")
    tasks.add_argument("--tasks", type=Path, required=True, help="task list (LiveMCPBench all_annotations.json form)")
    tasks.add_argument(
        "--task-files", type=Path, help="directory with the tasks' files, mapped to /root (default: the --tasks file's directory)"
    )
    tasks.add_argument("--out", type=Path, required=True, help="run directory (rerun the same to resume), e.g. runs/NAME")
    tasks.add_argument("--only", nargs="+", action="extend", type=argv_text, metavar="ID", help="only these task ids (unique prefixes work)")
    tasks.add_argument("--category", type=argv_text, help="only this category (Office, Lifestyle, Leisure, Finance, Travel, Shopping)")
    tasks.add_argument("--limit", type=int, help="at most N tasks (after --only/--category)")
    tasks.add_argument("--concurrency", type=int, default=1, help="tasks at a time (default 1)")
    tasks.add_argument("--task-timeout", type=float, default=1200.0, help="seconds per task (default 1200)")
    tasks.add_argument(
        "--repeats",
        type=int,
        metavar="N",
        help="run every task N times, in --out/repeat-1 … repeat-N (the judge reports pass@k); default: what --out holds, else 1",
    )
    tasks.add_argument("--retry-failed", action="store_true", help="rerun tasks that failed or timed out in --out")
    tasks.add_argument(
        "--allow-missing-files", action="store_true", help="run tasks even when an input file they name is missing"
    )

    copilot = parser.add_argument_group("copilot")
    copilot.add_argument("--servers", type=Path, help="servers file (default: COPILOT_SERVERS, ./servers.json, the project's)")
    copilot.add_argument(
        "--copilot-home", type=Path, help="copilot home holding the index, built there if needed (default: COPILOT_HOME)"
    )
    copilot.add_argument(
        "--allow-partial-index",
        action="store_true",
        help="run the tasks even when some servers could not be indexed (they are listed in each task's log)",
    )
    copilot.add_argument(
        "--confirm",
        choices=CLIENT_POLICIES,
        help="how the built-in agent's client answers the copilot's confirmation questions: approve (default, "
        "like a user who approves everything), deny, or ask (no elicitation: the agent gets the confirm-token message)",
    )

    agent = parser.add_argument_group("agent")
    agent.add_argument(
        "--agent",
        default=BUILTIN_AGENT,
        help="'copilot': the built-in MCP Copilot Agent (default); with --agent-cmd: a label for your agent",
    )
    agent.add_argument(
        "--agent-cmd",
        metavar="TEMPLATE",
        help="run this command per task; placeholders {question} {question_file} {mcp_config} {workspace} "
        "{task_id} {answer_file} are substituted shell-quoted",
    )
    agent.add_argument(
        "--max-agent-log-bytes",
        type=int,
        metavar="N",
        help="most bytes kept of each agent log (an --agent-cmd agent's stdout and stderr, the built-in agent's "
        "copilot's stderr), its first and last halves with a note of what was cut between them "
        f"(default {DEFAULT_MAX_AGENT_LOG_BYTES}, "
        f"{DEFAULT_MAX_AGENT_LOG_BYTES // 2**20} MiB)",
    )
    agent.add_argument("--base-url", help="OpenAI-compatible endpoint of the built-in agent (or OPENAI_BASE_URL)")
    agent.add_argument("--api-key", help="its API key (or OPENAI_API_KEY)")
    agent.add_argument("--model", type=argv_text, help="its model (or MODEL)")
    agent.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (default 0.7, the paper's)")
    agent.add_argument("--max-turns", type=int, default=50, help="model calls per task (default 50)")
    agent.add_argument(
        "--max-tool-chars", type=int, default=10_000, help="tool results shown to the model are cut here (default 10000)"
    )
    agent.add_argument("--tool-timeout", type=float, default=300.0, help="seconds per route/execute call (default 300)")
    agent.add_argument("--llm-timeout", type=float, default=300.0, help="seconds per model request (default 300)")
    agent.add_argument("--price-table", type=Path, help='JSON {"model": {"input": $/1M, "output": $/1M}} to log cost')

    parser.add_argument("--judge", action="store_true", help="judge the run when it finishes (options: --judge-…)")
    judge = parser.add_argument_group(
        "judge", "with --judge: the options of python -m evaluation.judge, prefixed --judge- (e.g. --judge-model)"
    )
    add_judge_arguments(judge, prefix=JUDGE_PREFIX, exclude={"tasks"})
    parser.add_argument("-v", "--verbose", action="store_true", help="log more (to stderr)")
    return parser


# ---------------------------------------------------------------------------------- judge


async def run_judge(args: argparse.Namespace, run_dirs: list[Path], out: Path, console: Console) -> int:
    """``--judge``: the judge's own entry with the ``--judge-*`` options, on what this run holds."""
    options = JudgeOptions.from_args(args, prefix=JUDGE_PREFIX)
    if len(run_dirs) == 1 and run_dirs[0] == out:
        options = options.model_copy(update={"tasks_file": out / "tasks.json"})
    return await judge_any([out], options, False, console)


def write_run_tasks(tasks: list[BenchmarkTask], out: Path) -> Path:
    """``<out>/tasks.json``: the tasks this run holds, in the task-list form, so the judge's
    denominator is what was run (``python -m evaluation.judge OUT --tasks OUT/tasks.json``)."""
    path = out / "tasks.json"
    entries = [task.model_dump(mode="json", by_alias=True) for task in tasks]
    try:
        path.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as error:
        what = "a directory is in its place" if path.is_dir() else (error.strerror or str(error))
        raise ConfigError(f"cannot write the run's task list {path} ({what}); use another --out directory.") from None
    return path


# ---------------------------------------------------------------------------------- main


def _catalog_hash(settings: CopilotSettings) -> str | None:
    """The digest of the catalog the index is built from (logged with every task)."""
    from index.catalog.records import load_catalog  # noqa: PLC0415 -- only when running

    try:
        return load_catalog(settings.catalog_file()).digest()
    except CopilotError as error:
        logger.warning("catalog hash unavailable: %s", error)
        return None


def _run_directory(path: Path) -> Path:
    """``--out``, created now: a path that cannot be a directory fails before any task starts."""
    out = path.resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        what = "it is a file" if out.is_file() else (error.strerror or str(error))
        raise ConfigError(f"--out {path}: cannot use it as the run directory ({what}); pass a directory.") from None
    return out


def _agent_label(args: argparse.Namespace) -> str:
    if args.agent_cmd is None:
        if args.agent != BUILTIN_AGENT:
            raise ConfigError(
                f"--agent {args.agent}: the built-in agent is '{BUILTIN_AGENT}'; run other agents with --agent-cmd 'TEMPLATE'."
            )
        return BUILTIN_AGENT
    if args.agent != BUILTIN_AGENT:
        return args.agent
    try:
        program = shlex.split(args.agent_cmd)[0]
    except (ValueError, IndexError):
        return "command"
    return Path(program).name or "command"


def _task_files(args: argparse.Namespace, console: Console) -> Path | None:
    """``--task-files``, else the task list's directory in LiveMCPBench's layout
    (``annotated_data/all_annotations.json``); never an arbitrary directory by accident."""
    if args.task_files is not None:
        return args.task_files.resolve()
    if args.tasks.name == "all_annotations.json":
        return args.tasks.parent.resolve()
    console.print(
        f"note: no --task-files given and {args.tasks.name} is not LiveMCPBench's all_annotations.json: "
        "workspaces start empty",
        highlight=False,
        markup=False,
    )
    return None


#: AgentConfig fields -> the flags they come from (for validation errors).
_AGENT_FLAGS = {
    "temperature": "--temperature",
    "max_turns": "--max-turns",
    "max_tool_result_chars": "--max-tool-chars",
    "tool_timeout": "--tool-timeout",
}


def _agent_config(args: argparse.Namespace, model: str, base_url: str) -> AgentConfig:
    """The built-in agent's settings; an out-of-range flag is a ConfigError naming it, not a traceback."""
    try:
        return AgentConfig(
            model=model,
            temperature=args.temperature,
            max_turns=args.max_turns,
            max_tool_result_chars=args.max_tool_chars,
            tool_timeout=args.tool_timeout,
            base_url=base_url,
        )
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        flag = _AGENT_FLAGS.get(field, field)
        raise ConfigError(f"{flag} {first.get('input')!r}: {first['msg']}.") from None


def _validate(args: argparse.Namespace) -> None:
    if args.concurrency < 1:
        raise ConfigError(f"--concurrency {args.concurrency}: must be at least 1.")
    for flag, seconds in (("--task-timeout", args.task_timeout), ("--llm-timeout", args.llm_timeout)):
        if not (seconds > 0 and math.isfinite(seconds)):  # NaN fails every comparison: "<= 0" let it through
            raise ConfigError(f"{flag} {seconds:g}: must be a positive number of seconds.")
    if args.max_turns < 1:
        raise ConfigError(f"--max-turns {args.max_turns}: must be at least 1.")
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit {args.limit}: must be at least 1 (leave it out to run every selected task).")
    if args.repeats is not None and args.repeats < 1:
        raise ConfigError(f"--repeats {args.repeats}: must be at least 1.")
    if args.task_files is not None and not args.task_files.is_dir():
        raise ConfigError(f"--task-files {args.task_files}: no such directory.")
    if args.agent_cmd is not None:
        check_template(args.agent_cmd)
    _check_log_cap(args)


def _check_log_cap(args: argparse.Namespace) -> None:
    if args.max_agent_log_bytes is None:
        return
    if args.max_agent_log_bytes < MIN_AGENT_LOG_BYTES:
        raise ConfigError(f"--max-agent-log-bytes {args.max_agent_log_bytes}: must be at least {MIN_AGENT_LOG_BYTES}.")


def _user_error(group: BaseExceptionGroup) -> CopilotError | LLMError | None:
    """The first error of ``group`` meant for the user, or None (then it is a bug to show whole)."""
    for error in group.exceptions:
        if isinstance(error, CopilotError | LLMError):
            return error
        if isinstance(error, BaseExceptionGroup) and (found := _user_error(error)) is not None:
            return found
    return None


def main(argv: Sequence[str] | None = None) -> int:
    prepare_text_io()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[log_handler()])
    quiet_noisy_loggers()  # HTTP clients log URLs with credentials at INFO
    console = make_console(stderr=True)
    try:
        return _main(args, console)
    except (CopilotError, LLMError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BaseExceptionGroup as group:  # raised inside the runner's task group (a summary it cannot save)
        reason = _user_error(group)
        if reason is None:
            raise
        print(f"error: {reason}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        by = stop.args[0] if stop.args and isinstance(stop.args[0], str) else "SIGINT"
        saved = args.out / "repeat-*" / "summary.json" if args.repeats else args.out / "summary.json"
        print(
            f"interrupted ({by}): finished tasks are saved in {saved}; rerun the same command to resume.",
            file=sys.stderr,
        )
        return 130


def _main(args: argparse.Namespace, console: Console) -> int:
    _validate(args)
    agent_label = _agent_label(args)
    confirm = _confirm_policy(args)
    task_files = _task_files(args, console)
    all_tasks = load_tasks(args.tasks)
    selected = select_tasks(all_tasks, only=args.only, category=args.category, limit=args.limit)
    if not selected:
        raise ConfigError("no task selected (check --only / --category / --limit).")
    settings = CopilotSettings.load() if args.copilot_home is None else CopilotSettings.load(home=args.copilot_home)
    servers_file = (args.servers or settings.servers_file()).resolve()
    servers = load_servers(servers_file)  # a broken servers file fails here, not in every task
    price_table = load_price_table(args.price_table) if args.price_table else None
    agent_config, llm, api_key = _builtin_agent(args, price_table, console)
    if args.judge:
        # A judge without a model, a missing --judge-human-labels, a bad --judge-tools or an
        # unwritable --judge-out should fail now, not after the whole run.
        check_options(JudgeOptions.from_args(args, prefix=JUDGE_PREFIX, tasks_file=args.tasks))

    out = _run_directory(args.out)
    # Held until the run (and its judging) ends: a second run on this --out stops before any task.
    with run_lock(out):
        config = RunnerConfig(
            out=out,
            tasks_file=args.tasks.resolve(),
            task_files=task_files,
            servers_file=servers_file,
            servers_text=servers.text,
            copilot_home=(args.copilot_home or settings.home).resolve(),
            concurrency=args.concurrency,
            task_timeout=args.task_timeout,
            retry_failed=args.retry_failed,
            allow_missing_files=args.allow_missing_files,
            agent=agent_label,
            agent_cmd=args.agent_cmd,
            max_agent_log_bytes=args.max_agent_log_bytes or DEFAULT_MAX_AGENT_LOG_BYTES,
            agent_config=agent_config,
            api_key=api_key,
            price_table=price_table,
            catalog_hash=_catalog_hash(settings),
            runner_version=runner_version(),
            cwd=Path.cwd(),
            confirm=confirm,
            inherit_env=sorted({name for cfg in servers.enabled().values() for name in cfg.inherit_env}),
            placeholder_env=sorted({name for cfg in servers.enabled().values() for name in cfg.placeholder_variables()}),
        )
        repeats = [_open_repeat(directory, args, all_tasks, selected, config) for directory in run_directories(out, args.repeats)]
        for repeat in repeats:
            if repeat.resumed:
                console.print(_resume_note(repeat), markup=False, highlight=False)
        work = _Work(config, repeats, servers, args.allow_partial_index, llm, console)
        records = work.run()
        _print_end(selected, repeats, records, out, console)
        for repeat in repeats:
            repeat.write_tasks(all_tasks, selected)
        if args.judge:
            return anyio.run(run_judge, args, [r.out for r in repeats], out, console)
        return 0


def _builtin_agent(
    args: argparse.Namespace, price_table: dict[str, ModelPrice] | None, console: Console
) -> tuple[AgentConfig | None, openai.AsyncOpenAI | None, str | None]:
    """The built-in agent's settings, model client and key (all ``None`` with ``--agent-cmd``)."""
    if args.agent_cmd is not None:
        return None, None, None
    llm_settings = resolve_llm_settings(args.base_url, args.api_key, args.model, timeout=args.llm_timeout, jury=False)
    agent_config = _agent_config(args, llm_settings.model, llm_settings.base_url)
    if price_table is not None and price_for(price_table, agent_config.model) is None:
        console.print(f"warning: {args.price_table} has no price for {agent_config.model}; cost not logged", markup=False)
    return agent_config, client_for(llm_settings), llm_settings.api_key


class _Work:
    """The run's async part: index readiness, then every repeat's pending tasks, stopped cleanly
    by SIGTERM/SIGHUP; a refusal (partial index) surfaces as its own error, not a task group's."""

    def __init__(
        self,
        config: RunnerConfig,
        repeats: list[_Repeat],
        servers: ServersFile,
        allow_partial_index: bool,
        llm: openai.AsyncOpenAI | None,
        console: Console,
    ) -> None:
        self.config, self.repeats, self.servers = config, repeats, servers
        self.allow_partial_index, self.llm, self.console = allow_partial_index, llm, console
        self.stopped_by: list[str] = []
        self.refused: list[CopilotError] = []

    def run(self) -> list[TaskRecord]:
        records = anyio.run(self._go)
        if self.refused:
            raise self.refused[0]
        if self.stopped_by:
            # Running tasks were stopped (their process trees too) and are not recorded: they rerun.
            raise KeyboardInterrupt(self.stopped_by[0])
        return records

    async def _go(self) -> list[TaskRecord]:
        records: list[TaskRecord] = []
        try:
            # The signal watcher lives outside the work it stops: while the stopped tasks clean up
            # (an agent given 5 s to leave, its private config removed), a second SIGTERM must not
            # find the default handler back -- it killed the runner mid-cleanup, leaving the agent
            # running and its config with the run's secrets in the temporary directory.
            async with anyio.create_task_group() as watching:
                with anyio.CancelScope() as work:
                    watching.start_soon(_stop_on_signal, work, self.stopped_by)
                    try:
                        records = await self._tasks()
                    except CopilotError as error:
                        self.refused.append(error)
                watching.cancel_scope.cancel()
        finally:
            if self.llm is not None:
                await self.llm.close()
        return records

    async def _tasks(self) -> list[TaskRecord]:
        config = self.config
        if pending := sum(len(repeat.pending) for repeat in self.repeats):
            # Before indexing, which can take minutes: a wrong URL or agent program fails at once.
            await check_setup(config, pending)
            assert config.copilot_home is not None
            coverage = await ensure_index(self.servers, config.copilot_home, self.console)
            if not self.allow_partial_index:
                refuse_partial(coverage, config.servers_file)
            config.unindexed_servers = sorted(coverage.missing)
            for repeat in self.repeats:
                repeat.manifest.summary.index = coverage
                repeat.manifest.save()
        records: list[TaskRecord] = []
        for repeat in self.repeats:
            label = repeat.out.name if len(self.repeats) > 1 else ""
            runner = BenchmarkRunner(
                config.model_copy(update={"out": repeat.out}),
                repeat.manifest,
                llm=self.llm,
                console=self.console,
                label=label,
            )
            records += await runner.run(repeat.pending)
        return records


def _print_end(selected: list[BenchmarkTask], repeats: list[_Repeat], records: list[TaskRecord], out: Path, console: Console) -> None:
    for repeat in repeats:
        title = "run summary" if len(repeats) == 1 else f"run summary: {repeat.out.name}"
        make_console().print(summary_table(selected, repeat.manifest, repeat.resumed, title))
    finished = [r.manifest.summary.tasks[t.task_id] for r in repeats for t in selected if t.task_id in r.manifest.summary.tasks]
    completed = sum(1 for r in finished if r.status == "completed")
    console.print(
        f"{len(records)} task run(s) now, {sum(len(r.resumed) for r in repeats)} earlier; "
        f"{completed}/{len(selected) * len(repeats)} completed, {len(finished) - completed} failed. "
        f"Trajectories and summary.json in {out}",
        markup=False,
        highlight=False,
    )


def _resume_note(repeat: _Repeat) -> str:
    """What a resumed run skips; failed ones are named as such, since a rerun after fixing the cause
    (an endpoint that was down, a missing agent program) would otherwise silently run nothing."""
    note = f"resuming {repeat.out}: {len(repeat.resumed)} task(s) finished earlier are skipped, {len(repeat.pending)} to run"
    failed = sum(1 for task_id in repeat.resumed if repeat.manifest.summary.tasks[task_id].status != "completed")
    if failed:
        note += f" ({failed} of the skipped failed or timed out: --retry-failed reruns them)"
    return note


class _Repeat:
    """One run directory of this command: its manifest and what it still has to run."""

    def __init__(self, out: Path, manifest: RunManifest, resumed: set[str], pending: list[BenchmarkTask]) -> None:
        self.out, self.manifest, self.resumed, self.pending = out, manifest, resumed, pending

    def write_tasks(self, all_tasks: list[BenchmarkTask], selected: list[BenchmarkTask]) -> Path:
        """``tasks.json``: everything this directory holds or is about to run, in task-list order."""
        chosen = {task.task_id for task in selected} | set(self.manifest.summary.tasks)
        return write_run_tasks([task for task in all_tasks if task.task_id in chosen], self.out)


def _open_repeat(
    out: Path, args: argparse.Namespace, all_tasks: list[BenchmarkTask], selected: list[BenchmarkTask], config: RunnerConfig
) -> _Repeat:
    manifest = RunManifest.open(
        out, runner_version=config.runner_version, tasks_file=str(args.tasks.resolve()), servers_file=str(config.servers_file)
    )
    model = config.agent_config.model if config.agent_config else None
    _check_same_agent(manifest, config.agent, model, out)
    summary = manifest.summary
    summary.agent, summary.model, summary.catalog_hash, summary.confirm = config.agent, model, config.catalog_hash, config.confirm
    manifest.save()
    resumed = {t.task_id for t in selected if manifest.finished(t.task_id, retry_failed=args.retry_failed)}
    repeat = _Repeat(out, manifest, resumed, [t for t in selected if t.task_id not in resumed])
    # Written now, not at the end: an interrupted run is judged against what it set out to do.
    repeat.write_tasks(all_tasks, selected)
    return repeat


def _confirm_policy(args: argparse.Namespace) -> ConfirmPolicy:
    if args.agent_cmd is None:
        return args.confirm or DEFAULT_POLICY
    if args.confirm is not None:
        raise ConfigError(
            f"--confirm {args.confirm}: applies to the built-in agent. With --agent-cmd the agent's own MCP host "
            "answers the copilot's confirmations (elicitation if it supports it, else the confirm-token round trip)."
        )
    return "host"


def _handled_signals() -> list[signal.Signals]:
    """SIGTERM, and SIGHUP unless it was ignored when we started (``nohup``: keep running)."""
    handled = [signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        handled.append(signal.SIGHUP)
    return handled


async def _stop_on_signal(scope: anyio.CancelScope, stopped_by: list[str]) -> None:
    """SIGTERM/SIGHUP (a CI timeout, a closed terminal) stop the run as cleanly as Ctrl-C, also
    where Ctrl-C cannot reach it (a background job ignores SIGINT)."""
    with anyio.open_signal_receiver(*_handled_signals()) as signals:
        async for received in signals:
            name = signal.Signals(received).name
            if stopped_by:
                logger.warning("received %s while stopping: the stopped tasks are still cleaning up", name)
                continue
            stopped_by.append(name)
            scope.cancel()


def _check_same_agent(manifest: RunManifest, agent: str, model: str | None, out: Path) -> None:
    """One run directory holds one agent's results; mixing two would make the score meaningless."""
    summary = manifest.summary
    if not summary.tasks:
        return
    if summary.agent and (summary.agent != agent or (summary.model or None) != model):
        earlier = summary.agent + (f" with model {summary.model}" if summary.model else "")
        now = agent + (f" with model {model}" if model else "")
        raise ConfigError(
            f"{out} holds a run of {earlier}; this command runs {now}. Use another --out (or the same agent and model)."
        )
