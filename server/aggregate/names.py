"""Names the copilot gives its children's tools, prompts and resources, so none can collide.

A name depends only on the pool the copilot knows (which pairs exist, which servers are exposed
without a prefix), never on which child answered first or in which order lists arrived:

- ``<server>__<name>`` (*plain*) when that is a valid SEP-986 name of at most 64 characters and
  the server name has no ``__`` in it and does not end with ``_``: the split at the first ``__``
  is then unambiguous, so two pairs never share a plain name;
- otherwise ``<readable prefix>_<hash>`` (*hashed*), the hash being of the exact (server, name)
  pair; the readable prefix has no ``__``, so a hashed name is never a plain one. Pairs whose
  hashes collide are ranked by sorting them, and all but the first get ``-2``, ``-3``, ... ;
- for servers exposed without a prefix (``bare``), the child's own name, when it is valid, not
  reserved and cannot be mistaken for one of the forms above; of several such servers offering
  the same name, the one whose (server, name) sorts first keeps it, the others get the forms
  above.

A :class:`NameTable` holds the pool (:meth:`NameTable.learn`) and maps names back to pairs.

Resource URIs and URI templates become ``copilot://<server>/<the child's own URI>`` with the
server name percent-encoded: reversible without a table, unique per server, and a template stays
a template (its ``{variables}`` are untouched). Which unprefixed server keeps a bare URI is
decided like bare names (:class:`BareUris`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

#: Longest name handed out (SEP-986 allows 128; many hosts cut at 64).
MAX_NAME_LENGTH = 64
SEPARATOR = "__"
_VALID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_UNDERSCORES = re.compile(r"_{2,}")
_HASH_CHARS = 10
#: The tail every hashed name has (and no other form may have): ``_<hash>`` or ``_<hash>-<rank>``.
_HASHED_TAIL = re.compile(rf"_[0-9a-f]{{{_HASH_CHARS}}}(?:-[0-9]+)?$")

URI_SCHEME = "copilot"
_URI_PREFIX = f"{URI_SCHEME}://"

Pair = tuple[str, str]


def _digest(server: str, name: str) -> str:
    return hashlib.sha256(f"{server}\0{name}".encode()).hexdigest()[:_HASH_CHARS]


def plain_name(server: str, name: str) -> str | None:
    """``server__name`` when that form is unambiguous and valid, else ``None``."""
    candidate = f"{server}{SEPARATOR}{name}"
    if SEPARATOR in server or server.endswith("_") or not _VALID.fullmatch(candidate):
        return None
    return candidate


def hashed_name(server: str, name: str, rank: int = 0) -> str:
    """A valid name for any pair: a readable prefix (cleaned, without ``__``, cut) and a hash of the
    exact pair; ``rank`` > 0 only for pairs whose hash another pair has too (see the module docstring)."""
    readable = _UNDERSCORES.sub("_", _INVALID_CHARS.sub("_", f"{server}_{name}")).strip("_.-") or "item"
    suffix = f"_{_digest(server, name)}" + (f"-{rank + 1}" if rank else "")
    return readable[: MAX_NAME_LENGTH - len(suffix)].rstrip("_.-") + suffix


def bare_eligible(name: str, reserved: frozenset[str] = frozenset()) -> bool:
    """Whether a child's own ``name`` may be exposed as it is: valid, not reserved, and not of a
    shape the namespaced forms use (so it can never take another pair's name)."""
    return (
        _VALID.fullmatch(name) is not None
        and name not in reserved
        and SEPARATOR not in name
        and _HASHED_TAIL.search(name) is None
    )


@dataclass
class NameTable:
    """The pool of (server, name) pairs and the names they get; see the module docstring.

    ``reserved`` names (the copilot's own tools) are never handed out.
    """

    reserved: frozenset[str] = frozenset()
    #: The pool: every known pair, and whether its server is exposed without a prefix.
    _pool: dict[Pair, bool] = field(default_factory=dict)
    #: Names several pairs may want: ``("bare", name)`` and ``("hash", digest)`` -> those pairs.
    _claims: dict[tuple[str, str], set[Pair]] = field(default_factory=dict)
    #: Every name handed out, with the pair it stood for then (checked again by :meth:`resolve`).
    _by_name: dict[str, Pair] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A reserved name of a namespaced shape could shadow a child's name; the copilot's own are bare-shaped.
        odd = sorted(name for name in self.reserved if not bare_eligible(name))
        if odd:
            raise ValueError(f"reserved names must be plain identifiers without '__' or a hash tail: {odd}")

    def learn(self, pool: Iterable[tuple[str, str, bool]]) -> None:
        """Replace the pool with these (server, name, bare) triples (the current listing of every child)."""
        self._pool = {}
        self._claims = {}
        for server, name, bare in pool:
            self._add((server, name), bare)
        # A name handed out for a pair that left the pool resolves to nothing any more: forgotten,
        # or a child renaming its items on every listing grows this without end.
        self._by_name = {exposed: pair for exposed, pair in self._by_name.items() if pair in self._pool}

    def name(self, server: str, name: str, *, bare: bool = False) -> str:
        """The exposed name of ``server``'s ``name`` within the current pool (a pair not in it joins it).

        ``bare`` says the server is exposed without a prefix: the child's own name is used when
        the rules of the module docstring give it to this pair.
        """
        pair = (server, name)
        if self._pool.get(pair) is not bare:
            self._add(pair, bare)
        exposed = self._assigned(pair, bare)
        self._by_name[exposed] = pair
        return exposed

    def resolve(self, exposed: str) -> Pair | None:
        """The (server, name) an exposed name stands for now, or ``None`` if it stands for none.

        A name handed out before the pool changed (its pair left it, or another pair now sorts
        before it for a bare name) no longer resolves: callers list again and retry.
        """
        pair = self._by_name.get(exposed)
        if pair is None:
            return None
        bare = self._pool.get(pair)
        if bare is None or self._assigned(pair, bare) != exposed:
            del self._by_name[exposed]
            return None
        return pair

    # -- internals ------------------------------------------------------------------------------
    def _add(self, pair: Pair, bare: bool) -> None:
        if pair in self._pool:
            self._drop(pair)
        self._pool[pair] = bare
        for claim in self._claims_of(pair, bare):
            self._claims.setdefault(claim, set()).add(pair)

    def _drop(self, pair: Pair) -> None:
        for claim in self._claims_of(pair, self._pool.pop(pair)):
            rivals = self._claims.get(claim)
            if rivals is not None:
                rivals.discard(pair)
                if not rivals:
                    del self._claims[claim]

    def _claims_of(self, pair: Pair, bare: bool) -> list[tuple[str, str]]:
        server, name = pair
        claims = [("bare", name)] if bare and bare_eligible(name, self.reserved) else []
        if plain_name(server, name) is None:
            claims.append(("hash", _digest(server, name)))
        return claims

    def _assigned(self, pair: Pair, bare: bool) -> str:
        """The pair's name under the current pool (the pair is in the pool)."""
        server, name = pair
        if bare and bare_eligible(name, self.reserved) and min(self._claims[("bare", name)]) == pair:
            return name
        plain = plain_name(server, name)
        if plain is not None:
            return plain
        rivals = sorted(self._claims[("hash", _digest(server, name))])
        return hashed_name(server, name, rivals.index(pair))


@dataclass
class BareUris:
    """Which unprefixed server keeps a bare resource URI (or URI template) several of them list.

    The server whose name sorts first keeps it; the others' resources are reached as
    ``copilot://<server>/<URI>`` (which every server's resources always are, too).
    """

    _owner: dict[str, str] = field(default_factory=dict)

    def learn(self, pool: Iterable[tuple[str, str]]) -> None:
        """Replace the pool with these (server, the child's URI) pairs of unprefixed servers."""
        owners: dict[str, str] = {}
        for server, uri in pool:
            if uri not in owners or server < owners[uri]:
                owners[uri] = server
        self._owner = owners

    def keeps(self, server: str, uri: str) -> bool:
        """Whether unprefixed ``server`` exposes its ``uri`` as it is (no other server sorting first lists it)."""
        return not is_copilot_uri(uri) and self._owner.get(uri, server) == server


def is_copilot_uri(uri: str) -> bool:
    """Whether ``uri`` is in the copilot's own scheme (a child's URI of that scheme is never exposed bare)."""
    return uri.startswith(_URI_PREFIX)


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
