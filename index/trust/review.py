"""Deciding, for each listed tool, whether it may be used: pins, quarantine, the poisoning scan.

Every path that sees a server's tool definitions -- a crawl, an index build, background
indexing, a child that starts or lists its tools again in the copilot's pool -- passes them
through :meth:`TrustReviewer.review`:

- a definition equal to the approved pin is fine;
- a server's first listing is pinned as it is (trust on first use), unless the scan finds a
  ``high`` attack pattern in a tool (that tool waits as ``poisoning``) or the server was
  quarantined as newly added to the servers file (every tool waits as ``new server``);
- a tool that differs from its pin waits as ``changed`` (a rug pull until someone approves it),
  a tool that appears later on a pinned server waits as ``new tool``;
- servers matching ``COPILOT_TRUST_AUTO_APPROVE`` get changes and new tools approved at once
  (the scan still holds back ``high`` findings).

A waiting tool is hidden from ``route`` and refused by ``execute`` until a person approves it
(``python -m index approve server[/tool]``), who sees what changed with ``python -m index trust``.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from index.cli.display import printable
from index.errors import CopilotError
from index.catalog.records import ToolRecord
from index.cli.suggest import nearest_names
from index.trust.definition import change_summary, definition_hash, tool_definition
from index.trust.scan import Finding, ScanContext, scan_tool, worst
from index.trust.scan_cache import ScanCache
from index.trust.store import ApprovedDefinition, PendingDefinition, ServerTrust, ToolPins, TrustData, TrustStore

logger = logging.getLogger(__name__)

APPROVE_HINT = "python -m index approve"


class ApprovalError(CopilotError):
    """``approve`` was asked for something that is not waiting for approval."""


class Verdict(BaseModel):
    """Whether one tool may be used now, and if not, why (in words a model can act on)."""

    server: str
    tool: str
    allowed: bool
    reason: str | None = None  # changed | new tool | new server | poisoning
    summary: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.server}/{self.tool}"

    def message(self) -> str:
        """Why the tool is held back, without quoting the (possibly hostile) new text."""
        target = f"{self.server}/{self.tool}"
        approve = f"'{APPROVE_HINT} {target}'"
        if self.reason == "changed":
            what = "; ".join(self.summary) or "its definition differs"
            why = f"the definition of {target} changed since it was approved ({what})"
        elif self.reason == "new tool":
            why = f"{target} appeared after its server's tools were approved"
        elif self.reason == "new server":
            why = f"server '{self.server}' was added to the servers file and is quarantined until approved"
            approve = f"'{APPROVE_HINT} {self.server}'"
        elif self.reason == "poisoning":
            kinds = sorted({f.message for f in self.findings if f.severity == "high"})
            why = f"the definition of {target} looks like tool poisoning ({'; '.join(kinds[:3]) or 'high-severity findings'})"
        else:
            why = f"{target} is not approved"
        return (
            f"{why}. It is blocked until the user reviews it ('python -m index trust') and approves it ({approve}). "
            "Use another tool meanwhile, and tell the user."
        )


@dataclass
class ReviewResult:
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    newly_held: list[Verdict] = field(default_factory=list)  # held back by this review (not before)

    @property
    def blocked(self) -> dict[str, Verdict]:
        return {name: verdict for name, verdict in self.verdicts.items() if not verdict.allowed}


def _held(server: str, tool: str, pending: PendingDefinition) -> Verdict:
    return Verdict(
        server=server, tool=tool, allowed=False, reason=pending.reason, summary=pending.summary, findings=pending.findings
    )


def _context(data: TrustData, server: str, records: Sequence[ToolRecord]) -> ScanContext:
    other: dict[str, str] = {}
    for key, pins in data.tools.items():
        owner, _, name = key.partition("/")
        if owner != server and pins.approved is not None:
            other.setdefault(name, owner)
    return ScanContext(other_tools=other, own_tools=frozenset(record.name for record in records))


class TrustReviewer:
    """Reviews listings against a :class:`TrustStore`; see the module docstring."""

    def __init__(
        self,
        store: TrustStore,
        *,
        auto_approve: Iterable[str] = (),
        quarantine_new: bool = False,
        pinning: bool = True,
        scan_cache: ScanCache | None = None,
    ) -> None:
        self.store = store
        self.auto_approve = [pattern for pattern in auto_approve if pattern]
        self.quarantine_new = quarantine_new
        self.pinning = pinning
        self.scan_cache = scan_cache

    def _scan(self, record: ToolRecord, context: ScanContext, digest: str) -> list[Finding]:
        if self.scan_cache is None:
            return scan_tool(record, context)
        return self.scan_cache.scan(record, context, digest)

    def is_auto_approved(self, server: str) -> bool:
        return any(fnmatch.fnmatchcase(server, pattern) for pattern in self.auto_approve)

    # -- servers ------------------------------------------------------------------------------
    def note_servers(self, names: Iterable[str]) -> list[str]:
        """Remember the servers of a servers file; returns those quarantined as new now.

        The first servers file a store sees is its baseline (nothing is quarantined then); a
        name that appears later is quarantined when ``quarantine_new`` is on.
        """
        wanted = list(dict.fromkeys(names))
        quarantined: list[str] = []

        def change(data: TrustData) -> bool:
            baseline = not data.servers
            changed = False
            for name in wanted:
                if name in data.servers:
                    continue
                hold = self.quarantine_new and not baseline and not self.is_auto_approved(name)
                data.servers[name] = ServerTrust(
                    quarantined=hold, reason="added to the servers file (COPILOT_QUARANTINE_NEW)" if hold else None
                )
                if hold:
                    quarantined.append(name)
                changed = True
            return changed

        if wanted:
            self.store.update(change)
        for name in quarantined:
            logger.warning("server '%s' is new in the servers file and quarantined until approved", name)
        return quarantined

    # -- listings -----------------------------------------------------------------------------
    def review(self, server: str, records: Sequence[ToolRecord], *, pin: bool = True) -> ReviewResult:
        """Check a server's listed tools against the pins, recording new pins and held-back tools.

        ``pin=False`` only screens: definitions from a catalog file rather than a live server
        (``index build``) are scanned, and tools with ``high`` findings held back, but nothing
        is pinned or compared (a catalog from elsewhere is not a rug pull).
        """
        result = ReviewResult()
        auto = self.is_auto_approved(server) or not self.pinning
        pin = pin and self.pinning
        # Scanned before taking the store's locks: a hostile child's megabytes of description take
        # seconds to scan, and every route/execute (``verdict``) and every other process's review
        # waits for those locks. Inside, only what changed since this snapshot is scanned again.
        scanned = self._scan_unpinned(server, records, self.store.load())

        def change(data: TrustData) -> bool:
            changed = False
            pinned = data.server_tools(server)
            server_known = any(pins.approved is not None for pins in pinned.values())
            trust = data.servers.get(server)
            quarantined = trust is not None and trust.quarantined
            context: ScanContext | None = None
            for record in records:
                definition = tool_definition(record)
                digest = definition_hash(definition)
                key = f"{server}/{record.name}"
                pins = data.tools.get(key) or ToolPins()
                approved = pins.approved
                if approved is not None and approved.hash == digest:
                    if pins.pending is not None:  # the child went back to what was approved
                        pins.pending = None
                        data.tools[key] = pins
                        changed = True
                    result.verdicts[record.name] = Verdict(server=server, tool=record.name, allowed=True)
                    continue
                if pins.pending is not None and pins.pending.hash == digest:
                    result.verdicts[record.name] = _held(server, record.name, pins.pending)
                    continue
                if context is None:
                    context = _context(data, server, records)
                findings = scanned.get((digest, context.digest))
                if findings is None:  # the store changed since the snapshot
                    findings = self._scan(record, context, digest)
                poisoned = worst(findings) == "high"
                if not pin and not poisoned:
                    result.verdicts[record.name] = Verdict(server=server, tool=record.name, allowed=True)
                    continue
                reason = self._reason(approved is not None, server_known, quarantined, auto, poisoned)
                if reason is None:
                    pins.approved = ApprovedDefinition(
                        hash=digest, definition=definition, by="auto-approve" if approved is not None else "first use"
                    )
                    pins.pending = None
                    result.verdicts[record.name] = Verdict(server=server, tool=record.name, allowed=True)
                else:
                    summary = change_summary(approved.definition, definition) if approved is not None else []
                    pins.pending = PendingDefinition(
                        hash=digest, definition=definition, reason=reason, summary=summary, findings=findings
                    )
                    verdict = _held(server, record.name, pins.pending)
                    result.verdicts[record.name] = verdict
                    result.newly_held.append(verdict)
                data.tools[key] = pins
                changed = True
            return changed

        self.store.update(change)
        for verdict in result.newly_held:
            logger.warning("tool held back: %s", printable(verdict.message()))  # a child's names may hold ESC
        return result

    def _scan_unpinned(
        self, server: str, records: Sequence[ToolRecord], data: TrustData
    ) -> dict[tuple[str, str], list[Finding]]:
        """Findings of the records that match neither their approved nor their pending pin in ``data``,
        keyed by (definition hash, scan context digest)."""
        scanned: dict[tuple[str, str], list[Finding]] = {}
        context: ScanContext | None = None
        for record in records:
            digest = definition_hash(tool_definition(record))
            pins = data.tools.get(f"{server}/{record.name}") or ToolPins()
            if digest in {pins.approved.hash if pins.approved else None, pins.pending.hash if pins.pending else None}:
                continue
            context = context or _context(data, server, records)
            scanned[(digest, context.digest)] = self._scan(record, context, digest)
        return scanned

    @staticmethod
    def _reason(
        has_pin: bool, server_known: bool, quarantined: bool, auto: bool, poisoned: bool
    ) -> str | None:
        if poisoned:
            return "poisoning"
        if auto:
            return None
        if has_pin:
            return "changed"
        if quarantined:
            return "new server"
        if server_known:
            return "new tool"
        return None

    # -- reading ------------------------------------------------------------------------------
    def verdict(self, server: str, tool: str, data: TrustData | None = None) -> Verdict | None:
        """Why ``server/tool`` is held back, or ``None`` when it may be used (from the stored state)."""
        data = data if data is not None else self.store.load()
        pins = data.tools.get(f"{server}/{tool}")
        if pins is not None and pins.pending is not None:
            return _held(server, tool, pins.pending)
        trust = data.servers.get(server)
        if trust is not None and trust.quarantined and (pins is None or pins.approved is None):
            return Verdict(server=server, tool=tool, allowed=False, reason="new server")
        return None

    def held(self) -> list[Verdict]:
        """Every held-back tool (and each quarantined server with no tool listed yet)."""
        data = self.store.load()
        verdicts = [_held(*key.split("/", 1), pins.pending) for key, pins in data.tools.items() if pins.pending]
        listed = {verdict.server for verdict in verdicts}
        for name, trust in data.servers.items():
            if trust.quarantined and name not in listed:
                verdicts.append(Verdict(server=name, tool="*", allowed=False, reason="new server"))
        return sorted(verdicts, key=lambda v: (v.server, v.tool))

    # -- approving ----------------------------------------------------------------------------
    def approve(self, target: str, *, by: str = "user") -> list[str]:
        """Approve ``server`` (its quarantine and every held tool) or ``server/tool``; what was approved."""
        server, _, tool = target.partition("/")
        approved: list[str] = []
        problem: list[str] = []

        def change(data: TrustData) -> bool:
            trust = data.servers.get(server)
            known = trust is not None or bool(data.server_tools(server))
            if not known:
                servers = sorted({key.split("/", 1)[0] for key in data.tools} | set(data.servers))
                close = nearest_names(server, servers)
                hint = f" Did you mean {', '.join(close)}?" if close else ""
                problem.append(f"no server named '{server}' in {self.store.path}.{hint}")
                return False
            changed = False
            if not tool and trust is not None and trust.quarantined:
                trust.quarantined, trust.reason = False, None
                approved.append(f"{server} (quarantine lifted)")
                changed = True
            for name, pins in data.server_tools(server).items():
                if tool and name != tool:
                    continue
                if pins.pending is None:
                    continue
                pins.approved = ApprovedDefinition(hash=pins.pending.hash, definition=pins.pending.definition, by=by)
                pins.pending = None
                approved.append(f"{server}/{name}")
                changed = True
            if tool and not any(item == f"{server}/{tool}" for item in approved):
                names = sorted(data.server_tools(server))
                if tool not in names:
                    close = nearest_names(tool, names)
                    hint = f" Did you mean {', '.join(close)}?" if close else ""
                    problem.append(
                        f"server '{server}' has no tool '{tool}' in the trust store.{hint} To approve the whole "
                        f"server, run '{APPROVE_HINT} {server}'."
                    )
                else:
                    problem.append(f"{server}/{tool} is not waiting for approval (it is already approved).")
            return changed

        self.store.update(change)
        if problem:
            raise ApprovalError(problem[0])
        return approved


def review_by_server(reviewer: TrustReviewer, records: Sequence[ToolRecord], *, pin: bool) -> dict[str, ReviewResult]:
    """Review records of several servers (a crawl or a catalog), one server at a time."""
    by_server: dict[str, list[ToolRecord]] = {}
    for record in records:
        if record.kind != "tool":  # prompts and resources are not pinned (their names may repeat a tool's)
            continue
        by_server.setdefault(record.server, []).append(record)
    return {server: reviewer.review(server, listed, pin=pin) for server, listed in by_server.items()}
