"""Route queries: the paper's ``<tool_assistant>`` form or plain text, validated.

LiveMCPBench's agents ask for tools as::

    <tool_assistant>
    server: a server that can read and write Word documents
    tool: add a paragraph to a document
    </tool_assistant>

The ``server`` part is a *kind* of service in the agent's words (matched against server
descriptions), the ``tool`` part the operation (matched against tools). Also understood: the
same ``server:``/``tool:`` lines without the tags, a JSON object with ``server``/``tool`` keys,
a block inside a Markdown code fence, an unclosed block, and plain text (which serves as both).
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from index.errors import QueryError
from index.text import has_words

#: Longer than any sensible tool request: the rest is cut off (the embedder reads only the first
#: ~128 tokens anyway, and BM25 over a pasted document is slow and mostly noise).
MAX_QUERY_CHARS = 2000
#: Beyond this the caller is clearly sending the wrong thing; say so instead of guessing.
REFUSED_QUERY_CHARS = 100_000
MAX_TOP_K = 100
#: Operations of one query searched separately; more are left to the whole-query search.
MAX_OPERATIONS = 4

_BLOCK = re.compile(r"<tool_assistant>(.*?)(?:</tool_assistant>|\Z)", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"</?tool_assistant>", re.IGNORECASE)
_FIELD = re.compile(r"^\s*[-*]?\s*(server|tool)\s*(?:name)?\s*[:：]\s*", re.IGNORECASE | re.MULTILINE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_FENCE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)
#: Untagged fields count only when a line starts with ``tool:`` (a plain sentence may say "server:").
_TOOL_LINE = re.compile(r"^\s*[-*]?\s*tool\s*(?:name)?\s*[:：]", re.IGNORECASE | re.MULTILINE)
_EXAMPLE = "e.g. 'convert a Word document to PDF'"
#: How agents list several operations in one query ("add slides + save presentation").
_OPERATION_JOINER = re.compile(r"\s+\+\s+|\s*[;；]\s*")
#: Inside a ``tool:`` field a comma lists operations too ("beat tracking, MFCC extraction");
#: in plain text it rarely does ("Beijing, China"), so there it is left alone.
_FIELD_OPERATION_JOINER = re.compile(r"\s+\+\s+|\s*[;；，、]\s*|\s*,\s+")


class ParsedQuery(BaseModel):
    """What to match: ``tool`` against tools, ``server`` (if given) against server descriptions."""

    text: str
    tool: str
    server: str | None = None
    truncated: bool = False
    #: The operations of a query that lists several (``tool: add slides + save presentation``);
    #: empty for a query of one operation. Each is searched on its own as well as the whole.
    operations: list[str] = []

    @property
    def server_text(self) -> str:
        return self.server or self.tool


def _fields(block: str) -> dict[str, str]:
    """``server:``/``tool:`` fields of a block; a field's value runs until the next field."""
    matches = list(_FIELD.finditer(block))
    fields: dict[str, str] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(block)
        value = " ".join(block[match.end() : end].split())
        key = match.group(1).lower()
        if value and key not in fields:
            fields[key] = value
    return fields


def _json_fields(text: str) -> dict[str, str] | None:
    """``{"server": ..., "tool": ...}`` (string values only), or None when ``text`` is not such an object."""
    if not (text.startswith("{") and text.endswith("}")):
        return None
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    fields = {str(k).lower(): " ".join(v.split()) for k, v in data.items() if isinstance(v, str) and v.strip()}
    return fields if {"server", "tool", "query"} & fields.keys() else None


def parse_query(query: object) -> ParsedQuery:
    """Validate and split a route query; raises :class:`QueryError` with what to send instead."""
    if not isinstance(query, str):
        raise QueryError(f"the query must be text, not {type(query).__name__}; describe the tool you need ({_EXAMPLE}).")
    text = _CONTROL.sub(" ", query).strip()
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
    json_fields = _json_fields(text)
    block = _BLOCK.search(text)
    if json_fields is not None:
        server = json_fields.get("server")
        tool = json_fields.get("tool") or json_fields.get("query") or ""
        tool_field = bool(tool)
        if not tool:
            tool = " ".join(json_fields.values())
    elif block or _TOOL_LINE.search(text):
        fields = _fields(block.group(1) if block else text)
        server = fields.get("server")
        tool = fields.get("tool") or ""
        tool_field = bool(tool)
        if not tool:
            # A block with only a server line (or free text): search with everything it says.
            tool = " ".join(_FIELD.sub(" ", _TAG.sub(" ", text)).split())
    elif _TAG.search(text):
        tool = " ".join(_TAG.sub(" ", text).split())
    if server is not None and not has_words(server):
        server = None
    if not has_words(tool):
        raise QueryError(
            f"the query {query.strip()[:80]!r} has no words to search for; describe the tool you need ({_EXAMPLE})."
        )
    joiner = _FIELD_OPERATION_JOINER if tool_field else _OPERATION_JOINER
    return ParsedQuery(text=text, tool=tool, server=server, truncated=truncated, operations=split_operations(tool, joiner))


def split_operations(tool: str, joiner: re.Pattern[str] = _OPERATION_JOINER) -> list[str]:
    """The distinct operations ``tool`` lists (at most :data:`MAX_OPERATIONS`), or [] for one operation."""
    found: list[str] = []
    for piece in joiner.split(tool):
        piece = " ".join(piece.split()).strip(" .")
        if has_words(piece) and piece.lower() not in (f.lower() for f in found):
            found.append(piece)
    return found[:MAX_OPERATIONS] if len(found) >= 2 else []


def check_top_k(top_k: object) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise QueryError(f"top_k must be a whole number between 1 and {MAX_TOP_K}, not {top_k!r}.")
    if not 1 <= top_k <= MAX_TOP_K:
        raise QueryError(f"top_k must be between 1 and {MAX_TOP_K}, not {top_k}.")
    return top_k
