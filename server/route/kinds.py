"""route's ``kind`` filter: what each value searches, and what to say when the pool has none of a kind.

Most pools offer tools only. ``route(kind="prompt")`` there used to answer "Nothing matched.
Rephrase the query", which sends the model rephrasing a query that no wording can answer; it is
told instead that no server offers that kind, and which kinds there are.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from server.bounded import shown_name

#: route's ``kind`` filter: what each value searches.
ROUTE_KINDS: dict[str, tuple[str, ...]] = {
    "tool": ("tool",),
    "prompt": ("prompt",),
    "resource": ("resource", "resource_template"),
    "any": ("tool", "prompt", "resource", "resource_template"),
}
#: The plural a person reads for each ``kind`` value but ``any``.
_NOUNS = {"tool": "tools", "prompt": "prompts", "resource": "resources"}


def route_kind(kind: object) -> str | None:
    """The ``kind`` value a model meant (``" Tools "`` is ``tool``; blank or absent is the default),
    or None when it names no kind."""
    if kind is None:
        return "tool"
    if not isinstance(kind, str):
        return None
    name = kind.strip().lower() or "tool"
    if name not in ROUTE_KINDS and name.endswith("s") and name[:-1] in ROUTE_KINDS:
        name = name[:-1]
    return name if name in ROUTE_KINDS else None


#: Longer than any kind could be misspelt: difflib's cost grows with the length (a 15 MB kind: 2.8 s).
_MAX_SUGGESTED = 64


def unknown_kind_message(kind: object) -> str:
    """Why ``kind`` was refused, with the nearest kind when one is close."""
    near = (
        difflib.get_close_matches(kind.strip().lower(), ROUTE_KINDS, n=1, cutoff=0.6)
        if isinstance(kind, str) and len(kind) <= _MAX_SUGGESTED
        else []
    )
    hint = f' Did you mean kind="{near[0]}"?' if near else ""
    got = repr(kind) if not isinstance(kind, str) or len(kind) <= _MAX_SUGGESTED else repr(shown_name(kind))
    return f"kind must be one of {', '.join(ROUTE_KINDS)}, got {got}.{hint}"


def _counts(offered: Mapping[str, int]) -> dict[str, int]:
    """Records per ``kind`` value (resources and resource templates are both ``resource``)."""
    return {
        kind: total
        for kind in _NOUNS
        if (total := sum(offered.get(record_kind, 0) for record_kind in ROUTE_KINDS[kind]))
    }


def _listing(counts: Mapping[str, int]) -> str:
    return ", ".join(
        f"{_NOUNS[kind]} ({count}; kind=\"{kind}\"{', the default' if kind == 'tool' else ''})"
        for kind, count in counts.items()
    )


def missing_kind_note(
    kind: str, pool: Mapping[str, int], server: str | None = None, on_server: Mapping[str, int] | None = None
) -> str | None:
    """What to say when the searched servers hold nothing of ``kind``; None when they do (or hold
    nothing at all, which is a matter of indexing, not of kinds).

    ``pool``/``on_server``: records per record kind of the routable servers and of the ``server`` filter.
    """
    wanted = ROUTE_KINDS.get(kind, ())
    in_pool = _counts(pool)
    if not in_pool:
        return None
    noun = _NOUNS.get(kind, "results")
    if not any(pool.get(record_kind) for record_kind in wanted):
        return (
            f"No server in the pool offers {noun}, so kind=\"{kind}\" finds nothing whatever the query. "
            f"The pool offers: {_listing(in_pool)}; search one of those kinds instead."
        )
    if server is None or on_server is None:
        return None
    if any(on_server.get(record_kind) for record_kind in wanted):
        return None
    has = _listing(_counts(on_server))
    return (
        f"Server {server!r} offers no {noun}" + (f"; it offers {has}" if has else "")
        + f". Other servers in the pool offer {noun}: drop the server filter to search them."
    )
