"""The pin store: approved tool definitions and pending changes, in ``COPILOT_HOME/trust/pins.json``.

One JSON file, shared by every process that uses the same home (copilots, ``index build``,
``index crawl``, ``index approve``): reads are cached until the file changes, every update
re-reads it under an exclusive lock (``fcntl.flock`` on ``pins.lock``) and replaces it
atomically, so concurrent writers never lose each other's pins.

Per tool it keeps the ``approved`` definition (its hash, the definition itself for diffs, when
and how it was approved) and, when the child now shows something else, the ``pending`` one
(why it is held back: ``changed``, ``new tool``, ``new server``, ``poisoning``; what changed;
scan findings; when a review last showed it to a person). Prompts and resource templates are
kept the same way under ``items``, keyed by their record id (``prompt:server/name``,
``resource_template:server/uri``: a prompt may share a tool's name). Per server it keeps when
it was first seen in a servers file and whether it is quarantined as new
(``COPILOT_QUARANTINE_NEW``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from index.errors import ConfigError
from index.storage.file_lock import exclusive_lock
from index.trust.scan import Finding

logger = logging.getLogger(__name__)

STORE_VERSION = 1
FILE_NAME = "pins.json"

PendingReason = Literal["changed", "new tool", "new item", "new server", "poisoning"]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ApprovedDefinition(BaseModel):
    hash: str
    definition: dict[str, Any]
    at: str = Field(default_factory=now)
    by: str = Field(default="first use", description="first use | user | auto-approve")


class PendingDefinition(BaseModel):
    hash: str
    definition: dict[str, Any]
    reason: PendingReason
    seen_at: str = Field(default_factory=now)
    summary: list[str] = Field(default_factory=list, description="What changed, safe to show a model.")
    findings: list[Finding] = Field(default_factory=list)
    #: When ``python -m index trust`` showed this very definition (a new pending definition starts
    #: unshown): a bare ``approve`` takes only what a review showed.
    shown_at: str | None = None


class ToolPins(BaseModel):
    approved: ApprovedDefinition | None = None
    pending: PendingDefinition | None = None


class ServerTrust(BaseModel):
    first_seen: str = Field(default_factory=now)
    quarantined: bool = False
    reason: str | None = None


class TrustData(BaseModel):
    version: int = STORE_VERSION
    servers: dict[str, ServerTrust] = Field(default_factory=dict)
    tools: dict[str, ToolPins] = Field(default_factory=dict)
    #: Prompts and resource templates, by record id (``prompt:server/name``).
    items: dict[str, ToolPins] = Field(default_factory=dict)

    def pins_of(self, kind: str) -> dict[str, ToolPins]:
        """The table that pins definitions of ``kind``, by :func:`pin_key` (tools apart from the rest)."""
        return self.tools if kind == "tool" else self.items

    def server_tools(self, server: str) -> dict[str, ToolPins]:
        prefix = f"{server}/"
        return {key[len(prefix) :]: pins for key, pins in self.tools.items() if key.startswith(prefix)}

    def server_items(self, server: str) -> dict[str, ToolPins]:
        """The server's pinned prompts and resource templates, by record id."""
        return {key: pins for key, pins in self.items.items() if item_server(key) == server}

    def servers_named(self) -> set[str]:
        """Every server the store knows of (from the servers file, tools or items)."""
        names = set(self.servers) | {key.split("/", 1)[0] for key in self.tools}
        return names | {item_server(key) for key in self.items}


def item_key(kind: str, server: str, name: str) -> str:
    """The store key of a prompt or resource template: its record id (``name``: a template's URI)."""
    return f"{kind}:{server}/{name}"


def pin_key(kind: str, server: str, name: str) -> str:
    """The key of a definition in :meth:`TrustData.pins_of` (what ``approve`` is given): ``server/tool``;
    ``prompt:server/name``, ``resource_template:server/uri`` (a record's ``id``)."""
    return f"{server}/{name}" if kind == "tool" else item_key(kind, server, name)


def split_item_key(key: str) -> tuple[str, str, str]:
    """(kind, server, name) of an item key."""
    kind, _, rest = key.partition(":")
    server, _, name = rest.partition("/")
    return kind, server, name


def item_server(key: str) -> str:
    return split_item_key(key)[1]


#: Seconds an update waits for another process's (each holds it for a read and a write): one
#: stopped while holding it (Ctrl-Z, a debugger) must not stall every approval without a word.
TRUST_LOCK_WAIT = 30.0


class TrustStore:
    """Thread- and process-safe access to one pins file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = os.fspath(path)
        self._lock = threading.Lock()
        #: Orders this process's writers. Held while another process's file lock is waited for (up to
        #: TRUST_LOCK_WAIT), so never by readers: ``load`` runs on the event loop, and waiting there for a
        #: writer stuck behind another process's lock froze every session (and SIGTERM) for 30 s.
        self._writing = threading.Lock()
        self._cached: TrustData | None = None
        self._cached_key: tuple[int, int] | None = None

    @classmethod
    def in_home(cls, home: Path) -> TrustStore:
        return cls(home / "trust" / FILE_NAME)

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def _key(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self._file)  # not Path.stat: this runs on every tool call
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def _read(self) -> TrustData:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return TrustData()
        except OSError as error:
            raise ConfigError(f"{self.path}: cannot read the trust store ({error.strerror}).") from None
        try:
            return TrustData.model_validate_json(text)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(
                f"{self.path}: the trust store is damaged ({where}: {first['msg']}). Move it away to start over "
                "(every tool is then pinned again on first use)."
            ) from None

    def load(self) -> TrustData:
        """The current pins (cached until the file changes). Callers must not modify the result."""
        with self._lock:
            key = self._key()
            if self._cached is None or key != self._cached_key:
                self._cached = self._read()
                self._cached_key = key
            return self._cached

    def update(self, change: Callable[[TrustData], bool]) -> TrustData:
        """Apply ``change`` to fresh data under the file lock; write when it returns True.

        When nothing was written and the file is the one cached, the cached object stays: readers
        tell "the pins changed" by its identity (``server.route.approvals``), and every listing
        of a child calls this whether or not anything changed.
        """
        lock = self.path.with_suffix(".lock")
        what, unusable = f"updating the trust store {self.path}", "its directory must be a writable directory."
        with self._writing, exclusive_lock(lock, wait=TRUST_LOCK_WAIT, what=what, unusable=unusable):
            key = self._key()
            data = self._read()
            if change(data):
                self._write(data)
                with self._lock:
                    self._cached, self._cached_key = data, self._key()
            else:
                with self._lock:
                    if self._cached is None or key != self._cached_key:
                        self._cached, self._cached_key = data, key
            return data

    def _write(self, data: TrustData) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        text = json.dumps(data.model_dump(mode="json", exclude_none=True), indent=1, ensure_ascii=False, sort_keys=True)
        try:
            tmp.write_text(text + "\n", encoding="utf-8")
            tmp.replace(self.path)
        except OSError as error:
            raise ConfigError(f"{self.path}: cannot write the trust store ({error.strerror}).") from None
