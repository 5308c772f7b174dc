"""``python -m index trust`` (what is held back and why, with diffs) and ``python -m index approve``."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from rich.console import Console
from rich.markup import escape

from index.cli.console import argv_text, json_ensure_ascii, make_console
from index.cli.display import printable, shell_word
from index.errors import ConfigError, CopilotError
from index.cli.hints import index_command
from index.catalog.records import ToolRecord
from index.cli.suggest import nearest_names
from index.trust.definition import change_diff, short_hash
from index.trust.approval import ApprovalError
from index.trust.review import ReviewResult, TrustReviewer, Verdict
from index.trust.scan import Finding, ScanContext, scan_tool, visible
from index.trust.settings import TrustSettings
from index.trust.store import ToolPins, TrustData

_REASONS = {
    "changed": "definition changed since it was approved",
    "new tool": "appeared after the server's tools were approved",
    "new server": "server added to the servers file (quarantined)",
    "poisoning": "looks like tool poisoning",
}


def _reason(verdict: Verdict) -> str:
    if verdict.reason == "new item":
        return f"appeared after the server's {verdict.kind.replace('_', ' ')}s were approved"
    return _REASONS.get(verdict.reason or "", verdict.reason or "")


def _shown(text: str) -> str:
    """A child-supplied name for a rich console: controls made visible, then markup escaped."""
    return escape(printable(text))


def _print_findings(console: Console, findings: Sequence[Finding], *, indent: str = "    ") -> None:
    for finding in findings:
        style = {"high": "red", "medium": "yellow"}.get(finding.severity, "dim")
        console.print(f"{indent}[{style}]{escape(finding.line())}[/]", highlight=False)


#: Indentation kept at the start of a diff line (a definition's nested schema); more is cut, so a
#: line cannot push its text out of view with spaces.
_MAX_DIFF_INDENT = 40


def _diff_line(line: str) -> str:
    """A diff line as shown: its marker and indentation kept, the rest made visible (one line)."""
    marker, body = (line[:1], line[1:]) if line[:1] in ("+", "-", " ") else ("", line)
    text = body.lstrip(" ")
    indent = min(len(body) - len(text), _MAX_DIFF_INDENT)
    return marker + " " * indent + visible(text, limit=240)


def _print_diff(console: Console, lines: list[str]) -> None:
    for line in lines:
        shown = escape(_diff_line(line))
        if line.startswith("+") and not line.startswith("+++"):
            console.print(f"    [green]{shown}[/]", highlight=False)
        elif line.startswith("-") and not line.startswith("---"):
            console.print(f"    [red]{shown}[/]", highlight=False)
        else:
            console.print(f"    {shown}", highlight=False)


def _pins(data: TrustData, verdict: Verdict) -> ToolPins | None:
    return data.pins_of(verdict.kind).get(verdict.id)


def _target(verdict: Verdict) -> str:
    """What ``approve`` is given for this verdict: the definition shown, by its hash; a quarantined
    server's, the server (it lifts the quarantine and takes everything this listing showed)."""
    if verdict.reason == "new server":
        return verdict.server
    return f"{verdict.id}@{short_hash(verdict.hash)}" if verdict.hash else verdict.id


def _verdict_json(verdict: Verdict, data: TrustData) -> dict:
    pins = _pins(data, verdict)
    diff: list[str] = []
    if pins is not None and pins.pending is not None:
        diff = change_diff(pins.approved.definition if pins.approved else None, pins.pending.definition)
    return {**verdict.model_dump(mode="json"), "id": verdict.id, "approve": _target(verdict), "diff": diff}


def _remember_review(reviewer: TrustReviewer, shown: list[Verdict]) -> None:
    """Record that this listing showed these definitions (a bare ``approve`` takes only those). A
    store that cannot be written costs the bare form, not the listing."""
    try:
        reviewer.mark_shown(shown)
    except (CopilotError, OSError) as error:  # OSError: the lock file of a read-only home
        print(
            f"warning: could not record this review ({printable(str(error))}); approve with the ID@HASH "
            "forms shown.",
            file=sys.stderr,
        )


def _unusable_home(settings: TrustSettings, error: OSError) -> ConfigError:
    """The one-line error of the other commands for a COPILOT_HOME that is no directory (a file, or a file in the way)."""
    return ConfigError(
        f"cannot use {settings.store().path.parent} for the trust store ({error.strerror or error}); COPILOT_HOME "
        f"({settings.home}) must be a writable directory: fix it or set COPILOT_HOME elsewhere."
    )


def _check_home(settings: TrustSettings) -> None:
    """Fail with one line when a file stands where the trust store's directory would be. Nothing is
    created: a listing from a home that does not exist yet shows an empty store, as before."""
    directory = settings.store().path.parent
    for path in (directory, *directory.parents):
        if path.exists():  # a path through a file does not exist: the first one that does is what is in the way
            if not path.is_dir():
                raise _unusable_home(settings, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)))
            return


def trust_command(args: argparse.Namespace) -> int:
    """List held-back definitions and quarantined servers with what changed; exit 1 when any are held.

    Every definition listed counts as shown to a person (see :mod:`index.trust.approval`)."""
    settings = TrustSettings.load()
    _check_home(settings)
    reviewer = settings.reviewer()
    try:
        data = reviewer.store.load()  # one snapshot: what is printed is what is marked as shown
    except OSError as error:
        raise _unusable_home(settings, error) from None
    held = [v for v in reviewer.held(data) if not args.server or v.server == args.server]
    if args.server and not held:
        known = data.servers_named()
        if args.server not in known:
            close = nearest_names(args.server, sorted(known))
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ConfigError(f"--server {args.server!r}: the trust store knows no such server.{hint}")
    if args.json:
        shown = [_verdict_json(v, data) for v in held]
        print(json.dumps(shown, indent=1, ensure_ascii=json_ensure_ascii(sys.stdout)), flush=True)
        _remember_review(reviewer, held)
        return 1 if held else 0
    console = make_console()
    approved = sum(1 for pins in data.tools.values() if pins.approved is not None)
    items = sum(1 for pins in data.items.values() if pins.approved is not None)
    also = f", {items} approved prompt/resource template definition(s)" if items else ""
    console.print(
        f"trust store {escape(str(reviewer.store.path))}: {approved} approved tool definition(s){also}, "
        f"{len(held)} held back",
        highlight=False,
    )
    for verdict in held:
        console.print(
            f"\n[bold]{_shown(verdict.id)}[/]: {_shown(_reason(verdict))}",
            highlight=False,
        )
        for line in verdict.summary:
            console.print(f"  {_shown(line)}", highlight=False)
        _print_findings(console, verdict.findings, indent="  ")
        pins = _pins(data, verdict)
        if verdict.hash is not None:
            console.print(f"  pending definition: @{short_hash(verdict.hash)}", highlight=False)
        if args.diff and pins is not None and pins.pending is not None:
            _print_diff(console, change_diff(pins.approved.definition if pins.approved else None, pins.pending.definition))
        # The same home (and index settings) as this listing, so the command works as printed; the
        # hash makes it approve this definition only, should the child change it again meanwhile.
        console.print(
            f"  approve with: {escape(index_command(settings))} approve {escape(shell_word(_target(verdict)))}",
            highlight=False,
        )
    console.file.flush()
    _remember_review(reviewer, held)
    return 1 if held else 0


def approve_command(args: argparse.Namespace) -> int:
    """Approve each target on its own: one that fails is reported, the others are still approved
    (and said so -- an approval is never made without a line saying it was)."""
    settings = TrustSettings.load()
    _check_home(settings)
    reviewer = settings.reviewer()
    failed = 0
    for target in args.targets:
        try:
            approved = reviewer.approve(target, unseen=args.yes)
        except ApprovalError as error:
            print(f"error: {printable(str(error))}", file=sys.stderr)
            failed += 1
            continue
        except OSError as error:  # the store's lock or file cannot be written: so it is for every target
            raise _unusable_home(settings, error) from None
        for item in approved:
            print(f"approved {printable(item)}", flush=True)
        if not approved:  # a whole server with nothing held: say so rather than print nothing
            print(f"{printable(target)}: nothing was waiting for approval", flush=True)
    return 2 if failed else 0


def print_review_summary(console: Console, results: dict[str, ReviewResult]) -> None:
    """After a crawl or build: tools held back now, with their findings (nothing when all is well)."""
    held = [verdict for result in results.values() for verdict in result.newly_held]
    if not held:
        return
    tools = sum(1 for verdict in held if verdict.kind == "tool")
    what = f"{tools} tool(s)" + (f" and {len(held) - tools} prompt(s)/resource template(s)" if len(held) > tools else "")
    console.print(
        f"[red]held back {what}[/] (hidden from route, refused by execute, withheld from hosts):", highlight=False
    )
    for verdict in held:
        console.print(f"  {_shown(verdict.id)}: {_shown(_reason(verdict))}", highlight=False)
        for line in verdict.summary:
            console.print(f"    {_shown(line)}", highlight=False)
        _print_findings(console, [f for f in verdict.findings if f.severity == "high"])
    console.print(
        escape("review them with 'python -m index trust' and approve with 'python -m index approve SERVER[/TOOL][@HASH]'."),
        highlight=False,
    )


class _OtherTools(Mapping[str, str]):
    """``ScanContext.other_tools`` of one server as a view over the index of all tools (no copy)."""

    def __init__(self, servers_by_name: Mapping[str, dict[str, None]], server: str, size: int) -> None:
        self._servers_by_name = servers_by_name
        self._server = server
        self._size = size

    def __getitem__(self, name: str) -> str:
        # The servers of a name are distinct, in first-seen order: the answer is the first or second.
        for server in self._servers_by_name.get(name, ()):
            if server != self._server:
                return server
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (name for name, servers in self._servers_by_name.items() if servers.keys() != {self._server})

    def __len__(self) -> int:
        return self._size


class _ScanContexts:
    """What ``ScanContext.from_records(records, server)`` gives, for every server, from one pass.

    ``from_records`` reads all records; calling it per record made a crawl's scan notes quadratic
    (20,000 tools: minutes). Here each server's context is a view over one shared index.
    """

    def __init__(self, records: Sequence[ToolRecord]) -> None:
        self._servers_by_name: dict[str, dict[str, None]] = {}  # an ordered set: first-seen server first
        self._own: dict[str, set[str]] = {}
        for record in records:
            self._servers_by_name.setdefault(record.name, {})[record.server] = None
            self._own.setdefault(record.server, set()).add(record.name)
        self._only_here = Counter(next(iter(servers)) for servers in self._servers_by_name.values() if len(servers) == 1)
        self._contexts: dict[str, ScanContext] = {}

    def of(self, server: str) -> ScanContext:
        if server not in self._contexts:
            others = len(self._servers_by_name) - self._only_here[server]
            self._contexts[server] = ScanContext(
                other_tools=_OtherTools(self._servers_by_name, server, others),
                own_tools=frozenset(self._own.get(server, ())),
            )
        return self._contexts[server]


def print_scan_notes(console: Console, records: Sequence[ToolRecord]) -> None:
    """Medium findings (reported, not held back) of freshly crawled tools."""
    noted = 0
    contexts = _ScanContexts(records)
    for record in records:
        findings = [f for f in scan_tool(record, contexts.of(record.server)) if f.severity == "medium"]
        if findings:
            if not noted:
                console.print("[yellow]scan notes[/] (reported, not held back):", highlight=False)
            noted += 1
            console.print(f"  {_shown(record.id)}", highlight=False)
            _print_findings(console, findings)


def add_commands(add: object) -> None:
    """Register ``trust`` and ``approve`` with ``index.cli.args``'s subcommand helper."""
    trust = add("trust", trust_command, "List tools held back (changed, new, quarantined, poisoned) with diffs.")  # type: ignore[operator]
    trust.add_argument("--server", type=argv_text, help="only this server")
    trust.add_argument("--no-diff", dest="diff", action="store_false", help="do not show the full diffs")
    trust.add_argument("--json", action="store_true", help="print JSON (with diffs) instead of text")
    approve = add(  # type: ignore[operator]
        "approve",
        approve_command,
        "Approve held-back definitions: SERVER (all of it), SERVER/TOOL, prompt:SERVER/NAME or "
        "resource_template:SERVER/URI, each optionally @HASH as 'trust' shows it (only that definition).",
    )
    approve.add_argument("targets", nargs="+", type=argv_text, metavar="SERVER[/TOOL][@HASH]")
    approve.add_argument(
        "--yes",
        action="store_true",
        help="approve what is pending even if no 'trust' listing showed it (without @HASH: whatever it is now)",
    )
