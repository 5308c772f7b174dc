"""What each ``COPILOT_EXPOSE`` mode costs a host in context: tools/list and route answers.

``python -m bench exposure`` (or ``python -m bench.proxy.exposure [--home DIR] [--routes 1 3 10]``)

The real copilot app is served in-process to a real MCP client (handshake era) over the bundled
catalog (``index/data/catalog.json``) and the project's ``servers.json``; the index is built in
a temporary ``COPILOT_HOME`` (or ``--home``). Children are never started (route's background
warming is switched off here). For each mode it measures, as JSON the client received:

- ``tools/list`` (every page): ``meta`` (route and execute; ``execute-tool`` too with the LiveMCPBench
  alias, which this run leaves off), ``all`` (every tool),
  and ``routed`` after 1, 3 and 10 ``route`` calls (top 5) over the 95 task questions;
- one ``route`` answer: its text block alone (what most hosts show the model) and the whole
  result (text + structuredContent), median and mean over the task questions.

Tokens are estimated as characters / 4 (no offline tokenizer of a host model is available); the
ratios against ``meta``, measured in the same run, do not depend on that estimate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bench.args import existing_file, positive_int
from bench.speed import DEFAULT_ANNOTATIONS, load_queries
from index.cli.console import HelpFormatter
from index.catalog.records import load_catalog
from index.catalog.servers import load_servers
from index.errors import CopilotError
from index.settings import DEFAULT_CATALOG, PROJECT_DIR
from server.app import build_app
from server.copilot import Copilot
from server.settings import ServerSettings

ROUTE_TOP_K = 5


def _chars(value: Any) -> int:
    return len(json.dumps(value.model_dump(by_alias=True, exclude_none=True, mode="json"), ensure_ascii=False))


def _tokens(chars: float) -> str:
    return f"{chars / 4 / 1000:.1f}k" if chars >= 4000 else f"{chars / 4:.0f}"


async def _tools_list_chars(client: Client) -> tuple[int, int]:
    """(characters of every tools/list page, number of tools)."""
    total, count, cursor = 0, 0, None
    for _ in range(1000):
        result = await client.list_tools(cursor=cursor, cache_mode="bypass")
        total += _chars(result)
        count += len(result.tools)
        cursor = result.next_cursor
        if cursor is None:
            return total, count
    raise RuntimeError("tools/list did not end")


async def _measure_mode(
    mode: str, home: Path, servers: Path, queries: Sequence[str], routes: Sequence[int]
) -> dict[str, Any]:
    settings = ServerSettings(
        home=home, servers=servers, expose=mode, auto_index=False, warm_index=False, log_dir=home / "logs",
        log_level="WARNING",
    )
    app = build_app(settings, load_servers(servers), start_now=True)
    report: dict[str, Any] = {"mode": mode, "tools_list": {}, "route_text": [], "route_full": []}
    async with Client(app, mode="legacy") as client:
        chars, count = await _tools_list_chars(client)
        report["tools_list"][0] = (chars, count)
        for done, query in enumerate(queries if mode != "all" else [], 1):
            result = await client.call_tool("route", {"query": query, "top_k": ROUTE_TOP_K})
            report["route_text"].append(len(result.content[0].text))
            report["route_full"].append(_chars(result))
            if mode == "routed" and done in routes:
                report["tools_list"][done] = await _tools_list_chars(client)
    return report


def _no_warming() -> None:
    # A benchmark must not start the catalog's real servers (npx/uvx downloads).
    Copilot._warm = lambda self, servers: None  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench exposure", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=HelpFormatter)
    parser.add_argument("--home", type=Path, help="COPILOT_HOME with (or for) the index; default: a temp dir")
    parser.add_argument("--annotations", type=existing_file, default=DEFAULT_ANNOTATIONS)
    parser.add_argument("--routes", type=positive_int, nargs="+", default=[1, 3, 10], help="route calls before tools/list")
    args = parser.parse_args(list(argv) if argv is not None else None)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _no_warming()
    try:
        queries = load_queries(args.annotations)
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not args.annotations.exists():
        print(f"note: {args.annotations} not found: measuring {len(queries)} built-in questions", file=sys.stderr)
    catalog = load_catalog(DEFAULT_CATALOG)
    servers = PROJECT_DIR / "servers.json"

    with tempfile.TemporaryDirectory(prefix="bench-exposure-") as temp:
        home = args.home or Path(temp)
        from index.search.tool_index import ToolIndex

        index = ToolIndex.open(ServerSettings(home=home))
        report = index.sync(catalog.tools, catalog=str(DEFAULT_CATALOG), catalog_digest=catalog.digest())
        print(f"index: {report.total} tools of the bundled catalog at {home} ({report.seconds:.1f} s to sync)")
        del index
        results = {
            mode: anyio.run(_measure_mode, mode, home, servers, queries, args.routes) for mode in ("meta", "routed", "all")
        }

    meta_chars = results["meta"]["tools_list"][0][0]
    print(f"\n{'host pays for':<42} {'tools':>6} {'characters':>11} {'~tokens':>8} {'vs meta':>9}")
    print("-" * 80)
    rows: list[tuple[str, int, int]] = [("tools/list, meta", results["meta"]["tools_list"][0][1], meta_chars)]
    for done in sorted(set(results["routed"]["tools_list"]) - {0}):
        chars, count = results["routed"]["tools_list"][done]
        rows.append((f"tools/list, routed after {done} route call(s)", count, chars))
    rows.append(("tools/list, all", results["all"]["tools_list"][0][1], results["all"]["tools_list"][0][0]))
    for label, count, chars in rows:
        print(f"{label:<42} {count:>6} {chars:>11,} {_tokens(chars):>8} {chars / meta_chars:>8.1f}x")
    text, full = results["meta"]["route_text"], results["routed"]["route_full"]
    print(
        f"{'one route answer (top 5), text':<42} {'':>6} {statistics.median(text):>11,.0f} "
        f"{_tokens(statistics.median(text)):>8} {statistics.median(text) / meta_chars:>8.1f}x  (median; mean "
        f"{statistics.mean(text):,.0f}, {len(text)} questions)"
    )
    print(
        f"{'one route answer, text + structuredContent':<42} {'':>6} {statistics.median(full):>11,.0f} "
        f"{_tokens(statistics.median(full)):>8} {statistics.median(full) / meta_chars:>8.1f}x  (median, routed mode)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
