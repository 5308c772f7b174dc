"""Names the copilot gives its children's tools, prompts and resources, so none can collide.

Tools and prompts are named ``<server>__<name>`` when that is a valid SEP-986 name of at most
64 characters, the server name has no ``__`` in it (so the split is unambiguous) and nothing
else took the name; otherwise ``<readable prefix>_<hash>``, where the hash is of the exact
(server, name) pair. A :class:`NameTable` remembers every name it gave out, so a name always maps
back to exactly one (server, name) and never to two.

Resource URIs and URI templates become ``copilot://<server>/<the child's own URI>`` with the
server name percent-encoded: reversible without a table, unique per server, and a template stays
a template (its ``{variables}`` are untouched).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

#: Longest name handed out (SEP-986 allows 128; many hosts cut at 64).
MAX_NAME_LENGTH = 64
SEPARATOR = "__"
_VALID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_HASH_CHARS = 10

URI_SCHEME = "copilot"
_URI_PREFIX = f"{URI_SCHEME}://"


def _digest(server: str, name: str) -> str:
    return hashlib.sha256(f"{server}\0{name}".encode()).hexdigest()[:_HASH_CHARS]


def plain_name(server: str, name: str) -> str | None:
    """``server__name`` when that form is unambiguous and valid, else ``None``."""
    candidate = f"{server}{SEPARATOR}{name}"
    if SEPARATOR in server or server.endswith("_") or not _VALID.fullmatch(candidate):
        return None
    return candidate


def hashed_name(server: str, name: str) -> str:
    """A valid name for any pair: a readable prefix (cleaned, cut) and a hash of the exact pair."""
    readable = _INVALID_CHARS.sub("_", f"{server}{SEPARATOR}{name}").strip("_.-") or "item"
    suffix = f"_{_digest(server, name)}"
    return readable[: MAX_NAME_LENGTH - len(suffix)].rstrip("_.-") + suffix


@dataclass
class NameTable:
    """Two-way map between exposed names and (server, name) pairs; see the module docstring.

    ``reserved`` names (the copilot's own tools) are never handed out.
    """

    reserved: frozenset[str] = frozenset()
    _by_name: dict[str, tuple[str, str]] = field(default_factory=dict)
    _by_pair: dict[tuple[str, str], str] = field(default_factory=dict)

    def name(self, server: str, name: str, *, bare: bool = False) -> str:
        """The exposed name of ``server``'s ``name`` (the same one every time it is asked).

        ``bare`` asks for the child's own name, kept when it is valid and not taken (used for
        servers exposed without a prefix); otherwise the namespaced form.
        """
        pair = (server, name)
        known = self._by_pair.get(pair)
        if known is not None:
            return known
        candidates = [name] if bare and _VALID.fullmatch(name) else []
        plain = plain_name(server, name)
        candidates += [plain] if plain is not None else []
        candidates.append(hashed_name(server, name))
        for candidate in candidates:
            if candidate not in self.reserved and candidate not in self._by_name:
                self._by_name[candidate] = pair
                self._by_pair[pair] = candidate
                return candidate
        # The hashed form is taken only by a hash collision (or a reserved name): lengthen it.
        index = 2
        while True:
            candidate = f"{hashed_name(server, name)[: MAX_NAME_LENGTH - 4]}_{index}"
            if candidate not in self.reserved and candidate not in self._by_name:
                self._by_name[candidate] = pair
                self._by_pair[pair] = candidate
                return candidate
            index += 1

    def resolve(self, exposed: str) -> tuple[str, str] | None:
        """The (server, name) an exposed name stands for, or ``None`` if this table never gave it out."""
        return self._by_name.get(exposed)

    def names(self) -> list[str]:
        return list(self._by_name)


def resource_uri(server: str, uri: str) -> str:
    """``copilot://<server>/<uri>``: the copilot's URI (or URI template) for a child's resource."""
    return f"{_URI_PREFIX}{quote(server, safe='')}/{uri}"


def parse_resource_uri(uri: str) -> tuple[str, str] | None:
    """(server, the child's URI) of a ``copilot://`` URI, or ``None`` when it is not one of ours."""
    if not uri.startswith(_URI_PREFIX):
        return None
    server, slash, original = uri[len(_URI_PREFIX) :].partition("/")
    if not slash or not server or not original:
        return None
    return unquote(server), original
