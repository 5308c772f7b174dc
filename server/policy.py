"""Which tools may be routed to and executed, and which need the user's confirmation.

- Allow/deny lists hold glob patterns: ``server`` (every tool of it) or ``server/tool``
  (``*`` and ``?`` work in both parts). Deny wins; an empty allow list allows everything.
- Annotations are what the child claims, corrected by the servers file's per-tool
  ``annotations`` overrides (``index.trust.overrides``) before anything below decides.
- ``COPILOT_CONFIRM`` says which tools need the user's confirmation: ``destructive`` (default)
  -- tools annotated ``destructiveHint: true``, and tools of untrusted servers (``"trusted":
  false`` or ``COPILOT_UNTRUSTED``) that do not declare themselves harmless (``readOnlyHint:
  true`` or ``destructiveHint: false``); ``untrusted`` -- only the latter; ``always``; ``never``.
  Tools in a server's ``confirm`` list always need it (except with ``never``).
- Read-only mode allows only tools that declare ``readOnlyHint: true`` (after overrides) or match
  ``COPILOT_READ_ONLY_ALLOW``; every other tool is refused, never asked about.
- Confirmation is asked through MCP elicitation when the client supports it, else with a
  single-use, expiring confirm token bound to server, tool and params.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from index.catalog.servers import ServerConfig
from index.cli.suggest import nearest_names
from index.trust.overrides import effective_annotations, needs_confirmation
from server.bounded import shown_name
from server.errors import ConfirmationRequiredError, PolicyDeniedError

logger = logging.getLogger(__name__)


def _split(pattern: str) -> tuple[str, str]:
    server, _, tool = pattern.partition("/")
    return server, tool or "*"


def _matches(patterns: Iterable[tuple[str, str]], server: str, tool: str | None) -> bool:
    for server_glob, tool_glob in patterns:
        if not fnmatch.fnmatchcase(server, server_glob):
            continue
        if tool is None or fnmatch.fnmatchcase(tool, tool_glob):
            return True
    return False


def _annotation(annotations: Mapping[str, Any] | None, key: str) -> Any:
    if not annotations:
        return None
    value = annotations.get(key)
    if value is None:
        # Records may hold the snake_case spelling of the SDK models.
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
        value = annotations.get(snake)
    return value


ConfirmMode = Literal["destructive", "untrusted", "never", "always"]


@dataclass(frozen=True)
class Risk:
    """Why a call needs confirmation (``reason`` is shown to the user)."""

    needs_confirmation: bool
    reason: str = ""
    refused_read_only: bool = False


class Policy:
    """Allow/deny lists, untrusted servers and read-only mode."""

    def __init__(
        self,
        *,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        read_only: bool = False,
        untrusted: Iterable[str] = (),
        servers: Mapping[str, ServerConfig] | None = None,
        confirm: ConfirmMode = "destructive",
        read_only_allow: Iterable[str] = (),
    ) -> None:
        self._allow = [_split(p) for p in allow if p]
        self._deny = [_split(p) for p in deny if p]
        self._untrusted = [p for p in untrusted if p]
        self._read_only_allow = [_split(p) for p in read_only_allow if p]
        self.read_only = read_only
        self.confirm = confirm
        self._servers: Mapping[str, ServerConfig] = servers or {}
        self._patterns = {
            "COPILOT_ALLOW": [p for p in allow if p],
            "COPILOT_DENY": [p for p in deny if p],
            "COPILOT_UNTRUSTED": self._untrusted,
            "COPILOT_READ_ONLY_ALLOW": [p for p in read_only_allow if p],
        }
        self.warn_unmatched()

    def update_servers(self, servers: Mapping[str, ServerConfig]) -> None:
        self._servers = servers
        self.warn_unmatched()

    def unmatched(self) -> list[str]:
        """One sentence per allow/deny/untrusted pattern naming no server of the servers file (a typo
        there would silently leave a server allowed, or trusted)."""
        names = list(self._servers)
        if not names:
            return []
        found = []
        for setting, patterns in self._patterns.items():
            for pattern in patterns:
                server = _split(pattern)[0] if setting != "COPILOT_UNTRUSTED" else pattern
                if not any(fnmatch.fnmatchcase(name, server) for name in names):
                    close = nearest_names(server, names)
                    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                    found.append(f"{setting} pattern {pattern!r} names no server of the servers file: it has no effect.{hint}")
        return found

    def warn_unmatched(self) -> None:
        for sentence in self.unmatched():
            logger.warning("%s", sentence)

    # -- allow / deny -------------------------------------------------------------------------
    def tool_allowed(self, server: str, tool: str) -> bool:
        if _matches(self._deny, server, tool):
            return False
        return not self._allow or _matches(self._allow, server, tool)

    def server_visible(self, server: str) -> bool:
        """False when no tool of ``server`` can ever be allowed (the whole server is denied)."""
        if any(fnmatch.fnmatchcase(server, s) and t == "*" for s, t in self._deny):
            return False
        return not self._allow or _matches(self._allow, server, None)

    def check_allowed(self, server: str, tool: str) -> None:
        if self.tool_allowed(server, tool):
            return
        if _matches(self._deny, server, tool):
            why = "it is on the copilot's deny list (COPILOT_DENY)"
        else:
            why = "it is not on the copilot's allow list (COPILOT_ALLOW)"
        raise PolicyDeniedError(
            f"{server}/{tool} may not be called: {why}. Use another tool (search with route), "
            "or ask the user to change the copilot's settings."
        )

    # -- confirmation -------------------------------------------------------------------------
    def is_untrusted(self, server: str) -> bool:
        config = self._servers.get(server)
        if config is not None and not config.trusted:
            return True
        return any(fnmatch.fnmatchcase(server, pattern) for pattern in self._untrusted)

    def annotations(self, server: str, tool: str, annotations: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The child's annotations for ``tool`` with the servers file's overrides applied."""
        config = self._servers.get(server)
        return effective_annotations(annotations, config.annotations if config is not None else {}, tool)

    def read_only_permits(self, server: str, tool: str, annotations: Mapping[str, Any] | None) -> bool:
        """Read-only mode allows only declared read-only tools and the user's allowlist.

        A tool that also counts as destructive (the servers file's override says so, whatever the
        child claims) is no read-only tool, however it declares itself.
        """
        if _matches(self._read_only_allow, server, tool):
            return True
        effective = self.annotations(server, tool, annotations)
        return _annotation(effective, "readOnlyHint") is True and _annotation(effective, "destructiveHint") is not True

    def assess(self, server: str, tool: str, annotations: Mapping[str, Any] | None) -> Risk:
        effective = self.annotations(server, tool, annotations)
        destructive = _annotation(effective, "destructiveHint")
        read_only_hint = _annotation(effective, "readOnlyHint")
        if self.read_only and not self.read_only_permits(server, tool, annotations):
            if destructive is True:
                why = f"{server}/{tool} is annotated as destructive"
            elif read_only_hint is False:
                why = f"{server}/{tool} declares that it modifies its environment"
            else:
                why = f"{server}/{tool} does not declare itself read-only (readOnlyHint: true)"
            return Risk(True, why, refused_read_only=True)
        reason = self._confirmation_reason(server, tool, destructive, read_only_hint)
        return Risk(reason is not None, reason or "")

    def _confirmation_reason(self, server: str, tool: str, destructive: Any, read_only_hint: Any) -> str | None:
        if self.confirm == "never":
            return None
        if self.confirm == "always":
            return "the copilot asks before every tool call (COPILOT_CONFIRM=always)"
        config = self._servers.get(server)
        if config is not None and needs_confirmation(config.confirm, tool):
            return f"the servers file lists {tool} in server '{server}''s 'confirm' list"
        if self.confirm == "destructive" and destructive is True:
            return f"{server}/{tool} is annotated as destructive (it may delete or overwrite data)"
        if self.is_untrusted(server) and read_only_hint is not True and destructive is not False:
            return f"{server} is an untrusted server and {tool} does not declare itself read-only"
        return None

    def check_read_only(self, server: str, tool: str, risk: Risk) -> None:
        if risk.refused_read_only:
            raise PolicyDeniedError(
                f"Refused: the copilot runs in read-only mode (COPILOT_READ_ONLY) and {risk.reason}. Only tools "
                "that declare readOnlyHint: true (or that the user allowed with COPILOT_READ_ONLY_ALLOW) can be "
                "called; tell the user if this task needs more."
            )


def _binding(server: str, tool: str, params: Mapping[str, Any]) -> str:
    canonical = json.dumps({"s": server, "t": tool, "p": params}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class _Pending:
    binding: str
    label: str
    expires: float


class ConfirmationStore:
    """Single-use confirm tokens, each bound to one server + tool + params, expiring after ``ttl`` s."""

    def __init__(self, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()

    def issue(self, server: str, tool: str, params: Mapping[str, Any]) -> str:
        token = "confirm-" + secrets.token_urlsafe(12)
        now = self._clock()
        with self._lock:
            self._pending = {t: p for t, p in self._pending.items() if p.expires > now}
            self._pending[token] = _Pending(_binding(server, tool, params), f"{server}/{tool}", now + self.ttl)
        return token

    def redeem(self, token: str, server: str, tool: str, params: Mapping[str, Any]) -> None:
        """Consume ``token`` for exactly this call; raise when it is unknown, expired, used or for another call."""
        now = self._clock()
        shown = shown_name(token, 80)  # a model may send anything as a token: never echo it whole
        with self._lock:
            pending = self._pending.get(token)
            if pending is None:
                raise ConfirmationRequiredError(
                    f"The confirm token '{shown}' is unknown or was already used. Call execute again without "
                    "'confirm' to get a new token, and ask the user before using it."
                )
            if pending.expires <= now:
                del self._pending[token]
                raise ConfirmationRequiredError(
                    f"The confirm token '{shown}' expired. Call execute again without 'confirm' to get a new one."
                )
            if pending.binding != _binding(server, tool, params):
                raise ConfirmationRequiredError(
                    f"The confirm token '{shown}' confirms a different call ({pending.label} with other params). "
                    "A token only confirms the exact server, tool and params it was issued for; call execute "
                    "without 'confirm' to get a token for this call."
                )
            del self._pending[token]
