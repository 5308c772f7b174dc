"""Approved definitions reach the index as soon as the copilot sees the approval.

``python -m index approve`` writes the pins file only (``index.trust.store``). The index kept what
it held until the child happened to list its tools again: a changed tool's text from before the
change (the live updater keeps the approved record while a change waits), nothing at all for a
new tool that was held back, and likewise for prompts and resource templates. So ``route`` showed
-- and ``execute`` checked the params of a stopped server against -- a definition the user had
just replaced.

The copilot follows the pins file instead. Its freshness costs one ``os.stat`` (the trust store's
cache key, which every ``route`` and ``execute`` pays already for the verdicts); when it changed,
every definition a person approved (``by: user``, nothing waiting) that the index holds in another
form is written to the index from the pin itself -- exactly the definition that was reviewed,
whether or not its child runs -- and one approved while this copilot watched that the index lacks
(a new tool, prompt or template that was held back) is added. ``route`` waits for that, bounded,
once the embedding model is in (before, it answers at once and the sync lands in the background),
and ``execute`` when it checks params against the index's record (a stopped server), so the first
answer after an approval shows the approved definition; a background check brings hosts' lists
along when neither is called.

Why the copilot and not the approving CLI, which has the pending definition too: writing the
index means loading the embedding model (seconds, for a command that answers at once) and
writing a store that a running copilot writes as well (its live updates), which that copilot
would notice only at its next staleness check. The copilot has the model, the store and the pins
at hand, and writes where ``route`` reads.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import anyio
import anyio.abc

from index.catalog.records import ToolRecord
from index.catalog.servers import ServerConfig
from index.errors import CopilotError
from index.trust.definition import definition_hash, definition_record, item_definition, tool_definition
from index.trust.store import ApprovedDefinition, ToolPins, TrustData, TrustStore, now, split_item_key

logger = logging.getLogger(__name__)

#: Seconds ``route`` and ``execute`` wait for approved definitions to reach the index (embedding
#: them may wait for the model to load: route waits only once it is in); past that they answer from
#: the index as it is, and the update lands in the background.
APPROVAL_SYNC_WAIT = 10.0

#: ``on_synced({server: kinds})`` after approved definitions were written; kinds are ``tools``,
#: ``prompts``, ``resources`` (as :mod:`server.aggregate.live` names its changes).
OnSynced = Callable[[dict[str, set[str]]], Awaitable[None]]


def _approved_by_user(data: TrustData) -> Iterator[tuple[str, str, str, ToolPins]]:
    """(kind, server, record id, pins) of every definition a person approved that nothing replaced since."""
    for key, pins in data.tools.items():
        if pins.approved is not None and pins.pending is None and pins.approved.by == "user":
            yield "tool", key.split("/", 1)[0], key, pins
    for key, pins in data.items.items():
        if pins.approved is not None and pins.pending is None and pins.approved.by == "user":
            kind, server, _name = split_item_key(key)
            yield kind, server, key, pins  # an item's key is its record id


def _newly_approved(before: TrustData | None, kind: str, key: str, approved: ApprovedDefinition, since: str) -> bool:
    """Whether ``approved`` was approved after the pins this copilot saw last (after ``since``, its
    start, when it saw none yet)."""
    if before is None:
        return approved.at >= since
    old = (before.tools if kind == "tool" else before.items).get(key)
    return old is None or old.approved is None or old.approved.hash != approved.hash


def _change(kind: str) -> str:
    return "tools" if kind == "tool" else "prompts" if kind == "prompt" else "resources"


class ApprovedDefinitions:
    """Writes approved definitions into the index; see the module docstring."""

    def __init__(
        self,
        store: TrustStore,
        index: Any,
        servers: Callable[[], Mapping[str, ServerConfig]],
        on_synced: OnSynced | None = None,
    ) -> None:
        self._store = store
        self._index = index
        self._servers = servers
        self._on_synced = on_synced
        #: The pins as of the last sync (``TrustStore`` gives a new object only when the file changed).
        self._seen: TrustData | None = None
        self._since = now()  # approvals before this were made while no copilot watched
        self._running: anyio.Event | None = None
        #: Definitions written into the index so far.
        self.written = 0

    async def follow(self, task_group: anyio.abc.TaskGroup | None, wait: float = APPROVAL_SYNC_WAIT) -> None:
        """Bring the index up to the approvals made so far, waiting at most ``wait`` seconds.

        The sync runs in ``task_group`` (a caller that stops waiting, or is cancelled, does not
        stop it); pins that change meanwhile are followed once it is done.
        """
        with anyio.move_on_after(wait):
            while True:
                running = self._running
                if running is not None:
                    await running.wait()
                    continue
                try:
                    data = self._store.load()
                except CopilotError as error:  # a damaged pins file: the trust verdicts report it
                    logger.debug("approved definitions not followed: %s", error)
                    return
                if data is self._seen:
                    return
                done = self._running = anyio.Event()
                if task_group is None:
                    await self._sync(self._seen, data, done)
                else:
                    task_group.start_soon(self._sync, self._seen, data, done, name="approved definitions")

    async def _sync(self, before: TrustData | None, data: TrustData, done: anyio.Event) -> None:
        records: list[ToolRecord] = []
        try:
            records = await anyio.to_thread.run_sync(self.stale_records, before, data, abandon_on_cancel=True)
            if records:
                # No server in scope: only these records are written, nothing of the servers is deleted.
                await anyio.to_thread.run_sync(lambda: self._index.sync(records, servers=[]), abandon_on_cancel=True)
                self.written += len(records)
                logger.info("indexed %d approved definition(s): %s", len(records), ", ".join(r.id for r in records))
            self._seen = data
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as error:  # noqa: BLE001 -- the index keeps what it held; a child's next listing updates it
            self._seen = data  # not tried again by every route: the next change of the pins tries again
            records = []
            logger.warning("approved definitions could not be written to the index (%s); it keeps what it held", error)
        finally:
            self._running = None
            done.set()
        if records and self._on_synced is not None:
            changes: dict[str, set[str]] = {}
            for record in records:
                changes.setdefault(record.server, set()).add(_change(record.kind))
            try:
                await self._on_synced(changes)
            except Exception:  # noqa: BLE001 -- telling hosts is best effort; the index is right
                logger.exception("listener of approved definitions failed")

    def stale_records(self, before: TrustData | None, data: TrustData) -> list[ToolRecord]:
        """The records to write: approved definitions the index holds in another form, and those
        approved since ``before`` that it lacks (reads the index: call it from a worker thread)."""
        if not self._index.built:
            return []
        servers = self._servers()
        records: list[ToolRecord] = []
        for kind, server, key, pins in _approved_by_user(data):
            config = servers.get(server)
            approved = pins.approved
            if config is None or not config.is_enabled or approved is None:
                continue
            indexed = self._index.find(key)
            if indexed is not None:
                shown = tool_definition(indexed) if kind == "tool" else item_definition(indexed)
                if definition_hash(shown) == approved.hash:
                    continue
                description, category = indexed.server_description, indexed.category
            elif _newly_approved(before, kind, key, approved, self._since):
                # A new one that was held back. Not any approved pin the index lacks: a tool its server
                # dropped since keeps its pin, and must not come back.
                sibling = next(iter(self._index.records_of(server=server)), None)
                description = sibling.server_description if sibling is not None else config.description
                category = sibling.category if sibling is not None else config.category
            else:
                continue
            records.append(
                definition_record(kind, server, approved.definition, server_description=description, category=category)
            )
        return records
