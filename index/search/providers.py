"""Input providers: the tools of a server that give another of its tools an input it requires.

A task rarely needs one tool: "parking near the Forbidden City" needs ``find_parking_facilities``
*and* ``geocode_address``, because the first takes a latitude and a longitude that only the second
gives; "train tickets from Beijing to Shanghai" needs ``get-tickets`` and the tool that turns a
city into the ``station_code`` it requires. Nothing in the request names the second tool, so no
text signal ranks it. The catalog does say it, in two ways, read here without a model:

* *named*: a tool's description or one of its parameters' descriptions names another tool of its
  server (``fromStation: a station_code from get-station-code-of-citys``). Only identifier-like
  names count (``get-station-code-of-citys``, ``resolveLibraryId``, ``list_papers``), so a tool
  called ``search`` is not linked by every description that says "search";
* *handle*: a tool requires a parameter that is a handle -- an id, code, key, ticker, symbol,
  token or coordinate, a value a person does not type but another tool returns -- and another tool
  of its server mentions every word of that parameter's name in its description without taking
  a parameter of those words itself (``find_parking_facilities`` requires ``latitude``;
  ``geocode_address`` describes coordinates with latitude and takes an address).

:func:`index.search.ranking.with_providers` then lifts the providers of the best-ranked tools to just below the tool
that needs them. ``python -m bench.retrieval.providers`` measures it on every query set with the
depth and gap chosen by cross-validation across tasks.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from index.catalog.records import ToolRecord
from index.search.text import latin_words

#: Words that make a required parameter a handle (a value another tool returns).
HANDLE_WORDS = frozenset(
    {"id", "code", "key", "ticker", "symbol", "token", "uuid", "slug", "latitude", "longitude", "lat", "lon", "lng", "coordinate"}
)
#: Words of a parameter's name too general to say what provides it.
_GENERIC_WORDS = frozenset(
    {"from", "to", "the", "of", "by", "in", "for", "on", "and", "or", "id", "ids", "name", "type", "value", "list", "string",
     "text", "query", "input", "data", "file", "path", "url", "number", "num", "count", "limit", "max", "min", "page", "options"}
)
#: A tool name that reads as an identifier, not a word: has ``_``/``-``/``.`` or an inner capital.
_IDENTIFIER_NAME = re.compile(r"[_.-]|[a-z0-9][A-Z]")
_NAME_TOKEN = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")


@dataclass(frozen=True)
class Provision:
    """``provider`` (a record id) gives ``consumer`` its input ``parameter`` (None: named in its text)."""

    consumer: str
    provider: str
    parameter: str | None = None


class InputLink(BaseModel):
    """The other end of a hit's input link: the tool that takes its output (``input_for``) or that
    gives it an input (``input_from``)."""

    tool: str
    #: The required parameter the link fills; None when the consumer's description names the provider.
    parameter: str | None = None


def _is_handle(parameter: str) -> bool:
    return bool(latin_words(parameter) & HANDLE_WORDS) or parameter.lower().endswith(("id", "ids"))


def _own_text(record: ToolRecord) -> str:
    properties = record.input_schema.get("properties")
    texts = [record.description]
    if isinstance(properties, dict):
        texts += [str(spec.get("description", "")) for spec in properties.values() if isinstance(spec, dict)]
    return "\n".join(texts)


def _taken_words(record: ToolRecord) -> set[str]:
    properties = record.input_schema.get("properties")
    return set().union(*(latin_words(str(name)) for name in properties)) if isinstance(properties, dict) else set()


def _server_provisions(tools: Sequence[ToolRecord]) -> Iterable[Provision]:
    by_name = {tool.name: tool for tool in tools if _IDENTIFIER_NAME.search(tool.name)}
    described: dict[str, set[int]] = defaultdict(set)  # description word -> tools mentioning it
    for i, tool in enumerate(tools):
        for word in latin_words(tool.description):
            described[word].add(i)
    takes = [_taken_words(tool) for tool in tools]
    for i, tool in enumerate(tools):
        named = {token for token in _NAME_TOKEN.findall(_own_text(tool)) if token in by_name and token != tool.name}
        for name in sorted(named):
            yield Provision(tool.id, by_name[name].id)
        for parameter in tool.required:
            if not _is_handle(parameter):
                continue
            words = {w for w in latin_words(parameter) if w not in _GENERIC_WORDS and len(w) > 2}
            if not words:
                continue
            candidates = set.intersection(*(described.get(w, set()) for w in words)) - {i}
            for j in sorted(candidates):
                if not words & takes[j] and tools[j].name not in named:
                    yield Provision(tool.id, tools[j].id, parameter)


def input_providers(records: Iterable[ToolRecord]) -> dict[str, list[Provision]]:
    """Consumer id -> its providers, from tools of the same server only (first reason kept)."""
    servers: dict[str, list[ToolRecord]] = defaultdict(list)
    for record in records:
        if record.kind == "tool":
            servers[record.server].append(record)
    provisions: dict[str, dict[str, Provision]] = defaultdict(dict)
    for server in sorted(servers):
        for provision in _server_provisions(servers[server]):
            provisions[provision.consumer].setdefault(provision.provider, provision)
    return {consumer: list(found.values()) for consumer, found in provisions.items()}


def provider_positions(ids: Sequence[str], providers: Mapping[str, Sequence[Provision]]) -> tuple[tuple[int, ...], ...]:
    """Per position in ``ids``: the positions of its providers (providers not in ``ids`` left out)."""
    position = {record_id: i for i, record_id in enumerate(ids)}
    return tuple(
        tuple(position[p.provider] for p in providers.get(record_id, ()) if p.provider in position) for record_id in ids
    )
