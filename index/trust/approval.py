"""Approving held-back definitions: a person approves what they reviewed, and only that.

A child may change a definition again between the moment a person reviews it (``python -m
index trust``) and the moment they approve it. So an approval names what was reviewed:

- ``SERVER/TOOL@HASH`` (``prompt:SERVER/NAME@HASH``, ``resource_template:SERVER/URI@HASH``)
  approves only while the pending definition still has that hash (its first
  :data:`~index.trust.definition.SHORT_HASH` hex digits or more, as ``trust`` prints it);
  otherwise nothing is approved and the error names the definition pending now;
- the bare ``SERVER/TOOL`` approves the pending definition only when a review showed that very
  definition (``PendingDefinition.shown_at``: a definition that changed after the listing
  starts unshown), so the habit of running ``trust`` then ``approve notes/read_notes`` keeps
  working and is safe;
- ``SERVER`` approves everything of the server the same way -- all or nothing: when anything
  waiting was not shown, nothing is approved and its quarantine stays;
- ``unseen=True`` (``approve --yes``) approves whatever is pending, for scripts that decided
  without a review.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from index.cli.suggest import nearest_names
from index.errors import CopilotError
from index.trust.definition import PINNED_ITEM_KINDS, SHORT_HASH, short_hash
from index.trust.store import ApprovedDefinition, ToolPins, TrustData, TrustStore, pin_key, split_item_key

APPROVE_HINT = "python -m index approve"

#: A hash after the last ``@``: at least the short form, at most a whole SHA-256.
_HASH = re.compile(rf"[0-9a-fA-F]{{{SHORT_HASH},64}}")
#: Waiting definitions named in one error (the rest are counted).
_NAMED = 5


class ApprovalError(CopilotError):
    """``approve`` was asked for something that is not waiting for approval."""


@dataclass(frozen=True)
class Target:
    """One ``approve`` argument, parsed."""

    text: str
    server: str
    name: str | None  # None: the whole server; "": a '/' with no name after it (names nothing)
    kind: str = "tool"
    hash: str | None = None

    @property
    def id(self) -> str:
        return self.server if self.name is None else pin_key(self.kind, self.server, self.name)


def parse_target(text: str, servers: set[str]) -> Target:
    """``text`` as a target; ``servers``: the names the store knows (a server named ``prompt:x``
    keeps its name)."""
    head, at, tail = text.rpartition("@")
    digest = tail.lower() if at and _HASH.fullmatch(tail) else None
    rest = head if digest is not None else text
    kind, server, name = split_item_key(rest)
    if ":" not in rest or kind not in PINNED_ITEM_KINDS or rest.partition("/")[0] in servers:
        kind = "tool"
        server, _, name = rest.partition("/")
    # "notes/" (a script's "notes/$TOOL" with TOOL empty) names no tool: never the whole server.
    return Target(text=text, server=server, name=name if name or "/" in rest else None, kind=kind, hash=digest)


def approve(store: TrustStore, text: str, *, by: str = "user", unseen: bool = False) -> list[str]:
    """Approve the target ``text`` (see the module docstring); what was approved, in order.

    Raises :class:`ApprovalError` (and approves nothing) when the target names nothing, is not
    waiting, or names a definition other than the one waiting now.
    """
    approved: list[str] = []
    problem: list[str] = []

    def change(data: TrustData) -> bool:
        known = data.servers_named()
        target = parse_target(text, known)
        if target.server not in known:
            close = nearest_names(target.server, sorted(known))
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            problem.append(f"no server named '{target.server}' in {store.path}.{hint}")
            return False
        if target.name == "":
            problem.append(
                f"'{text}' names no {target.kind} after the '/': approve one as '{APPROVE_HINT} "
                f"{target.server}/NAME', or the whole server as '{APPROVE_HINT} {target.server}'."
            )
            return False
        if target.name is None:
            if target.hash is not None:
                problem.append(
                    f"'{text}': a hash names one definition. Approve 'SERVER/TOOL@HASH' as 'python -m index trust' "
                    f"prints it, or the whole server as '{APPROVE_HINT} {target.server}'."
                )
                return False
            return _approve_server(data, target, by=by, unseen=unseen, approved=approved, problem=problem)
        return _approve_one(data, target, by=by, unseen=unseen, approved=approved, problem=problem)

    store.update(change)
    if problem:
        raise ApprovalError(problem[0])
    return approved


def _review_hint(server: str) -> str:
    return f"'python -m index trust --server {server}'"


def _approve_server(
    data: TrustData, target: Target, *, by: str, unseen: bool, approved: list[str], problem: list[str]
) -> bool:
    server = target.server
    waiting = [(f"{server}/{name}", pins) for name, pins in data.server_tools(server).items() if pins.pending]
    waiting += [(key, pins) for key, pins in data.server_items(server).items() if pins.pending]
    unshown = [(key, pins) for key, pins in waiting if pins.pending is not None and pins.pending.shown_at is None]
    if unshown and not unseen:
        named = ", ".join(f"{key}@{short_hash(pins.pending.hash)}" for key, pins in unshown[:_NAMED] if pins.pending)
        more = f" and {len(unshown) - _NAMED} more" if len(unshown) > _NAMED else ""
        problem.append(
            f"server '{server}' has {len(unshown)} definition(s) waiting that no review showed (they changed since "
            f"the last 'python -m index trust', or it never listed them): {named}{more}. Nothing was approved. "
            f"Review them with {_review_hint(server)} and approve again, or approve each as ID@HASH "
            "(--yes approves them unseen)."
        )
        return False
    changed = False
    trust = data.servers.get(server)
    if trust is not None and trust.quarantined:
        trust.quarantined, trust.reason = False, None
        approved.append(f"{server} (quarantine lifted)")
        changed = True
    for key, pins in waiting:
        _take(pins, by)
        approved.append(key)
        changed = True
    return changed


def _approve_one(
    data: TrustData, target: Target, *, by: str, unseen: bool, approved: list[str], problem: list[str]
) -> bool:
    server, name = target.server, target.name or ""
    is_tool = target.kind == "tool"
    pins = data.pins_of(target.kind).get(target.id)
    if pins is None:
        if is_tool:
            names = sorted(data.server_tools(server))
        else:
            names = sorted(split_item_key(key)[2] for key in data.server_items(server) if key.startswith(f"{target.kind}:"))
        close = nearest_names(name, names)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        if "@" in target.text and target.hash is None:
            hint += f" (A hash after '@' has at least {SHORT_HASH} hex digits, as 'python -m index trust' prints it.)"
        what = "tool" if is_tool else target.kind.replace("_", " ")
        problem.append(
            f"server '{server}' has no {what} '{name}' in the trust store.{hint} To approve the whole "
            f"server, run '{APPROVE_HINT} {server}'."
        )
        return False
    pending = pins.pending
    if pending is None:
        current = f", as @{short_hash(pins.approved.hash)}" if pins.approved is not None else ""
        problem.append(f"{target.id} is not waiting for approval (it is already approved{current}).")
        return False
    now_waiting = f"'{APPROVE_HINT} {target.id}@{short_hash(pending.hash)}'"
    if target.hash is not None and not pending.hash.startswith(target.hash):
        problem.append(
            f"{target.id} changed since the review: you reviewed @{target.hash[:SHORT_HASH]}, but the definition "
            f"waiting now is @{short_hash(pending.hash)}. Nothing was approved. See what changed with "
            f"{_review_hint(server)}, then approve it with {now_waiting}."
        )
        return False
    if target.hash is None and pending.shown_at is None and not unseen:
        problem.append(
            f"{target.id}: the definition waiting for approval (@{short_hash(pending.hash)}) was not shown by a "
            "review (it changed since the last 'python -m index trust', or that never listed it). Nothing was "
            f"approved. See it with {_review_hint(server)}, then approve it with {now_waiting} (or pass --yes "
            "to approve it unseen)."
        )
        return False
    _take(pins, by)
    approved.append(target.id)
    return True


def _take(pins: ToolPins, by: str) -> None:
    """The pending definition becomes the approved one."""
    assert pins.pending is not None
    pins.approved = ApprovedDefinition(hash=pins.pending.hash, definition=pins.pending.definition, by=by)
    pins.pending = None
