"""``python -m index trust`` (what is held back and why, with diffs) and ``python -m index approve``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from index.console import make_console
from index.records import ToolRecord
from index.trust.definition import change_diff
from index.trust.review import ReviewResult, TrustReviewer, Verdict
from index.trust.scan import Finding, ScanContext, scan_tool, visible
from index.trust.settings import TrustSettings

_REASONS = {
    "changed": "definition changed since it was approved",
    "new tool": "appeared after the server's tools were approved",
    "new server": "server added to the servers file (quarantined)",
    "poisoning": "looks like tool poisoning",
}


def _print_findings(console: Console, findings: Sequence[Finding], *, indent: str = "    ") -> None:
    for finding in findings:
        style = {"high": "red", "medium": "yellow"}.get(finding.severity, "dim")
        console.print(f"{indent}[{style}]{escape(finding.line())}[/]", highlight=False)


def _print_diff(console: Console, lines: list[str]) -> None:
    for line in lines:
        shown = escape(visible(line, limit=240))
        if line.startswith("+") and not line.startswith("+++"):
            console.print(f"    [green]{shown}[/]", highlight=False)
        elif line.startswith("-") and not line.startswith("---"):
            console.print(f"    [red]{shown}[/]", highlight=False)
        else:
            console.print(f"    {shown}", highlight=False)


def _verdict_json(verdict: Verdict, reviewer: TrustReviewer) -> dict:
    pins = reviewer.store.load().tools.get(verdict.id)
    diff: list[str] = []
    if pins is not None and pins.pending is not None:
        diff = change_diff(pins.approved.definition if pins.approved else None, pins.pending.definition)
    return {**verdict.model_dump(mode="json"), "diff": diff}


def trust_command(args: argparse.Namespace) -> int:
    """List held-back tools and quarantined servers with what changed; exit 1 when any are held."""
    settings = TrustSettings()
    reviewer = settings.reviewer()
    held = [v for v in reviewer.held() if not args.server or v.server == args.server]
    if args.json:
        print(json.dumps([_verdict_json(v, reviewer) for v in held], indent=1, ensure_ascii=False))
        return 1 if held else 0
    console = make_console()
    data = reviewer.store.load()
    approved = sum(1 for pins in data.tools.values() if pins.approved is not None)
    console.print(
        f"trust store {escape(str(reviewer.store.path))}: {approved} approved tool definition(s), "
        f"{len(held)} held back",
        highlight=False,
    )
    for verdict in held:
        console.print(
            f"\n[bold]{escape(verdict.id)}[/]: {escape(_REASONS.get(verdict.reason or '', verdict.reason or ''))}",
            highlight=False,
        )
        for line in verdict.summary:
            console.print(f"  {escape(line)}", highlight=False)
        _print_findings(console, verdict.findings, indent="  ")
        pins = data.tools.get(verdict.id)
        if args.diff and pins is not None and pins.pending is not None:
            _print_diff(console, change_diff(pins.approved.definition if pins.approved else None, pins.pending.definition))
        target = verdict.server if verdict.reason == "new server" else verdict.id
        console.print(f"  approve with: python -m index approve {escape(target)}", highlight=False)
    return 1 if held else 0


def approve_command(args: argparse.Namespace) -> int:
    reviewer = TrustSettings().reviewer()
    approved: list[str] = []
    for target in args.targets:
        approved += reviewer.approve(target)
    for item in approved:
        print(f"approved {item}")
    return 0


def print_review_summary(console: Console, results: dict[str, ReviewResult]) -> None:
    """After a crawl or build: tools held back now, with their findings (nothing when all is well)."""
    held = [verdict for result in results.values() for verdict in result.newly_held]
    if not held:
        return
    console.print(f"[red]held back {len(held)} tool(s)[/] (hidden from route, refused by execute):", highlight=False)
    for verdict in held:
        console.print(f"  {escape(verdict.id)}: {escape(_REASONS.get(verdict.reason or '', ''))}", highlight=False)
        for line in verdict.summary:
            console.print(f"    {escape(line)}", highlight=False)
        _print_findings(console, [f for f in verdict.findings if f.severity == "high"])
    console.print(
        escape("review them with 'python -m index trust' and approve with 'python -m index approve SERVER[/TOOL]'."),
        highlight=False,
    )


def print_scan_notes(console: Console, records: Sequence[ToolRecord]) -> None:
    """Medium findings (reported, not held back) of freshly crawled tools."""
    noted = 0
    for record in records:
        findings = [f for f in scan_tool(record, ScanContext.from_records(records, record.server)) if f.severity == "medium"]
        if findings:
            if not noted:
                console.print("[yellow]scan notes[/] (reported, not held back):", highlight=False)
            noted += 1
            console.print(f"  {escape(record.id)}", highlight=False)
            _print_findings(console, findings)


def add_commands(add: object) -> None:
    """Register ``trust`` and ``approve`` with ``index.cli``'s subcommand helper."""
    trust = add("trust", trust_command, "List tools held back (changed, new, quarantined, poisoned) with diffs.")  # type: ignore[operator]
    trust.add_argument("--server", help="only this server")
    trust.add_argument("--no-diff", dest="diff", action="store_false", help="do not show the full diffs")
    trust.add_argument("--json", action="store_true", help="print JSON (with diffs) instead of text")
    approve = add("approve", approve_command, "Approve held-back tools: SERVER (all of it) or SERVER/TOOL.")  # type: ignore[operator]
    approve.add_argument("targets", nargs="+", metavar="SERVER[/TOOL]")
