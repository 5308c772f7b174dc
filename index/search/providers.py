"""Input providers: the tools of a server that give another of its tools an input it requires.

A task rarely needs one tool: "parking near the Forbidden City" needs ``find_parking_facilities``
*and* ``geocode_address``, because the first takes a latitude and a longitude that only the second
gives; "train tickets from Beijing to Shanghai" needs ``get-tickets`` and the tool that turns a
city into the ``station_code`` it requires. Nothing in the request names the second tool, so no
text signal ranks it. The catalog does say it, in two ways, read here without a model:

* *named*: a tool's description or one of its parameters' descriptions names another tool of its
  server (``fromStation: a station_code from get-station-code-of-citys``). Only identifier-like
  names count (``get-station-code-of-citys``, ``resolveLibraryId``, ``list_papers``), so a tool
  called ``search`` is not linked by every description that says "search", and a tool named as an
  alternative ("DEPRECATED: Use read_text_file instead", "use this instead of 'execute_command'") is
  not a provider;
* *handle*: a tool requires a parameter that is a handle -- an id, code, key, ticker, symbol,
  token or coordinate, a value a person does not type but another tool returns -- and another tool
  of its server mentions every word of that parameter's name in its description without taking
  a parameter of those words itself (``find_parking_facilities`` requires ``latitude``;
  ``geocode_address`` describes coordinates with latitude and takes an address).

:func:`index.search.ranking.with_providers` then lifts the providers of the best-ranked tools to just below the tool
that needs them. ``python -m bench.retrieval.studies.providers`` measures it on every query set with the
depth and gap chosen by cross-validation across tasks.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
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
#: A sentence that names another tool as an *alternative* ("DEPRECATED: Use read_text_file instead",
#: "Use this instead of 'execute_command'", "rather than"): the tool named there provides nothing.
_ALTERNATIVE = re.compile(r"\binstead\b|\bdeprecated\b|\brather than\b|\bsuperseded\b|\breplaced by\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n")


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


def _without_alternatives(text: str) -> str:
    """``text`` less its sentences that name a tool to use *instead* (see :data:`_ALTERNATIVE`)."""
    if not _ALTERNATIVE.search(text):
        return text
    return "\n".join(sentence for sentence in _SENTENCE_END.split(text) if not _ALTERNATIVE.search(sentence))


def _taken_words(record: ToolRecord) -> set[str]:
    properties = record.input_schema.get("properties")
    return set().union(*(latin_words(str(name)) for name in properties)) if isinstance(properties, dict) else set()


def _handle_words(parameter: str) -> set[str]:
    """The words of a required handle parameter that say what provides it (none: not a handle)."""
    if not _is_handle(parameter):
        return set()
    return {w for w in latin_words(parameter) if w not in _GENERIC_WORDS and len(w) > 2}


def _server_provisions(tools: Sequence[ToolRecord]) -> Iterable[Provision]:
    by_name = {tool.name: tool for tool in tools if _IDENTIFIER_NAME.search(tool.name)}
    handles = [[(parameter, words) for parameter in tool.required if (words := _handle_words(parameter))] for tool in tools]
    # Reading every description is most of the work; a server none of whose tools needs a handle skips it.
    wanted = set().union(*(words for needs in handles for _, words in needs))
    described: dict[str, set[int]] = defaultdict(set)  # description word -> tools mentioning it
    # A folded word less its last letter is in the text it came from (``stories`` -> ``story``).
    clues = {word[:-1] for word in wanted}
    for i, tool in enumerate(tools):
        lowered = tool.description.lower()
        if any(clue in lowered for clue in clues):
            for word in latin_words(tool.description) & wanted:
                described[word].add(i)
    takes: dict[int, set[str]] = {}  # the parameter words of each candidate provider, read once
    for i, tool in enumerate(tools):
        text = _without_alternatives(_own_text(tool)) if by_name else ""
        named = (
            {token for token in _NAME_TOKEN.findall(text) if token in by_name and token != tool.name}
            if any(name in text for name in by_name)  # a whole token only where the name is a substring
            else set()
        )
        for name in sorted(named):
            yield Provision(tool.id, by_name[name].id)
        for parameter, words in handles[i]:
            candidates = set.intersection(*(described.get(w, set()) for w in words)) - {i}
            for j in sorted(candidates):
                if j not in takes:
                    takes[j] = _taken_words(tools[j])
                if not words & takes[j] and tools[j].name not in named:
                    yield Provision(tool.id, tools[j].id, parameter)


def _first_links(tools: Sequence[ToolRecord]) -> dict[str, dict[str, Provision]]:
    """One server's links: consumer id -> provider id -> the first rule that linked them."""
    links: dict[str, dict[str, Provision]] = defaultdict(dict)
    for provision in _server_provisions(tools):
        links[provision.consumer].setdefault(provision.provider, provision)
    return links


def input_providers(records: Iterable[ToolRecord]) -> dict[str, list[Provision]]:
    """Consumer id -> its providers, from tools of the same server only (first reason kept)."""
    servers: dict[str, list[ToolRecord]] = defaultdict(list)
    for record in records:
        if record.kind == "tool":
            servers[record.server].append(record)
    return {
        consumer: list(found.values())
        for server in sorted(servers)
        for consumer, found in _first_links(servers[server]).items()
    }


def provider_positions(ids: Sequence[str], providers: Mapping[str, Sequence[Provision]]) -> tuple[tuple[int, ...], ...]:
    """Per position in ``ids``: the positions of its providers (providers not in ``ids`` left out)."""
    position = {record_id: i for i, record_id in enumerate(ids)}
    return tuple(
        tuple(position[p.provider] for p in providers.get(record_id, ()) if p.provider in position) for record_id in ids
    )


class ServerLinks:
    """The input providers of an index's tools, found server by server when a route first needs them.

    The links never cross a server, so a server's are found from its own tools alone: loading an
    index parses no record for them (finding every link up front took 100,000 tools 7-12 s more to
    load), and a route pays only for the servers of its best tools, once (``python -m bench speed
    --scale 100000`` times both). ``links[position]`` is
    what :func:`index.search.ranking.with_providers` reads: the positions of a tool's providers.
    A stored tool that no longer reads as a record (``read`` returns None) is left out of the links.
    Threads may race to find one server's links: both find the same, and a dict write is atomic.
    """

    def __init__(self, tool_servers: Sequence[int], kinds: Sequence[str], read: Callable[[int], ToolRecord | None]) -> None:
        self._servers = np.asarray(tool_servers)
        self._tools = np.asarray(kinds) == "tool"
        self._read = read
        self._found: dict[int, dict[int, tuple[tuple[int, Provision], ...]]] = {}

    def __len__(self) -> int:
        return len(self._servers)

    def __getitem__(self, position: int) -> tuple[int, ...]:
        return tuple(provider for provider, _ in self.of(position))

    def of(self, position: int) -> tuple[tuple[int, Provision], ...]:
        """The providers of the tool at ``position``: each one's position and its link, in catalog order."""
        server = int(self._servers[position])
        found = self._found.get(server)
        if found is None:
            found = self._found[server] = self._server_links(server)
        return found.get(position, ())

    def _server_links(self, server: int) -> dict[int, tuple[tuple[int, Provision], ...]]:
        members = np.flatnonzero((self._servers == server) & self._tools)
        records = {int(p): record for p in members if (record := self._read(int(p))) is not None}
        position = {record.id: p for p, record in records.items()}
        return {
            position[consumer]: tuple((position[p.provider], p) for p in found.values())
            for consumer, found in _first_links(list(records.values())).items()
        }
