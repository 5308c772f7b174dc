"""``python -m server``: the copilot MCP server over stdio (default) or streamable HTTP.

stdio mode writes nothing but protocol messages to stdout: our logs go to stderr, and while
serving the SDK points file descriptor 1 at stderr so stray prints of libraries cannot
corrupt the protocol stream either.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from index.cli.console import HelpFormatter, argv_text

#: Nothing may reach the network or print banners at run time (set before any import of them).
_QUIET_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "ANONYMIZED_TELEMETRY": "False",
}

logger = logging.getLogger("server")


def build_parser() -> argparse.ArgumentParser:
    from server.telemetry.status_cli import copilot_command

    prog = copilot_command()
    parser = argparse.ArgumentParser(
        prog=prog,
        description="MCP Copilot: one MCP server with 'route' (find tools) and 'execute' (call them) over many "
        "servers.",
        formatter_class=HelpFormatter,
        epilog=f"'{prog} status' shows the copilots running with this COPILOT_HOME.",
    )
    parser.add_argument(
        "--servers", type=Path, help="servers.json or any Claude-Desktop-style config (COPILOT_SERVERS)"
    )
    transport = parser.add_argument_group("HTTP transport (default: stdio)")
    transport.add_argument("--http", action="store_true", help="serve streamable HTTP at http://HOST:PORT/mcp")
    transport.add_argument("--host", help="interface to bind (COPILOT_HTTP_HOST, default 127.0.0.1)")
    transport.add_argument("--port", type=int, help="port (COPILOT_HTTP_PORT, default 8765)")
    transport.add_argument(
        "--token",
        help="bearer token clients must send (COPILOT_HTTP_TOKEN); required beyond loopback. Other users can "
        "read a process's arguments: prefer COPILOT_HTTP_TOKEN or --token-file",
    )
    transport.add_argument(
        "--token-file", type=Path, help="read the bearer token from this file's first line (COPILOT_HTTP_TOKEN_FILE)"
    )
    logs = parser.add_argument_group("trajectory logs")
    logs.add_argument("--task-id", type=argv_text, help="task id recorded in session_start (COPILOT_TASK_ID)")
    logs.add_argument("--question", type=argv_text, help="task question recorded in session_start (COPILOT_QUESTION)")
    logs.add_argument("--category", type=argv_text, help="task category recorded in session_start (COPILOT_CATEGORY)")
    logs.add_argument("--log-file", type=Path, help="write the trajectory to exactly this file (COPILOT_LOG_FILE)")
    logs.add_argument("--log-dir", type=Path, help="directory of per-session trajectories (COPILOT_LOG_DIR)")
    safety = parser.add_argument_group("safety")
    safety.add_argument(
        "--read-only", action="store_true", default=None,
        help="allow only tools that declare readOnlyHint: true; refuse the rest (COPILOT_READ_ONLY)",
    )
    safety.add_argument(
        "--allow", nargs="+", type=argv_text, metavar="PATTERN", help="only these 'server' or 'server/tool' globs (COPILOT_ALLOW)"
    )
    safety.add_argument(
        "--deny", nargs="+", type=argv_text, metavar="PATTERN", help="never these 'server' or 'server/tool' globs (COPILOT_DENY)"
    )
    parser.add_argument(
        "--no-auto-index",
        dest="auto_index",
        action="store_false",
        default=None,
        help="do not crawl/index servers the index does not know at startup (COPILOT_AUTO_INDEX=false)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    return parser


#: Settings field -> the flag that sets it: an error names the flag when the value came from one.
_FLAGS = {
    "servers": "--servers",
    "http_host": "--host",
    "http_port": "--port",
    "http_token": "--token",
    "http_token_file": "--token-file",
    "task_id": "--task-id",
    "question": "--question",
    "category": "--category",
    "log_file": "--log-file",
    "log_dir": "--log-dir",
    "allow": "--allow",
    "deny": "--deny",
}


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    mapping = {
        "servers": args.servers,
        "http_host": args.host,
        "http_port": args.port,
        "http_token": args.token,
        "http_token_file": args.token_file,
        "task_id": args.task_id,
        "question": args.question,
        "category": args.category,
        "log_file": args.log_file,
        "log_dir": args.log_dir,
        "read_only": args.read_only,
        "allow": args.allow,
        "deny": args.deny,
        "auto_index": args.auto_index,
    }
    if args.verbose:
        mapping["log_level"] = "DEBUG"
    return {key: value for key, value in mapping.items() if value is not None}


def _configure_logging(level: str) -> None:
    from index.cli.log_setup import log_handler, quiet_noisy_loggers
    from server.bounded import RepeatedLogLines

    handler = log_handler("%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Third-party chatter that would drown the copilot's own lines, and print remote servers' URLs
    # with their secrets (the MCP SDK's client names each endpoint at DEBUG).
    quiet_noisy_loggers(root.level)
    # The SDK's client session logs each notification of a child it cannot read, with a traceback.
    sdk_client = logging.getLogger("client")
    if not any(isinstance(existing, RepeatedLogLines) for existing in sdk_client.filters):
        sdk_client.addFilter(RepeatedLogLines())


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


#: Run before the process leaves (flushing traces); ``_exit_now`` skips Python's own exit handlers.
_BEFORE_EXIT: list[Any] = []


def _exit_now(code: int = 0) -> None:
    while _BEFORE_EXIT:
        try:
            _BEFORE_EXIT.pop()()
        except Exception:  # noqa: BLE001 -- leaving must not fail
            logger.debug("exit hook failed", exc_info=True)
    from index.search.model_loading import remove_refuges  # noqa: PLC0415

    remove_refuges()
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)


async def _watch_signals(serving: Any, shutdown: Any, before_stop: Callable[[str], Awaitable[Any]]) -> None:
    """The first SIGTERM/SIGINT/SIGHUP starts a clean shutdown; a later one hurries it, never aborts it.

    Default handling would kill the copilot mid-cleanup, leaving children behind; instead every
    child's whole tree is SIGKILLed at once and the shutdown finishes (logs get their
    ``session_end``). ``before_stop(signal name)`` answers the requests in flight first.
    """
    import anyio

    from index.children.containment.guard import child_guard

    async def stop(name: str) -> None:
        try:
            await before_stop(name)
        finally:
            serving.cancel()

    async with anyio.create_task_group() as stopping:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for received in signals:
                name = signal.Signals(received).name
                if shutdown.reason is None:
                    shutdown.reason = name
                    logger.info("received %s, shutting down", name)
                    stopping.start_soon(stop, name)  # still listening: a second signal hurries it
                else:
                    logger.warning("received %s during shutdown: killing every child now, then finishing", name)
                    child_guard().kill_all()


async def _serve_stdio(app: Any, shutdown: Any, fast: bool, telemetry: Any) -> None:
    import anyio

    from server.stdio.serve import answer_in_flight, serve_stdio

    def on_stopped() -> None:
        # After a signal the client may keep stdin open, and the SDK's stdin reader thread cannot
        # be cancelled: once every child is stopped and every log closed, leave without it.
        if shutdown.reason is not None:
            _exit_now()

    shutdown.on_stopped = on_stopped
    async with anyio.create_task_group() as watchers:
        with anyio.CancelScope() as serving:
            watchers.start_soon(_watch_signals, serving, shutdown, partial(answer_in_flight, app))
            await serve_stdio(app, fast=fast, on_taken=telemetry.fast_call)
        watchers.cancel_scope.cancel()


async def _serve_http(app: Any, settings: Any, shutdown: Any, listener: Any, telemetry: Any) -> None:
    from server.http.serve import serve_http

    def on_signal(name: str) -> None:
        shutdown.reason = name

    await serve_http(app, settings, on_signal, telemetry, listener)


def serve(argv: Sequence[str] | None = None) -> int:
    """Parse flags, check settings and the servers file, serve until the client leaves; the exit code."""
    for key, value in _QUIET_ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    args = build_parser().parse_args(argv)

    import anyio

    from index.errors import CopilotError
    from index.catalog.servers import load_servers
    from index.settings import check_working_directory
    from index.trust.settings import TrustSettings
    from server.pool.settings import PoolSettings
    from server.settings import ServerSettings

    try:
        # Every setting is checked before anything starts: a bad value is one line naming its
        # variable or flag, not a traceback from inside the running server.
        check_working_directory()
        settings = ServerSettings.load(_FLAGS, **_overrides(args))
        pool_settings = PoolSettings.load(home=settings.home)
        TrustSettings.load(home=settings.home)
        pool_settings.check_directories()
        settings.check_log_paths()
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    _configure_logging(settings.log_level)
    from server.settings import dotenv_names, unknown_variables

    dotenv = Path(".env")
    for warning in unknown_variables(os.environ) + unknown_variables(dotenv_names(dotenv), source=str(dotenv.resolve())):
        logger.warning("%s", warning)
    from index.children.containment.secrecy import protect_secrets

    protection = protect_secrets(non_dumpable=settings.protect_process)  # before any child could look
    logger.debug("non-dumpable: %s; blanked in /proc/self/environ: %s", protection.non_dumpable, protection.blanked)
    if args.token:
        logger.warning(
            "the token given with --token is visible to other users of this machine in the process list; "
            "pass it with COPILOT_HTTP_TOKEN or --token-file instead"
        )

    listener = None
    try:
        servers_file = load_servers(settings.servers_file())
        if args.http:
            from server.http.guard import check_exposure
            from server.http.serve import bind_listener

            check_exposure(settings)
            listener = bind_listener(settings)  # a port in use fails here, before anything starts
            # Port 0 picked one: the status file, logs and run file name the port really served.
            settings.http_port = listener.getsockname()[1]
        from index.search.tool_index import ToolIndex
        from server.app import build_app
        from server.copilot import Shutdown

        from server.telemetry import Telemetry
        from server.telemetry.tracing import configure_from_environment

        index = ToolIndex.open(settings)  # cheap; an unusable model setting fails here, before serving
        shutdown = Shutdown(default="shutdown" if args.http else "client disconnected")
        flush_traces = configure_from_environment()
        if flush_traces is not None:
            _BEFORE_EXIT.append(flush_traces)
        telemetry = Telemetry()
        app = build_app(
            settings, servers_file, start_now=args.http, shutdown=shutdown, index=index, telemetry=telemetry,
            transport="http" if args.http else "stdio", pool_settings=pool_settings,
        )
        logger.info(
            "copilot %s: %d server(s) from %s, logs in %s",
            "HTTP" if args.http else "stdio",
            len(servers_file.enabled()),
            servers_file.path,
            settings.log_file or settings.logs_dir,
        )
        if args.http:
            anyio.run(_serve_http, app, settings, shutdown, listener, telemetry)
        else:
            anyio.run(_serve_stdio, app, shutdown, settings.fast_relay, telemetry)
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BaseExceptionGroup as group:
        # Errors raised inside the transport's task groups arrive wrapped.
        matched, rest = group.split(CopilotError)
        if matched is None or rest is not None:
            raise
        print(f"error: {_first_leaf(matched)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["status"]:
        from server.telemetry.status_cli import main as status_main

        _exit_now(status_main(arguments[1:]))
    code = serve(argv)
    # Worker threads can still be blocked on stdin or in a model load; everything of ours is
    # closed and every child stopped by now, so do not wait for them.
    _exit_now(code)


if __name__ == "__main__":
    main()
