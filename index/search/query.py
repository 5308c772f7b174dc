"""Route queries: the paper's ``<tool_assistant>`` form or plain text, validated.

LiveMCPBench's agents ask for tools as::

    <tool_assistant>
    server: a server that can read and write Word documents
    tool: add a paragraph to a document
    </tool_assistant>

The ``server`` part is a *kind* of service in the agent's words (matched against server
descriptions), the ``tool`` part the operation (matched against tools). Also understood: the
same ``server:``/``tool:`` lines without the tags, a JSON object with ``server``/``tool`` keys,
a block inside a Markdown code fence, an unclosed block, both fields on one line, a block whose
newlines arrived escaped (``\\n``), several blocks in one query (each is an operation), and plain
text (which serves as both).
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from index.json_text import parse_json_object, without_lone_surrogates
from index.errors import QueryError

#: Longer than any sensible tool request: the rest is cut off (the embedder reads only the first
#: ~128 tokens anyway, and BM25 over a pasted document is slow and mostly noise).
MAX_QUERY_CHARS = 2000
#: Beyond this the caller is clearly sending the wrong thing; say so instead of guessing.
REFUSED_QUERY_CHARS = 100_000
MAX_TOP_K = 100
#: Operations of one query searched separately; more are left to the whole-query search.
MAX_OPERATIONS = 4

#: The tag, also as agents vary it: ``<tool-assistant>``, ``<tool_assistant id="1">`` (whose closing
#: tag was read as part of the tool's words).
_BLOCK = re.compile(r"<tool[_-]assistant\b[^<>]*>(.*?)(?:</tool[_-]assistant\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"</?tool[_-]assistant\b[^<>]*>", re.IGNORECASE)
#: A list bullet before a field: Markdown's three, and the typographic ones agents also write.
_BULLET = r"(?:[-*+•·][ \t]*)?"
#: Written so that no two neighbouring parts can match the same run of spaces: ``^\s*[-*]?\s*`` over
#: many blank lines took seconds per route (each line start tried every split of the run).
_FIELD = re.compile(
    rf"^[ \t]*{_BULLET}(server|tool)[ \t]*(?:name[ \t]*)?[:：][ \t]*", re.IGNORECASE | re.MULTILINE
)
#: Another field on a line of its own (``params: ticker=AAPL``, ``reason: …``): it ends the value of
#: the field before it, and is no part of any. A key of one or two words; not ``https://`` or ``C:\``.
_OTHER_FIELD = re.compile(
    rf"^[ \t]*{_BULLET}[A-Za-z][\w-]+(?:[ \t][A-Za-z][\w-]*)?[ \t]*[:：](?![/\\])", re.IGNORECASE | re.MULTILINE
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_FENCE = re.compile(r"^[ \t]*```[\w-]*[ \t]*$", re.MULTILINE)
#: Untagged fields count only when a line starts with ``tool:`` (a plain sentence may say "server:").
_TOOL_LINE = re.compile(rf"^[ \t]*{_BULLET}tool[ \t]*(?:name[ \t]*)?[:：]", re.IGNORECASE | re.MULTILINE)
_EXAMPLE = "e.g. 'convert a Word document to PDF'"
#: A letter or digit of any script: "погода в Москве" and "طقس" are queries (the keyword index reads
#: only Latin letters, digits and CJK, but the embedding model reads them), "?!?" and "🌤️" are not.
_TEXT = re.compile(r"[^\W_]")
#: How agents list several operations in one query ("add slides + save presentation").
_OPERATION_JOINER = re.compile(r"\s+\+\s+|\s*[;；]\s*")
#: Inside a ``tool:`` field a comma lists operations too ("beat tracking, MFCC extraction");
#: in plain text it rarely does ("Beijing, China"), so there it is left alone.
_FIELD_OPERATION_JOINER = re.compile(r"\s+\+\s+|\s*[;；，、]\s*|\s*,\s+")
#: ``tool:`` written on the ``server:`` line ("<tool_assistant>server: maps tool: directions</tool_assistant>").
_INLINE_TOOL = re.compile(r"\s+(?:[-*+•·]\s*)?tool\s*(?:name\s*)?[:：]\s*", re.IGNORECASE)
#: ``server:`` written on the ``tool:`` line ("tool: directions server: maps").
_INLINE_SERVER = re.compile(r"\s+(?:[-*+•·]\s*)?server\s*(?:name\s*)?[:：]\s*", re.IGNORECASE)
#: Untagged one-line fields: ``server: maps tool: directions``.
_INLINE_FIELDS = re.compile(
    rf"^[ \t]*{_BULLET}server[ \t]*(?:name[ \t]*)?[:：].*?\s(?:[-*+•·]\s*)?tool\s*(?:name\s*)?[:：]", re.IGNORECASE
)
#: A newline escaped twice (``\\n`` as two characters) next to a tag or a field, as agents send
#: when they JSON-encode the block once too often; only these are undone, never ``\\n`` in a path.
_ESCAPED_NEWLINE = re.compile(
    r"(?:\\r)?\\n(?=\s*(?:[-*+•·]\s*)?(?:server|tool)\s*(?:name\s*)?[:：]|\s*</?tool_assistant>|\s*$)"
    r"|(?<=<tool_assistant>)\s*(?:\\r)?\\n",
    re.IGNORECASE,
)
#: Quoted text (a search phrase, a file name) is one operation even when it holds commas; an
#: apostrophe counts as a quote only at a word boundary ("today's news, weather" still splits).
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|「[^」]*」|(?<!\w)'[^']*'(?!\w)")
#: A place or name after a comma ("Paris, France"): one capitalised word after a capitalised word.
_NAME_CONTINUATION = re.compile(r"[A-Z][\w.-]*")


class ParsedQuery(BaseModel):
    """What to match: ``tool`` against tools, ``server`` (if given) against server descriptions."""

    text: str
    tool: str
    server: str | None = None
    truncated: bool = False
    #: The operations of a query that lists several (``tool: add slides + save presentation``);
    #: empty for a query of one operation. Each is searched on its own as well as the whole.
    operations: list[str] = []
    #: How many operations the query lists (``operations`` holds the first :data:`MAX_OPERATIONS`).
    operations_listed: int = 0

    @property
    def server_text(self) -> str:
        return self.server or self.tool


def _has_text(text: str) -> bool:
    """Whether ``text`` has anything to search for (a letter or digit of any script)."""
    return _TEXT.search(text) is not None


def _fields(block: str, *, tagged: bool = False) -> dict[str, str]:
    """``server:``/``tool:`` fields of a block; a field's value runs until the next field, or a line
    that starts another one (``params: …``: its words were searched as the tool's, and its ``;``
    read as a second operation)."""
    matches = list(_FIELD.finditer(block))
    fields: dict[str, str] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(block)
        other = _OTHER_FIELD.search(block, match.end(), end)
        if other is not None and block.rfind("\n", match.end(), other.start() + 1) >= 0:
            end = other.start()  # (a line of its own: not "tool: read file: notes.txt")
        value = " ".join(block[match.end() : end].split())
        key = match.group(1).lower()
        if value and key not in fields:
            fields[key] = value
    if "tool" not in fields and "server" in fields:
        # Both fields on one line: the server value then holds the tool field.
        server, *tool = _INLINE_TOOL.split(fields["server"], maxsplit=1)
        if tool and _has_text(tool[0]):
            fields["server"], fields["tool"] = server, tool[0]
    elif tagged and "server" not in fields and "tool" in fields:
        # The same, tool first, inside a <tool_assistant> block only: in free text "tool: restart the
        # web server: nginx" is one operation.
        tool, *server = _INLINE_SERVER.split(fields["tool"], maxsplit=1)
        if server and _has_text(server[0]) and _has_text(tool):
            fields["tool"], fields["server"] = tool, server[0]
    return fields


def _unescape_newlines(text: str) -> str:
    """A block whose newlines arrived as the two characters ``\\n`` (and no real ones), as lines."""
    if "\n" in text or "\\n" not in text:
        return text
    return _ESCAPED_NEWLINE.sub("\n", text)


def _block_fields(text: str) -> list[dict[str, str]]:
    """The fields of each ``<tool_assistant>`` block of ``text`` that names a tool, in order."""
    found = [_fields(segment, tagged=True) for segment in _TAG.split(text) if _FIELD.search(segment)]
    return [fields for fields in found if "tool" in fields]


def _json_fields(text: str) -> dict[str, str] | None:
    """``{"server": ..., "tool": ...}`` (string values only), or None when ``text`` is not such an object."""
    if not (text.startswith("{") and text.endswith("}")):
        return None
    data = parse_json_object(text)
    if data is None:
        return None
    fields = {str(k).lower(): " ".join(v.split()) for k, v in data.items() if isinstance(v, str) and v.strip()}
    return fields if {"server", "tool", "query"} & fields.keys() else None


def parse_query(query: object) -> ParsedQuery:
    """Validate and split a route query; raises :class:`QueryError` with what to send instead."""
    if not isinstance(query, str):
        raise QueryError(f"the query must be text, not {type(query).__name__}; describe the tool you need ({_EXAMPLE}).")
    # A lone surrogate (argv bytes that are not UTF-8, a JSON "\\ud800") reached the tokenizer and
    # failed the search with a TypeError; as U+FFFD it is just a character that matches nothing.
    text = without_lone_surrogates(_CONTROL.sub(" ", query)).strip()
    if not text:
        raise QueryError(f"the query is empty; describe the tool you need ({_EXAMPLE}).")
    if len(text) > REFUSED_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(text)} characters long (limit {REFUSED_QUERY_CHARS}); send a short description "
            f"of the one tool you need ({_EXAMPLE}), not a whole document."
        )
    truncated = len(text) > MAX_QUERY_CHARS
    if truncated:
        text = text[:MAX_QUERY_CHARS]
    server: str | None = None
    tool = text
    tool_field = False  # the operation came from a ``tool:`` field, where commas list operations
    if _FENCE.search(text):
        text = _FENCE.sub("", text).strip() or text
    text = _unescape_newlines(text)
    json_fields = _json_fields(text)
    block = _BLOCK.search(text)
    blocks = _block_fields(text) if block else []
    if json_fields is None and blocks:
        # Each block that names a tool is an operation (the first alone used to be searched and the
        # others silently dropped; a first block with a server line only hid the next one's tool).
        tool = " + ".join(dict.fromkeys(fields["tool"] for fields in blocks))  # a repeated block once
        servers = list(dict.fromkeys(fields["server"] for fields in blocks if "server" in fields))
        server = "; ".join(servers) or None
        tool_field = True
    elif json_fields is not None:
        server = json_fields.get("server")
        tool = json_fields.get("tool") or json_fields.get("query") or ""
        tool_field = "tool" in json_fields  # a "query" is plain text: its commas do not list operations
        if not tool:
            tool = " ".join(json_fields.values())
    elif block or _TOOL_LINE.search(text) or _INLINE_FIELDS.match(text):
        fields = _fields(block.group(1) if block else text, tagged=block is not None)
        server = fields.get("server")
        tool = fields.get("tool") or ""
        tool_field = bool(tool)
        if not tool:
            # A block with only a server line (or free text): search with everything it says.
            tool = " ".join(_FIELD.sub(" ", _TAG.sub(" ", text)).split())
    elif _TAG.search(text):
        tool = " ".join(_TAG.sub(" ", text).split())
    if server is not None and not _has_text(server):
        server = None
    if not _has_text(tool):
        raise QueryError(
            f"the query {query.strip()[:80]!r} has no words to search for; describe the tool you need ({_EXAMPLE})."
        )
    joiner = _FIELD_OPERATION_JOINER if tool_field else _OPERATION_JOINER
    listed = listed_operations(tool, joiner)
    return ParsedQuery(
        text=text, tool=tool, server=server, truncated=truncated, operations=listed[:MAX_OPERATIONS],
        operations_listed=len(listed),
    )


def listed_operations(tool: str, joiner: re.Pattern[str] = _OPERATION_JOINER) -> list[str]:
    """Every distinct operation ``tool`` lists, or [] for one operation."""
    found: list[str] = []
    for piece in _pieces(tool, joiner):
        piece = " ".join(piece.split()).strip(" .")
        if _has_text(piece) and piece.lower() not in (f.lower() for f in found):
            found.append(piece)
    return found if len(found) >= 2 else []



def _pieces(tool: str, joiner: re.Pattern[str]) -> list[str]:
    """``tool`` split at ``joiner``, except inside quotes and before a name after a comma ("Paris, France")."""
    quoted = [match.span() for match in _QUOTED.finditer(tool)]
    splits = [m for m in joiner.finditer(tool) if not any(begin < m.start() < end for begin, end in quoted)]
    kept: list[re.Match[str]] = []
    for index, match in enumerate(splits):
        after_end = splits[index + 1].start() if index + 1 < len(splits) else len(tool)
        is_comma = match.group().strip() in (",", "，")
        if is_comma and _continues_name(tool[: match.start()], tool[match.end() : after_end]):
            continue
        kept.append(match)
    pieces: list[str] = []
    start = 0
    for match in kept:
        pieces.append(tool[start : match.start()])
        start = match.end()
    pieces.append(tool[start:])
    return pieces


def _continues_name(previous: str, piece: str) -> bool:
    """``piece`` is one capitalised word following a capitalised word: "Paris, France", not an operation."""
    words, before = piece.split(), previous.split()
    return (
        len(words) == 1
        and bool(before)
        and _NAME_CONTINUATION.fullmatch(words[0].strip(" .")) is not None
        and _NAME_CONTINUATION.fullmatch(before[-1]) is not None
    )


def check_top_k(top_k: object) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise QueryError(f"top_k must be a whole number between 1 and {MAX_TOP_K}, not {top_k!r}.")
    if not 1 <= top_k <= MAX_TOP_K:
        raise QueryError(f"top_k must be between 1 and {MAX_TOP_K}, not {top_k}.")
    return top_k
