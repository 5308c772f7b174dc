"""Argument parsing for ``python -m index``; each subcommand's work lives in its own module."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from index.errors import CopilotError


def _crawl(args: argparse.Namespace) -> int:
    from index.crawl import crawl_command

    return crawl_command(args)


def _import(args: argparse.Namespace) -> int:
    from index.livemcpbench import import_command

    return import_command(args)


def _build(args: argparse.Namespace) -> int:
    from index.build import build_command

    return build_command(args)


def _search(args: argparse.Namespace) -> int:
    from index.search_cli import search_command

    return search_command(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m index", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        return sub

    crawl = add("crawl", _crawl, "Start each enabled server, list its tools, write a catalog snapshot.")
    crawl.add_argument("--servers", type=Path, help="servers.json or a Claude-Desktop config (default: COPILOT_SERVERS or the project's)")
    crawl.add_argument("--only", nargs="+", metavar="NAME", help="crawl only these servers")
    crawl.add_argument("--out", type=Path, help="catalog to write (default: COPILOT_CATALOG or the bundled snapshot)")
    crawl.add_argument("--concurrency", type=int, default=4, help="live children at once (default 4)")
    crawl.add_argument("--timeout", type=float, default=120.0, help="hard timeout per server in seconds (default 120)")
    crawl.add_argument("--log-dir", type=Path, help="where each child's stderr is written")

    imp = add("import-livemcpbench", _import, "Convert LiveMCPBench's tools.json snapshot into a catalog.")
    imp.add_argument("tools_json", type=Path, metavar="PATH/tools.json")
    imp.add_argument("--out", type=Path, help="catalog to write (default: COPILOT_HOME/livemcpbench-catalog.json)")

    build = add("build", _build, "Embed a catalog into the persistent Chroma index (re-embeds only changes).")
    build.add_argument("--catalog", type=Path, help="catalog snapshot (default: COPILOT_CATALOG or the bundled one)")

    search = add("search", _search, "Search the last built index.")
    search.add_argument("query", nargs="?", help="plain text or <tool_assistant> server: ... tool: ... </tool_assistant>")
    search.add_argument("--batch", type=Path, metavar="FILE.jsonl", help='one {"query": ...} per line; JSON lines out')
    search.add_argument("--top-k", type=int, default=5)
    search.add_argument("--server", help="only tools of this server")
    search.add_argument("--json", action="store_true", help="print JSON instead of a table")

    from index.trust.cli import add_commands

    add_commands(add)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return args.handler(args)
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
