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

Prompts and resource templates a live server lists (a crawl, the copilot's re-listing) are
pinned by the same rules, each kind on its own: a server's first prompts are pinned as they are,
a prompt added later waits as ``new item``. Concrete resources are not pinned (their lists are
data); :mod:`server.guard` scans them instead.

A waiting tool is hidden from ``route`` and refused by ``execute`` until a person approves it
(``python -m index approve server[/tool][@hash]``, :mod:`index.trust.approval`), who sees what
changed with ``python -m index trust``; a waiting prompt or template is withheld from hosts.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from index.cli.display import printable
from index.catalog.records import ToolRecord
from index.trust.definition import (
    PINNED_ITEM_KINDS,
    change_summary,
    definition_hash,
    item_definition,
    tool_definition,
)
from index.trust import approval
from index.trust.approval import APPROVE_HINT
from index.trust.approval import ApprovalError  # noqa: F401 -- re-exported: it lives with the approving now
from index.trust.scan import Finding, ScanContext, scan_tool, worst
from index.trust.scan_cache import ScanCache
from index.trust.store import (
    ApprovedDefinition,
    PendingDefinition,
    ServerTrust,
    ToolPins,
    TrustData,
    TrustStore,
    now,
    pin_key,
    split_item_key,
)

logger = logging.getLogger(__name__)


class Verdict(BaseModel):
    """Whether one tool (or prompt, resource template) may be used now, and if not, why (in words a
    model can act on)."""

    server: str
    tool: str  # a tool's or prompt's name, a resource template's URI template
    allowed: bool
    kind: str = "tool"  # tool | prompt | resource_template
    reason: str | None = None  # changed | new tool | new item | new server | poisoning
    summary: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    hash: str | None = None  # of the pending definition (what ``approve ID@HASH`` names)

    @property
    def id(self) -> str:
        """``server/tool``; ``prompt:server/name``, ``resource_template:server/uri`` (the approve target)."""
        return pin_key(self.kind, self.server, self.tool)

    @property
    def label(self) -> str:
        """How people and models are told which definition: ``notes/read``, ``prompt 'notes/greet'``."""
        if self.kind == "tool":
            return f"{self.server}/{self.tool}"
        return f"{self.kind.replace('_', ' ')} '{self.server}/{self.tool}'"

    def message(self) -> str:
        """Why it is held back, without quoting the (possibly hostile) new text."""
        target = self.label
        approve = f"'{APPROVE_HINT} {self.id}'"
        if self.reason == "changed":
            what = "; ".join(self.summary) or "its definition differs"
            why = f"the definition of {target} changed since it was approved ({what})"
        elif self.reason == "new tool":
            why = f"{target} appeared after its server's tools were approved"
        elif self.reason == "new item":
            why = f"{target} appeared after its server's {self.kind.replace('_', ' ')}s were approved"
        elif self.reason == "new server":
            why = f"server '{self.server}' was added to the servers file and is quarantined until approved"
            approve = f"'{APPROVE_HINT} {self.server}'"
        elif self.reason == "poisoning":
            kinds = sorted({f.message for f in self.findings if f.severity == "high"})
            why = f"the definition of {target} looks like tool poisoning ({'; '.join(kinds[:3]) or 'high-severity findings'})"
        else:
            why = f"{target} is not approved"
        if self.kind != "tool":
            return (
                f"{why}. It is withheld from every host until the user reviews it ('python -m index trust') and "
                f"approves it ({approve})."
            )
        return (
            f"{why}. It is blocked until the user reviews it ('python -m index trust') and approves it ({approve}). "
            "Use another tool meanwhile, and tell the user."
        )


@dataclass
class ReviewResult:
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # tools, by name
    items: dict[str, Verdict] = field(default_factory=dict)  # prompts and resource templates, by record id
    newly_held: list[Verdict] = field(default_factory=list)  # held back by this review (not before)

    @property
    def blocked(self) -> dict[str, Verdict]:
        return {name: verdict for name, verdict in self.verdicts.items() if not verdict.allowed}

    @property
    def withheld_items(self) -> dict[str, Verdict]:
        return {key: verdict for key, verdict in self.items.items() if not verdict.allowed}


def _held(server: str, tool: str, pending: PendingDefinition, kind: str = "tool") -> Verdict:
    return Verdict(
        server=server, tool=tool, allowed=False, kind=kind, reason=pending.reason, summary=pending.summary,
        findings=pending.findings, hash=pending.hash,
    )  # fmt: skip


def _context(data: TrustData, server: str, records: Sequence[ToolRecord]) -> ScanContext:
    other: dict[str, str] = {}
    for key, pins in data.tools.items():
        owner, _, name = key.partition("/")
        if owner != server and pins.approved is not None:
            other.setdefault(name, owner)
    return ScanContext(other_tools=other, own_tools=frozenset(record.name for record in records))


def _item_name(record: ToolRecord) -> str:
    """What names a prompt (its name) or a resource template (its URI template) in its server."""
    return record.name if record.kind == "prompt" else record.uri or record.name


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
        """Check a server's listed tools -- and prompts and resource templates, when given -- against
        the pins, recording new pins and held-back definitions (concrete resources are skipped).

        ``pin=False`` only screens: definitions from a catalog file rather than a live server
        (``index build``) are scanned, and those with ``high`` findings held back, but nothing
        is pinned or compared (a catalog from elsewhere is not a rug pull).
        """
        records = [record for record in records if record.kind == "tool" or record.kind in PINNED_ITEM_KINDS]
        tools = [record for record in records if record.kind == "tool"]
        result = ReviewResult()
        auto = self.is_auto_approved(server) or not self.pinning
        pin = pin and self.pinning
        # Scanned before taking the store's locks: a hostile child's megabytes of description take
        # seconds to scan, and every route/execute (``verdict``) and every other process's review
        # waits for those locks. Inside, only what changed since this snapshot is scanned again.
        scanned = self._scan_unpinned(server, records, tools, self.store.load())

        def change(data: TrustData) -> bool:
            changed = False
            known = _approved_kinds(data, server)
            trust = data.servers.get(server)
            quarantined = trust is not None and trust.quarantined
            context: ScanContext | None = None
            for record in records:
                is_tool = record.kind == "tool"
                table = data.pins_of(record.kind)
                name = record.name if is_tool else _item_name(record)
                key = record.id
                definition = tool_definition(record) if is_tool else item_definition(record)
                digest = definition_hash(definition)
                pins = table.get(key) or ToolPins()
                approved = pins.approved
                if approved is not None and approved.hash == digest:
                    if pins.pending is not None:  # the child went back to what was approved
                        pins.pending = None
                        table[key] = pins
                        changed = True
                    _result_of(result, record)[name if is_tool else key] = Verdict(
                        server=server, tool=name, allowed=True, kind=record.kind
                    )
                    continue
                if pins.pending is not None and pins.pending.hash == digest:
                    _result_of(result, record)[name if is_tool else key] = _held(server, name, pins.pending, record.kind)
                    continue
                if is_tool and context is None:
                    context = _context(data, server, tools)
                scan_context = context if is_tool and context is not None else _NO_CONTEXT
                findings = scanned.get((digest, scan_context.digest))
                if findings is None:  # the store changed since the snapshot
                    findings = self._scan(record, scan_context, digest)
                poisoned = worst(findings) == "high"
                if not pin and not poisoned:
                    _result_of(result, record)[name if is_tool else key] = Verdict(
                        server=server, tool=name, allowed=True, kind=record.kind
                    )
                    continue
                new_reason = "new tool" if is_tool else "new item"
                reason = self._reason(approved is not None, record.kind in known, quarantined, auto, poisoned, new_reason)
                if reason is None:
                    pins.approved = ApprovedDefinition(
                        hash=digest, definition=definition, by="auto-approve" if approved is not None else "first use"
                    )
                    pins.pending = None
                    _result_of(result, record)[name if is_tool else key] = Verdict(
                        server=server, tool=name, allowed=True, kind=record.kind
                    )
                else:
                    summary = change_summary(approved.definition, definition) if approved is not None else []
                    pins.pending = PendingDefinition(
                        hash=digest, definition=definition, reason=reason, summary=summary, findings=findings
                    )
                    verdict = _held(server, name, pins.pending, record.kind)
                    _result_of(result, record)[name if is_tool else key] = verdict
                    result.newly_held.append(verdict)
                table[key] = pins
                changed = True
            return changed

        self.store.update(change)
        for verdict in result.newly_held:
            logger.warning("held back: %s", printable(verdict.message()))  # a child's names may hold ESC
        return result

    def _scan_unpinned(
        self, server: str, records: Sequence[ToolRecord], tools: Sequence[ToolRecord], data: TrustData
    ) -> dict[tuple[str, str], list[Finding]]:
        """Findings of the records that match neither their approved nor their pending pin in ``data``,
        keyed by (definition hash, scan context digest)."""
        scanned: dict[tuple[str, str], list[Finding]] = {}
        context: ScanContext | None = None
        for record in records:
            is_tool = record.kind == "tool"
            digest = definition_hash(tool_definition(record) if is_tool else item_definition(record))
            pins = data.pins_of(record.kind).get(record.id) or ToolPins()
            if digest in {pins.approved.hash if pins.approved else None, pins.pending.hash if pins.pending else None}:
                continue
            if is_tool:
                context = context or _context(data, server, tools)
            scan_context = context if is_tool and context is not None else _NO_CONTEXT
            scanned[(digest, scan_context.digest)] = self._scan(record, scan_context, digest)
        return scanned

    @staticmethod
    def _reason(
        has_pin: bool, server_known: bool, quarantined: bool, auto: bool, poisoned: bool, new_reason: str = "new tool"
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
            return new_reason
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

    def item_state(self, record: ToolRecord, data: TrustData | None = None) -> tuple[Verdict | None, bool]:
        """(why a prompt or resource template is held back or ``None``, whether ``record`` is exactly
        its approved definition). Other kinds: ``(None, False)``."""
        if record.kind not in PINNED_ITEM_KINDS:
            return None, False
        data = data if data is not None else self.store.load()
        name = _item_name(record)
        pins = data.items.get(record.id)
        if pins is not None and pins.pending is not None:
            return _held(record.server, name, pins.pending, record.kind), False
        trust = data.servers.get(record.server)
        if trust is not None and trust.quarantined and (pins is None or pins.approved is None):
            return Verdict(server=record.server, tool=name, allowed=False, kind=record.kind, reason="new server"), False
        if pins is None or pins.approved is None:
            return None, False
        return None, pins.approved.hash == definition_hash(item_definition(record))

    def held(self, data: TrustData | None = None) -> list[Verdict]:
        """Every held-back tool, prompt and resource template (and each quarantined server with
        nothing listed yet)."""
        data = data if data is not None else self.store.load()
        verdicts = [_held(*key.split("/", 1), pins.pending) for key, pins in data.tools.items() if pins.pending]
        for key, pins in data.items.items():
            if pins.pending is not None:
                kind, server, name = split_item_key(key)
                verdicts.append(_held(server, name, pins.pending, kind))
        listed = {verdict.server for verdict in verdicts}
        for name, trust in data.servers.items():
            if trust.quarantined and name not in listed:
                verdicts.append(Verdict(server=name, tool="*", allowed=False, reason="new server"))
        return sorted(verdicts, key=lambda v: (v.server, v.kind != "tool", v.kind, v.tool))

    def mark_shown(self, verdicts: Iterable[Verdict]) -> None:
        """Remember that a review showed these pending definitions (each only while it is still the
        one pending: a definition that changed after the listing stays unshown)."""
        shown = {verdict.id: (verdict.kind, verdict.hash) for verdict in verdicts if verdict.hash}

        def change(data: TrustData) -> bool:
            changed = False
            for key, (kind, digest) in shown.items():
                pins = data.pins_of(kind).get(key)
                pending = pins.pending if pins is not None else None
                if pending is not None and pending.hash == digest and pending.shown_at is None:
                    pending.shown_at = now()
                    changed = True
            return changed

        if shown:
            self.store.update(change)

    # -- approving ----------------------------------------------------------------------------
    def approve(self, target: str, *, by: str = "user", unseen: bool = False) -> list[str]:
        """Approve ``server`` (its quarantine and everything held), ``server/tool``,
        ``prompt:server/name`` or ``resource_template:server/uri``, optionally ``@HASH`` (only that
        definition); what was approved. See :mod:`index.trust.approval`."""
        return approval.approve(self.store, target, by=by, unseen=unseen)


_NO_CONTEXT = ScanContext()


def _result_of(result: ReviewResult, record: ToolRecord) -> dict[str, Verdict]:
    return result.verdicts if record.kind == "tool" else result.items


def _approved_kinds(data: TrustData, server: str) -> set[str]:
    """The kinds of which ``server`` has an approved definition: a new one of such a kind waits."""
    known = {"tool"} if any(pins.approved is not None for pins in data.server_tools(server).values()) else set()
    return known | {split_item_key(key)[0] for key, pins in data.server_items(server).items() if pins.approved}


def review_by_server(reviewer: TrustReviewer, records: Sequence[ToolRecord], *, pin: bool) -> dict[str, ReviewResult]:
    """Review records of several servers (a crawl or a catalog), one server at a time."""
    by_server: dict[str, list[ToolRecord]] = {}
    for record in records:
        # Prompts and resource templates are pinned from live servers only (a catalog is screened
        # for its tools; the copilot scans a catalog's prompts when it lists them). Concrete
        # resources are never pinned: their lists are data.
        if record.kind != "tool" and not (pin and record.kind in PINNED_ITEM_KINDS):
            continue
        by_server.setdefault(record.server, []).append(record)
    return {server: reviewer.review(server, listed, pin=pin) for server, listed in by_server.items()}
