"""``python -m evaluation.run``: run an agent on LiveMCPBench tasks through the copilot.

    python -m evaluation.run --tasks annotated_data/all_annotations.json --out runs/gpt-4o \\
        --model gpt-4o                                            # the built-in MCP Copilot Agent
    python -m evaluation.run --tasks … --out runs/claude \\
        --agent-cmd 'claude -p {question} --mcp-config {mcp_config} --output-format json'

See the README's "Benchmark your own agent" section and :mod:`evaluation.runner` for the files
a run writes. A rerun with the same ``--out`` resumes: finished tasks are skipped.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evaluation.agent import AgentConfig
from evaluation.external_agent import check_template
from evaluation.judge import JudgeOptions, add_judge_arguments, judge_paths
from evaluation.llm import LLMError, client_for, resolve_llm_settings
from evaluation.run_models import RunManifest, TaskRecord, load_price_table, price_for
from evaluation.run_tasks import BenchmarkTask, load_tasks, select_tasks
from evaluation.runner import BUILTIN_AGENT, BenchmarkRunner, RunnerConfig
from index.errors import ConfigError, CopilotError
from index.settings import CopilotSettings
from index.console import make_console
from server.secrecy import protect_secrets

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
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tasks = parser.add_argument_group("tasks")
    tasks.add_argument("--tasks", type=Path, required=True, help="task list (LiveMCPBench all_annotations.json form)")
    tasks.add_argument(
        "--task-files", type=Path, help="directory with the tasks' files, mapped to /root (default: the --tasks file's directory)"
    )
    tasks.add_argument("--out", type=Path, required=True, help="run directory (rerun the same to resume), e.g. runs/NAME")
    tasks.add_argument("--only", nargs="+", action="extend", metavar="ID", help="only these task ids (unique prefixes work)")
    tasks.add_argument("--category", help="only this category (Office, Lifestyle, Leisure, Finance, Travel, Shopping)")
    tasks.add_argument("--limit", type=int, help="at most N tasks (after --only/--category)")
    tasks.add_argument("--concurrency", type=int, default=1, help="tasks at a time (default 1)")
    tasks.add_argument("--task-timeout", type=float, default=1200.0, help="seconds per task (default 1200)")
    tasks.add_argument("--retry-failed", action="store_true", help="rerun tasks that failed or timed out in --out")
    tasks.add_argument(
        "--allow-missing-files", action="store_true", help="run tasks even when an input file they name is missing"
    )

    copilot = parser.add_argument_group("copilot")
    copilot.add_argument("--servers", type=Path, help="servers file (default: COPILOT_SERVERS, ./servers.json, the project's)")
    copilot.add_argument("--copilot-home", type=Path, help="copilot home with the built index (default: COPILOT_HOME)")

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
    agent.add_argument("--base-url", help="OpenAI-compatible endpoint of the built-in agent (or OPENAI_BASE_URL)")
    agent.add_argument("--api-key", help="its API key (or OPENAI_API_KEY)")
    agent.add_argument("--model", help="its model (or MODEL)")
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


async def run_judge(args: argparse.Namespace, trajectories: list[Path], tasks_file: Path, console: Console) -> int:
    """``--judge``: the judge's own library entry with the ``--judge-*`` options."""
    options = JudgeOptions.from_args(args, prefix=JUDGE_PREFIX, tasks_file=tasks_file)
    summary = await judge_paths(trajectories, options)
    lo, hi = summary.ci95
    console.print(
        f"judged: {summary.success}/{summary.n_tasks} succeeded ({summary.success_rate:.1%}, 95% CI {lo:.1%}-{hi:.1%}), "
        f"{summary.abstain} abstain; verdicts and reports in {summary.out_dir}",
        highlight=False,
        markup=False,
    )
    for failure in summary.errors[:5]:
        console.print(f"[red]not judged[/red] {escape(failure.task_id)}: {escape(failure.error)}", highlight=False)
    if summary.fatal:
        console.print(f"[red]error:[/red] {escape(summary.fatal)}", highlight=False)
    return summary.exit_code


def write_run_tasks(tasks: list[BenchmarkTask], out: Path) -> Path:
    """``<out>/tasks.json``: the tasks this run holds, in the task-list form, so the judge's
    denominator is what was run (``python -m evaluation.judge OUT --tasks OUT/tasks.json``)."""
    path = out / "tasks.json"
    entries = [task.model_dump(mode="json", by_alias=True) for task in tasks]
    path.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------- main


def _catalog_hash(settings: CopilotSettings) -> str | None:
    """The digest of the catalog the index is built from (logged with every task)."""
    from index.records import load_catalog  # noqa: PLC0415 -- only when running

    try:
        return load_catalog(settings.catalog_file()).digest()
    except CopilotError as error:
        logger.warning("catalog hash unavailable: %s", error)
        return None


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
    if args.task_timeout <= 0:
        raise ConfigError(f"--task-timeout {args.task_timeout:g}: must be positive.")
    if args.max_turns < 1:
        raise ConfigError(f"--max-turns {args.max_turns}: must be at least 1.")
    if args.task_files is not None and not args.task_files.is_dir():
        raise ConfigError(f"--task-files {args.task_files}: no such directory.")
    if args.agent_cmd is not None:
        check_template(args.agent_cmd)


def _summary_table(tasks: list[BenchmarkTask], manifest: RunManifest, resumed: set[str]) -> Table:
    table = Table(title="run summary", show_lines=False)
    for column in ("task", "category", "status", "turns", "calls", "time", "error"):
        table.add_column(column, overflow="fold" if column == "error" else "ellipsis")
    for task in tasks:
        record = manifest.summary.tasks.get(task.task_id)
        if record is None:
            table.add_row(escape(task.task_id[:8]), escape(task.category), "not run", "", "", "", "")
            continue
        colour = "green" if record.status == "completed" else "red"
        status = f"[{colour}]{record.status}[/{colour}]" + (" (earlier)" if task.task_id in resumed else "")
        table.add_row(
            escape(task.task_id[:8]),
            escape(record.category),
            status,
            "" if record.turns is None else str(record.turns),
            str(record.tool_calls),
            f"{record.duration_s:.1f}s",
            escape(_short_error(record)),
        )
    return table


def _short_error(record: TaskRecord, limit: int = 90) -> str:
    """The table's error cell: the kind and the start of the message (all of it is in summary.json)."""
    if not record.error:
        return ""
    text = f"{record.error_kind}: {record.error}" if record.error_kind else record.error
    return text if len(text) <= limit else text[: limit - 1] + "…"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    console = make_console(stderr=True)
    try:
        return _main(args, console)
    except (CopilotError, LLMError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"interrupted: finished tasks are saved in {args.out / 'summary.json'}; rerun the same command to resume.",
            file=sys.stderr,
        )
        return 130


def _main(args: argparse.Namespace, console: Console) -> int:
    _validate(args)
    agent_label = _agent_label(args)
    task_files = _task_files(args, console)
    all_tasks = load_tasks(args.tasks)
    selected = select_tasks(all_tasks, only=args.only, category=args.category, limit=args.limit)
    if not selected:
        raise ConfigError("no task selected (check --only / --category / --limit).")
    settings = CopilotSettings() if args.copilot_home is None else CopilotSettings(home=args.copilot_home)
    servers_file = (args.servers or settings.servers_file()).resolve()
    from index.servers import load_servers  # noqa: PLC0415

    load_servers(servers_file)  # a broken servers file fails here, not in every task
    price_table = load_price_table(args.price_table) if args.price_table else None

    agent_config: AgentConfig | None = None
    llm = None
    api_key = None
    if args.agent_cmd is None:
        llm_settings = resolve_llm_settings(
            args.base_url, args.api_key, args.model, timeout=args.llm_timeout
        )
        agent_config = _agent_config(args, llm_settings.model, llm_settings.base_url)
        api_key = llm_settings.api_key
        llm = client_for(llm_settings)
        if price_table is not None and price_for(price_table, agent_config.model) is None:
            console.print(
                f"warning: {args.price_table} has no price for {agent_config.model}; cost not logged", markup=False
            )

    if args.judge:
        # A judge without a model should fail now, not after the whole run.
        JudgeOptions.from_args(args, prefix=JUDGE_PREFIX, tasks_file=args.tasks)

    out = args.out.resolve()
    model = agent_config.model if agent_config else None
    version = runner_version()
    manifest = RunManifest.open(
        out,
        runner_version=version,
        tasks_file=str(args.tasks.resolve()),
        servers_file=str(servers_file),
    )
    _check_same_agent(manifest, agent_label, model, out)
    manifest.summary.agent, manifest.summary.model = agent_label, model
    manifest.summary.catalog_hash = _catalog_hash(settings)
    manifest.save()

    resumed = {t.task_id for t in selected if manifest.finished(t.task_id, retry_failed=args.retry_failed)}
    pending = [t for t in selected if t.task_id not in resumed]
    if resumed:
        console.print(
            f"resuming {out}: {len(resumed)} task(s) finished earlier are skipped, {len(pending)} to run", markup=False
        )

    config = RunnerConfig(
        out=out,
        tasks_file=args.tasks.resolve(),
        task_files=task_files,
        servers_file=servers_file,
        copilot_home=(args.copilot_home or settings.home).resolve(),
        concurrency=args.concurrency,
        task_timeout=args.task_timeout,
        retry_failed=args.retry_failed,
        allow_missing_files=args.allow_missing_files,
        agent=agent_label,
        agent_cmd=args.agent_cmd,
        agent_config=agent_config,
        api_key=api_key,
        price_table=price_table,
        catalog_hash=manifest.summary.catalog_hash,
        runner_version=version,
        cwd=Path.cwd(),
    )
    runner = BenchmarkRunner(config, manifest, llm=llm, console=console)

    stopped_by: list[str] = []

    async def go() -> list[TaskRecord]:
        records: list[TaskRecord] = []
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_stop_on_signal, group.cancel_scope, stopped_by)
                records = await runner.run(pending)
                group.cancel_scope.cancel()
        finally:
            if llm is not None:
                await llm.close()
        return records

    records = anyio.run(go)
    if stopped_by:
        # Running tasks were stopped (their process trees too) and are not recorded: they rerun.
        raise KeyboardInterrupt(stopped_by[0])
    make_console().print(_summary_table(selected, manifest, resumed))
    finished = [manifest.summary.tasks[t.task_id] for t in selected if t.task_id in manifest.summary.tasks]
    completed = sum(1 for r in finished if r.status == "completed")
    console.print(
        f"{len(records)} task(s) run now, {len(resumed)} earlier; {completed}/{len(selected)} completed, "
        f"{len(finished) - completed} failed. Trajectories and summary.json in {out}",
        markup=False,
        highlight=False,
    )
    # The run's task list: everything this directory holds results for, in task-list order.
    run_tasks = [t for t in all_tasks if t.task_id in manifest.summary.tasks or t in selected]
    tasks_file = write_run_tasks(run_tasks, out)
    if args.judge:
        trajectories = [out / f"{t.task_id}.jsonl" for t in run_tasks if (out / f"{t.task_id}.jsonl").is_file()]
        if not trajectories:
            raise ConfigError("--judge: no trajectory to judge in this run.")
        return anyio.run(run_judge, args, trajectories, tasks_file, console)
    return 0


async def _stop_on_signal(scope: anyio.CancelScope, stopped_by: list[str]) -> None:
    """SIGTERM/SIGHUP (a CI timeout, a closed terminal) stop the run as cleanly as Ctrl-C."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for received in signals:
            stopped_by.append(signal.Signals(received).name)
            scope.cancel()
            return


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


if __name__ == "__main__":
    # The runner holds the agent's API key and is an ancestor of every child server its copilots start.
    protect_secrets()
    sys.exit(main())
