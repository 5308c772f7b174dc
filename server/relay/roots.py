"""The roots children work in: ``COPILOT_ROOTS`` or the roots the host declares.

Answering a child's ``roots/list`` and choosing the working directory of servers whose entry says
``"works_in": "roots"`` both come down to one question -- which directories is the user working
in? In order:

1. ``COPILOT_ROOTS`` (the benchmark runner sets it to the task's workspace): the operator said so;
2. the roots of the host that made the call, when it declared the ``roots`` capability (a legacy
   host is asked directly and the answer kept until it sends ``notifications/roots/list_changed``;
   a 2026-07-28 host is asked through the ``input_required`` round trip);
3. the roots a host gave most recently (children also ask outside any call, e.g. right after
   ``initialize``);
4. none: ``roots/list`` answers an empty list and ``works_in: roots`` servers run in their own
   work directory.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

import anyio
import mcp_types as types

from server.keyed_locks import KeyedLocks
from server.relay.host import HostLink

logger = logging.getLogger(__name__)


def path_root(path: Path) -> types.Root:
    resolved = path.expanduser().resolve()
    return types.Root(uri=resolved.as_uri(), name=resolved.name or str(resolved))


def root_directory(root: types.Root) -> Path | None:
    """The local directory a ``file://`` root names, if it exists."""
    parts = urlsplit(str(root.uri))
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = Path(unquote(parts.path))
    return path if path.is_dir() else None


class Roots:
    """Which directories the user works in (see the module docstring)."""

    def __init__(self, configured: Sequence[Path] = (), *, ask_timeout: float = 300.0) -> None:
        self.configured = [path_root(path) for path in configured]
        #: Seconds a legacy host gets to answer ``roots/list`` (``COPILOT_INPUT_TIMEOUT``).
        self.ask_timeout = ask_timeout
        #: The latest answer of each legacy host connection, and of any host.
        self._by_host: dict[Hashable, list[types.Root]] = {}
        self._latest: list[types.Root] | None = None
        #: One question at a time per connection: a host slow to answer delays its own calls only.
        self._asking: KeyedLocks[Hashable] = KeyedLocks()
        #: Connections that let ``roots/list`` go unanswered: not asked again until their roots change,
        #: or every call of theirs to a ``works_in: roots`` server would wait the whole timeout again.
        self._unanswered: set[Hashable] = set()

    @property
    def fixed(self) -> bool:
        return bool(self.configured)

    def current(self) -> list[types.Root]:
        """The roots to answer when no host can be asked."""
        if self.configured:
            return list(self.configured)
        return list(self._latest or [])

    def working_directory(self) -> Path | None:
        """The first root that is a local directory (``works_in: roots`` servers run there)."""
        for root in self.current():
            directory = root_directory(root)
            if directory is not None:
                return directory
        return None

    def remember(self, host: HostLink | None, roots: list[types.Root]) -> None:
        if host is not None and host.era == "legacy":
            key = host.connection_key
            if key not in self._by_host and host.connection is not None:
                # A host's roots end with its connection (HTTP sessions come and go).
                host.connection.exit_stack.callback(self._by_host.pop, key, None)
            self._by_host[key] = list(roots)
        self._latest = list(roots)

    def forget(self, connection_key: Hashable) -> None:
        """The host said its roots changed (``notifications/roots/list_changed``)."""
        self._by_host.pop(connection_key, None)
        self._unanswered.discard(connection_key)

    async def of_host(self, host: HostLink) -> list[types.Root] | None:
        """A legacy host's roots (asked once per connection until they change); ``None`` if it has none."""
        if self.configured:
            return list(self.configured)
        request = types.ListRootsRequest()
        if host.era != "legacy" or not host.can_answer(request):
            return None
        key = host.connection_key
        cached = self._by_host.get(key)
        if cached is not None:
            return list(cached)
        if key in self._unanswered:
            return None
        async with self._asking.hold(key):
            cached = self._by_host.get(key)
            if cached is not None:
                return list(cached)
            if key in self._unanswered:
                return None
            answer: types.InputResponse | types.ErrorData | None = None
            with anyio.move_on_after(self.ask_timeout):
                answer = await host.ask(request)
            if answer is None:
                if host.connection is not None and key not in self._unanswered:
                    host.connection.exit_stack.callback(self._unanswered.discard, key)
                self._unanswered.add(key)
                logger.warning(
                    "%s did not answer roots/list within %gs (COPILOT_INPUT_TIMEOUT); it is not asked again until "
                    "it says its roots changed, and its 'works_in: roots' servers run in the roots known otherwise",
                    host.describe, self.ask_timeout,
                )
                return None
            if not isinstance(answer, types.ListRootsResult):
                logger.info("%s did not list its roots: %s", host.describe, getattr(answer, "message", answer))
                return None
            self.remember(host, answer.roots)
            return list(answer.roots)
