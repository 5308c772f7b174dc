"""``python -m index search``: one query (table or JSON) or a JSONL batch, on the last built index."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from index.json_text import parse_json, without_lone_surrogates
from index.cli.console import json_ensure_ascii
from index.cli.display import printable
from index.errors import QueryError
from index.cli.hints import index_command
from index.search.query import MAX_TOP_K, check_top_k
from index.search.providers import InputLink
from index.search.tool_index import SearchHit, ToolIndex


def _hit_summary(hit: SearchHit) -> dict[str, Any]:
    return {"server": hit.server, "tool": hit.tool, "score": hit.score}


def _links(hit: SearchHit) -> str:
    """The hit's input links, before its description: "[call it first for: a] [inputs from: b (latitude)] "."""
    def named(links: list[InputLink]) -> str:
        return ", ".join(f"{link.tool} ({link.parameter})" if link.parameter else link.tool for link in links)

    parts = []
    if hit.input_for:
        parts.append(f"[call it first for: {named(hit.input_for)}]")
    if hit.input_from:
        parts.append(f"[inputs from: {named(hit.input_from)}]")
    return "".join(part + " " for part in parts)


def _print_table(query: str, hits: list[SearchHit], index: ToolIndex) -> None:
    from index.cli.console import make_console
    from rich.markup import escape
    from rich.table import Table

    def cell(text: str) -> str:
        # Names and descriptions come from child servers: rich must not read them as markup
        # ("Dict[str, str]" would vanish, "[/red]" would crash) nor the terminal as control codes.
        return escape(printable(text))

    title = f"{len(hits)} of {index.tool_count} tools for {cell(repr(query))}"
    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("server", overflow="fold")
    table.add_column("tool", overflow="fold")
    table.add_column("score", justify="right")
    table.add_column("required", overflow="fold")
    table.add_column("description", overflow="fold")
    for rank, hit in enumerate(hits, 1):
        description = " ".join(hit.description.split())
        if len(description) > 160:
            description = description[:157] + "..."
        description = _links(hit) + description
        table.add_row(
            str(rank), cell(hit.server), cell(hit.tool), f"{hit.score:.3f}", cell(", ".join(hit.required)), cell(description)
        )
    make_console().print(table)


def _batch_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The batch file's lines as bytes: each is decoded on its own, so a line that is not UTF-8 is
    that line's error, not the file's (nor silently replaced)."""
    try:
        handle = sys.stdin.buffer if str(path) == "-" else path.open("rb")
    except FileNotFoundError:
        raise QueryError(f"{path}: batch file not found.") from None
    except OSError as error:
        raise QueryError(f"{path}: cannot read the batch file ({error.strerror or error}).") from None
    with handle:
        try:
            yield from enumerate(handle, 1)
        except OSError as error:  # a directory opens, then fails at the first read
            raise QueryError(f"{path}: cannot read the batch file ({error.strerror or error}).") from None


def _decode_batch_line(raw: bytes, number: int) -> str:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise QueryError(
            f"not UTF-8 text (byte 0x{raw[error.start]:02x} at column {error.start + 1}); save the file as UTF-8"
        ) from None
    # Windows editors (Notepad, PowerShell 5's Out-File) start UTF-8 files with a byte order mark.
    return line.removeprefix("\ufeff") if number == 1 else line


def _parse_batch_line(line: str) -> tuple[str, list[str]]:
    """The line's query, and the other keys it gives (which nothing reads)."""
    try:
        item = parse_json(line)
    except json.JSONDecodeError as error:
        raise QueryError(f'not valid JSON ({error.msg}); expected {{"query": "..."}}') from None
    if not isinstance(item, dict) or "query" not in item:
        raise QueryError('expected an object with a "query" field, e.g. {"query": "convert a document to pdf"}')
    if not isinstance(item["query"], str):
        raise QueryError(f'"query" must be a string, not {type(item["query"]).__name__}')
    # "\ud800" is valid JSON but no UTF-8 text: echoed as it is, the answer line could not be written.
    return without_lone_surrogates(item["query"]), sorted(str(key) for key in item if key != "query")


def run_batch(index: ToolIndex, path: Path, top_k: int, server: str | None, out: TextIO, err: TextIO) -> int:
    """One answer line per input line, in order; a bad line gets an ``error`` entry (and file:line on
    stderr), a blank one a ``skipped`` entry."""
    failures = 0
    ignored: set[str] = set()
    if server is not None:
        index.search("check the server filter", top_k=1, server=server)  # an unknown name: one error, not one per line
    for number, raw in _batch_lines(path):
        query: Any = None
        answer: dict[str, Any]
        try:
            line = _decode_batch_line(raw, number)
            if not line.strip():
                # Nothing asked (a doubled last newline, say): answered, to keep one answer per line, not an error.
                out.write(json.dumps({"query": None, "line": number, "skipped": "blank line"}) + "\n")
                continue
            query, others = _parse_batch_line(line)
            for key in others:
                if key not in ignored:  # once per key: a whole file of {"query", "top_k"} is one line
                    ignored.add(key)
                    print(
                        f"{printable(str(path))}:{number}: {printable(key)!r} is not read: a line gives only \"query\" "
                        "(--top-k and --server apply to every line)",
                        file=err,
                    )
            hits = index.search(query, top_k=top_k, server=server)
            answer = {"query": query, "results": [_hit_summary(h) for h in hits]}
        except QueryError as error:
            failures += 1
            print(f"{printable(str(path))}:{number}: {error}", file=err)
            answer = {"query": query, "line": number, "error": str(error)}
        out.write(json.dumps(answer, ensure_ascii=json_ensure_ascii(out)) + "\n")
        out.flush()
    return 1 if failures else 0


def search_command(args: argparse.Namespace) -> int:
    if not 1 <= args.top_k <= MAX_TOP_K:  # named as the user typed it; check_top_k speaks of the parameter
        raise QueryError(f"--top-k must be between 1 and {MAX_TOP_K}, not {args.top_k}.")
    top_k = check_top_k(args.top_k)
    batch: Path | None = getattr(args, "batch", None)
    if batch is not None and args.query is not None:
        raise QueryError("give either a QUERY or --batch FILE.jsonl, not both.")
    if batch is None and args.query is None:
        raise QueryError('give a QUERY (e.g. python -m index search "convert a document to pdf") or --batch FILE.jsonl.')
    index = ToolIndex.open()
    if batch is not None:
        index.ensure_built()
        index.warm()
        return run_batch(index, batch, top_k, args.server, sys.stdout, sys.stderr)
    # Bytes of the argument that are not UTF-8 arrive as lone surrogates: echoed in --json they could not be written.
    query = without_lone_surrogates(args.query)
    hits = index.search(query, top_k=top_k, server=args.server)
    if args.json:
        shown = {"query": query, "results": [h.model_dump() for h in hits]}
        print(json.dumps(shown, ensure_ascii=json_ensure_ascii(sys.stdout), indent=1))
    elif not hits and index.tool_count == 0:
        print(
            f"the index at {index.location} holds no tools: build it from a catalog with "
            f"{index_command(index.settings, 'build')}",
            file=sys.stderr,
        )
    elif not hits:
        print("no tools matched.", file=sys.stderr)
    else:
        _print_table(query, hits, index)
    return 0

