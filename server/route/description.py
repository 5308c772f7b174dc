"""``route``'s tool description, generated from the pool: what it holds and how to ask.

The paper's "Query Error" failures come from agents that do not know what the pool holds or ask
for several operations at once. The description the host shows the model therefore lists the
pool's categories with the kinds of service in each (the words most typical of their tools and
servers, then server names) and says how to query: one operation per query, one query per
sub-step. It is regenerated whenever the routable servers change (the copilot then tells hosts
with ``notifications/tools/list_changed``). ``python -m bench retrieval`` prints its size.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from index.search.text import STOPWORDS, humanize, split_identifier, stem
from index.cli.display import counted

#: Servers named per category before "+N more".
MAX_SERVERS_PER_CATEGORY = 10
#: Keywords (kinds of service) per category: more for big categories, at most this many.
MAX_KEYWORDS_PER_CATEGORY = 12
#: Characters of category lines: the description must stay a few hundred tokens for a pool of any
#: size (hosts put it in every prompt; LiveMCPBench's 8 categories take ~1,200). Categories that
#: do not fit are only named, smallest last, on one line of at most :data:`MAX_MORE_CHARS`.
MAX_CATEGORY_CHARS = 1600
MAX_MORE_CHARS = 300
#: A category name longer than this (a servers file may hold anything) is cut.
MAX_CATEGORY_NAME_CHARS = 40
#: A keyword or a server's label longer than this is cut (a line then stays under ~1,000 characters).
MAX_ITEM_CHARS = 40

_GENERIC = frozenset(
    """get list set create add delete remove update search find fetch read write run make new info information
    data tool tools server servers mcp model context protocol provides provide using use based api apis
    file files support supports allows enable enables access simple powerful official unofficial via
    including like etc one multiple various comprehensive specific detailed current details by id name names
    query result results return returns value values item items page type getter retrieve retrieves
    generate manage take perform show handle check execute against given""".split()
) | STOPWORDS
#: Words ending in "s" that are not plurals (or whose singular means something else: "news", "maps").
_NOT_PLURAL = frozenset("news analysis status series chess physics lyrics sports maps canvas axis alias".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")

INTRO = "Search the tool pool for the tool that does one step of your task."
GUIDANCE = """\
How to ask: one operation per query, one query per sub-step. For "summarize today's news into a PDF"
search "get today's news headlines", then "create a PDF document" -- not both at once. Name the kind
of service and the operation, in this form:
<tool_assistant>
server: <kind of service, e.g. spreadsheet tools>
tool: <one operation, e.g. read the rows of an Excel sheet>
</tool_assistant>
or in plain words ("current time in Tokyo"). Returns the best tools (server, tool name,
description, input schema); fewer than top_k when the rest are clearly irrelevant, and a note
with related servers when nothing fits well. Then call execute with one of them."""


@dataclass
class PoolServer:
    name: str
    description: str = ""
    category: str = ""
    tools: list[str] = field(default_factory=list)


def _singular(word: str) -> str:
    """``word`` without a plural or third-person "s" (papers, searches, queries), so one kind of
    service is counted once and a generic verb is known in any form ("fetches" is "fetch"): the
    search index's folding, plus the "-es" after a sibilant it leaves ("searches" is "searche" there)."""
    if word in _NOT_PLURAL:
        return word
    if word.endswith(("ches", "shes", "sses", "xes", "zes")):
        return word[:-2]
    return stem(word)


def _terms(text: str) -> list[tuple[str, str]]:
    """(singular, as written) for each word of ``text`` that says something about a service."""
    terms = []
    for match in _WORD.findall(text):
        word = match.lower()
        base = _singular(word)
        if len(base) > 2 and word not in _GENERIC and base not in _GENERIC:
            terms.append((base, word))
    return terms


@dataclass
class _PoolWords:
    """The pool's words, counted once per description (a pool may hold 100,000 tool names)."""

    #: Per category: how often each word (singular) occurs in its servers' tool names and descriptions.
    by_category: dict[str, Counter[str]]
    #: Per category: how each word is written there (singular -> written form -> count).
    written: dict[str, dict[str, Counter[str]]]
    #: In how many categories each word occurs.
    document_frequency: Counter[str]

    @classmethod
    def of(cls, pool: Iterable[PoolServer]) -> _PoolWords:
        by_category: dict[str, Counter[str]] = defaultdict(Counter)
        written: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
        for server in pool:
            category = server.category or "Other"
            for base, word in _server_terms(server):
                by_category[category][base] += 1
                written[category][base][word] += 1
        document_frequency: Counter[str] = Counter()
        for counts in by_category.values():
            document_frequency.update(counts.keys())
        return cls(by_category, written, document_frequency)

    def keywords(self, category: str, wanted: int, shown: set[str]) -> list[str]:
        """Words typical of ``category`` (tf-idf across categories), leaving out the ``shown`` words
        (the server names its line lists anyway), each as most often written there."""
        counts, written = self.by_category[category], self.written[category]
        total = len(self.by_category)
        scored = sorted(
            (base for base in counts if base not in shown),
            key=lambda w: (-(counts[w] * math.log((1 + total) / self.document_frequency[w])), w),
        )
        return [min(written[base], key=lambda w: (-written[base][w], len(w), w)) for base in scored[:wanted]]


def _server_terms(server: PoolServer) -> list[tuple[str, str]]:
    return [term for tool in server.tools for term in _terms(" ".join(split_identifier(tool)))] + _terms(server.description)


def server_label(name: str) -> str:
    """How the description names a server: its words, without "mcp" and "server" ("yahoo-finance-mcp"
    is "yahoo finance"). ``route``'s server filter takes these too (the model copies them from here)."""
    words = [w for w in humanize(name).split() if w not in ("mcp", "server")]
    return " ".join(words) or name


def _category_name(category: str) -> str:
    name = " ".join(category.split()) or "Other"
    return name if len(name) <= MAX_CATEGORY_NAME_CHARS else name[: MAX_CATEGORY_NAME_CHARS - 1] + "…"


def _short(text: str) -> str:
    """A keyword or server label cut to :data:`MAX_ITEM_CHARS` (identifiers may be 128 characters long)."""
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 1] + "…"


def _category_line(category: str, members: list[PoolServer], words: _PoolWords) -> str:
    named = sorted(members, key=lambda s: (-len(s.tools), s.name))
    listed = [server_label(s.name) for s in named[:MAX_SERVERS_PER_CATEGORY]]
    # A server's name already says its kind of service ("excel", "git"): the keywords say the rest.
    shown = {_singular(word.lower()) for label in listed for word in _WORD.findall(label)}
    wanted = min(MAX_KEYWORDS_PER_CATEGORY, 4 + len(members) // 3)
    # Every item is cut, so that even the first line, which is always kept, fits the budget.
    keywords = ", ".join(_short(word) for word in words.keywords(category, wanted, shown))
    labels = ", ".join(_short(label) for label in listed)
    more = f" +{len(named) - MAX_SERVERS_PER_CATEGORY} more" if len(named) > MAX_SERVERS_PER_CATEGORY else ""
    # A category whose servers have no English words (or none yet indexed) has no keywords.
    return f"- {_category_name(category)}: " + (f"{keywords}; " if keywords else "") + f"{labels}{more}"


def _more_line(groups: list[tuple[str, list[PoolServer]]]) -> str:
    """Categories left out of the detailed lines, by name and size, within :data:`MAX_MORE_CHARS`."""

    def line(shown: list[str], rest: int) -> str:
        more = f"{rest} more categories" if not shown else f" +{rest} more categories"
        return "- Also: " + ", ".join(shown) + (more if rest else "")

    shown: list[str] = []
    for index, (category, members) in enumerate(groups):
        entry = f"{_category_name(category)} ({counted(len(members), 'server')})"
        if len(line([*shown, entry], len(groups) - index - 1)) > MAX_MORE_CHARS:
            return line(shown, len(groups) - index)  # the line the last round measured
        shown.append(entry)
    return line(shown, 0)


def describe_pool(servers: Iterable[PoolServer]) -> str:
    """The full route description for these (routable) servers."""
    pool = sorted(servers, key=lambda s: s.name)
    lines = [INTRO]
    if pool:
        tool_count = sum(len(s.tools) for s in pool)
        servers_counted = counted(len(pool), "server")
        size = f"{counted(tool_count, 'tool')} on {servers_counted}" if tool_count else servers_counted
        lines.append(f"The pool has {size}, by category (typical words; servers):")
        groups: dict[str, list[PoolServer]] = defaultdict(list)
        for server in pool:
            groups[server.category or "Other"].append(server)
        ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
        words = _PoolWords.of(pool)
        used = 0
        for position, (category, members) in enumerate(ordered):
            line = _category_line(category, members, words)
            if used + len(line) > MAX_CATEGORY_CHARS and position > 0:
                lines.append(_more_line(ordered[position:]))
                break
            lines.append(line)
            used += len(line) + 1
    else:
        lines.append("The pool is empty right now (no server is indexed or allowed).")
    lines.append(GUIDANCE)
    return "\n".join(lines)


def describe_pool_from_records(records: Iterable, routable: Iterable[str] | None = None) -> str:
    """:func:`describe_pool` from index records (``ToolRecord``-like), limited to ``routable`` servers."""
    allowed = set(routable) if routable is not None else None
    servers: dict[str, PoolServer] = {}
    for record in records:
        if allowed is not None and record.server not in allowed:
            continue
        server = servers.setdefault(
            record.server, PoolServer(record.server, record.server_description, record.category)
        )
        server.tools.append(record.name)
    return describe_pool(servers.values())


def describe_pool_from_config(servers: Mapping[str, object], indexed: Mapping[str, PoolServer] | None = None) -> str:
    """From the servers file (names, descriptions, categories), with tool names from the index when known."""
    pool = []
    for name, config in servers.items():
        known = (indexed or {}).get(name)
        pool.append(
            PoolServer(
                name,
                str(getattr(config, "description", "") or (known.description if known else "")),
                str(getattr(config, "category", "") or (known.category if known else "")),
                list(known.tools) if known else [],
            )
        )
    return describe_pool(pool)
