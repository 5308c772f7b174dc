"""Argument parsing for ``python -m index``; each subcommand's work lives in its own module."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from index.cli.console import HelpFormatter, argv_text, prepare_text_io
from index.cli.log_setup import log_handler, quiet_noisy_loggers
from index.errors import ConfigError, CopilotError
from index.settings import check_working_directory

# One line per paragraph: HelpFormatter keeps line breaks, and help must not be hard-wrapped off a terminal.
DESCRIPTION = """\
Find the right MCP tool for a task: crawl your MCP servers for their tools, build a local search index of them, search it, and review the tools held back by the trust checks.

typical use: python -m index crawl && python -m index build && python -m index search "convert a document to pdf"
"""

#: Exit status after the reader of our output went away (``... | head``): 1, as in Python's documented
#: recipe and as rich exits when a table meets a closed pipe, so every command answers alike.
BROKEN_PIPE_EXIT = 1


def _crawl(args: argparse.Namespace) -> int:
    from index.catalog.crawl import crawl_command

    # Checked here, not only in crawl_servers, so the message names the flags the user typed.
    if args.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1 (got {args.concurrency}).")
    if not args.timeout > 0 or math.isinf(args.timeout):
        raise ConfigError(f"--timeout must be a positive number of seconds (got {args.timeout}).")

    return crawl_command(args)


def _import(args: argparse.Namespace) -> int:
    from index.catalog.livemcpbench import import_command

    return import_command(args)


def _build(args: argparse.Namespace) -> int:
    from index.storage.build import build_command

    return build_command(args)


def _search(args: argparse.Namespace) -> int:
    from index.cli.search import search_command

    return search_command(args)


def _usage(args: argparse.Namespace) -> int:
    from index.cli.usage import usage_command

    return usage_command(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m index", description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
        sub.set_defaults(handler=handler)
        return sub

    crawl = add("crawl", _crawl, "Start each enabled server, list its tools, write a catalog snapshot.")
    crawl.add_argument("--servers", type=Path, help="servers.json or a Claude-Desktop config (default: COPILOT_SERVERS or the project's)")
    crawl.add_argument("--only", nargs="+", type=argv_text, metavar="NAME", help="crawl only these servers")
    crawl.add_argument("--out", type=Path, help="catalog to write (default: COPILOT_CATALOG; in the project's checkout the bundled snapshot, installed COPILOT_HOME/catalog.json)")
    crawl.add_argument("--concurrency", type=int, default=4, help="live children at once (default 4)")
    crawl.add_argument("--timeout", type=float, default=120.0, help="hard timeout per server in seconds (default 120)")
    crawl.add_argument("--log-dir", type=Path, help="where each child's stderr is written")

    imp = add("import-livemcpbench", _import, "Convert LiveMCPBench's tools.json snapshot into a catalog.")
    imp.add_argument("tools_json", type=Path, metavar="PATH/tools.json")
    imp.add_argument("--out", type=Path, help="catalog to write (default: COPILOT_HOME/livemcpbench-catalog.json)")

    build = add("build", _build, "Embed a catalog into the persistent Chroma index (re-embeds only changes).")
    build.add_argument("--catalog", type=Path, help="catalog snapshot (default: COPILOT_CATALOG or the bundled one)")

    search = add("search", _search, "Search the last built index.")
    search.add_argument("query", nargs="?", type=argv_text, help="plain text or <tool_assistant> server: ... tool: ... </tool_assistant>")
    search.add_argument("--batch", type=Path, metavar="FILE.jsonl", help='one {"query": ...} per line; JSON lines out')
    search.add_argument("--top-k", type=int, default=5)
    search.add_argument("--server", type=argv_text, help="only tools of this server")
    search.add_argument("--json", action="store_true", help="print JSON instead of a table")

    usage = add("usage", _usage, "Learn the usage prior route adds (tools that ran without error in earlier trajectories).")
    usage.add_argument("paths", nargs="*", metavar="PATH", help="trajectory logs: files or directories (default: COPILOT_LOG_DIR)")
    usage.add_argument(
        "--successful", type=Path, metavar="VERDICTS", help="count only tasks judged a success in this verdicts.jsonl (or judge directory)"
    )
    usage.add_argument("--out", type=Path, help="prior to write (default: COPILOT_USAGE_PRIOR or COPILOT_HOME/usage-prior.json)")
    usage.add_argument("--show", type=int, default=10, metavar="N", help="print the N most used tools (default 10)")

    from index.trust.cli import add_commands

    add_commands(add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    prepare_text_io()
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, handlers=[log_handler()])
    quiet_noisy_loggers()  # HTTP clients log URLs with credentials at INFO
    try:
        check_working_directory()
        status = args.handler(args)
        sys.stdout.flush()  # inside the try: a reader gone before the last write is a broken pipe too
        return status
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE_EXIT
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at devnull so Python's flush at exit cannot fail again.

    The recipe of Python's documentation (library/signal.html, "Note on SIGPIPE").
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout replaced by something without a file descriptor
        pass
