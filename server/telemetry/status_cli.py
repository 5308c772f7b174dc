"""``python -m server status``: the copilots running with this ``COPILOT_HOME`` and what they are doing."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from index.cli.console import HelpFormatter, make_console, prepare_text_io
from server.telemetry.status import CopilotStatus, read_statuses


def copilot_command() -> str:
    """How the user started the copilot: the ``mcp-copilot`` script, or ``python -m server``."""
    return "mcp-copilot" if Path(sys.argv[0]).name == "mcp-copilot" else "python -m server"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{copilot_command()} status",
        description="Show the copilots running with this COPILOT_HOME: live children, recent errors, index state.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--home", type=Path, help="the copilot's home (default: COPILOT_HOME or the per-user data dir)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _model_note(state: object) -> str:
    """How route ranks now, after the model's name (nothing from a copilot that does not say)."""
    if not isinstance(state, dict) or not state.get("state"):
        return ""
    if state["state"] == "loaded":
        return " (loaded)"
    if state["state"] == "failed":
        return f" (failed to load: {state.get('reason', '?')}; route answers by keywords until a retry loads it)"
    return f" ({state['state']}: route answers by keywords until it is loaded)"


def _print(status: CopilotStatus) -> None:
    console = make_console()
    where = f" at {status.http_url}" if status.http_url else ""
    console.print(
        f"[bold]copilot pid {status.pid}[/] ({escape(status.transport)}{escape(where)}), version {escape(status.version)}, "
        f"up since {escape(status.started_at)}, updated {escape(status.updated_at)}",
        highlight=False,
    )
    console.print(f"  servers file: {escape(status.servers_file or '-')} ({status.servers_enabled} enabled)", highlight=False)
    index = status.index
    indexing = status.indexing
    state = f"{index.get('tool_count', '?')} tools, model {index.get('model', '?')}{_model_note(index.get('model_state'))}"
    usage = index.get("usage_prior")
    if isinstance(usage, dict):
        state += f"; usage prior of {usage.get('trajectories', '?')} trajectories, weight {usage.get('weight', '?')}"
    if indexing.get("in_progress"):
        state += f"; indexing {len(indexing.get('pending_servers', []))} server(s)"
    if indexing.get("failed_servers"):
        state += f"; could not index: {', '.join(sorted(indexing['failed_servers']))}"
    console.print(f"  index: {escape(state)}", highlight=False)
    calls = status.calls
    console.print(
        f"  calls: {calls.get('route', 0)} route, {calls.get('execute', 0)} execute "
        f"({calls.get('execute_errors', 0)} errors)",
        highlight=False,
    )
    if status.held_back:
        console.print(f"  [red]held back[/]: {escape(', '.join(status.held_back))} (see python -m index trust)", highlight=False)
    if status.children:
        table = Table(title="children", title_justify="left")
        columns = ("server", "state", "pid", "calls", "errors", "in flight", "restarts", "idle stops", "isolated", "last used")
        for column in columns:
            table.add_column(column, no_wrap=column != "server")
        for child in status.children:
            table.add_row(
                escape(child.server), escape(child.state), str(child.pid or "-"), str(child.calls), str(child.errors),
                str(child.in_flight), str(child.restarts), str(child.idle_stops),
                {True: "yes", False: "no", None: "-"}[child.isolated], escape(child.last_used or "-"),
            )
        console.print(table)
    else:
        console.print("  children: none running", highlight=False)
    if status.recent_errors:
        console.print("  recent errors:", highlight=False)
        for error in status.recent_errors[-10:]:
            console.print(
                f"    {escape(error.at)} {escape(error.server)}/{escape(error.tool)} {escape(f'[{error.kind}]')}: "
                f"{escape(error.message)}",
                highlight=False,
            )


def main(argv: Sequence[str]) -> int:
    prepare_text_io()
    args = build_parser().parse_args(list(argv))
    from index.settings import CopilotSettings

    home = args.home if args.home is not None else CopilotSettings.load().home
    statuses, notes = read_statuses(home)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps([status.model_dump(mode="json") for status in statuses], indent=1))
        return 0 if statuses else 1
    if not statuses:
        print(f"no copilot is running with home {home} (python -m server starts one).")
        return 1
    for status in statuses:
        _print(status)
    return 0
