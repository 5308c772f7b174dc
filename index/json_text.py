"""Reading JSON text that came from outside: a file, a host, a child, a model.

Python's ``json.loads`` raises ``RecursionError``, not a ``ValueError``, for arrays or objects
nested deeper than it can follow (about a thousand levels), so a malformed file of
``[[[[…]]]]`` got past every reader's "not JSON" handling as a traceback.

:func:`read_json_model` reads a file as a pydantic model, with one reason a person can act on when
it cannot (the line and column of a syntax error, the field that is wrong).

It also reads ``"\\ud800"`` -- a lone surrogate escape -- into a string that no UTF-8 encoder
writes and no tokenizer takes; argv bytes that are not UTF-8 arrive as such surrogates too
(``surrogateescape``). :func:`without_lone_surrogates` makes such text usable.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError


class NestedTooDeepError(json.JSONDecodeError):
    """JSON nested deeper than Python's reader follows: malformed input like any other."""

    def __init__(self, doc: str) -> None:
        message = "JSON nested too deeply to read (more than about a thousand levels of [ or {)"
        ValueError.__init__(self, message)
        self.msg, self.doc, self.pos, self.lineno, self.colno = message, doc, 0, 1, 1


_LONG_NUMBER = re.compile(r"\d{4301,}")
_STARTING_AT = " starting at"


def parse_json(text: str | bytes) -> Any:
    """``json.loads(text)``; JSON nested too deeply raises :class:`NestedTooDeepError`, and a number
    too long for Python to read a ``json.JSONDecodeError`` at it: malformed input like any other."""
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeepError(text if isinstance(text, str) else "") from None
    except ValueError as error:
        if isinstance(error, json.JSONDecodeError):
            if error.msg.endswith(_STARTING_AT):
                # The one message whose position Python keeps out of ``msg`` ("Unterminated string
                # starting at"): every reader showed it cut off, "(Unterminated string starting at)".
                error.msg = f"{error.msg.removesuffix(_STARTING_AT)} (it starts at line {error.lineno} column {error.colno})"
            raise
        # Python refuses integers of more than 4,300 digits (a guard against slow conversions) with a
        # plain ValueError, which got past every reader's "not JSON" handling as a traceback.
        if "integer string conversion" not in str(error):
            raise
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        found = _LONG_NUMBER.search(doc)
        digits = f"{len(found.group()):,} digits" if found else "too many digits"
        raise json.JSONDecodeError(
            f"a number too long to read ({digits}; at most 4,300)", doc, found.start() if found else 0
        ) from None


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object ``text`` holds, or None when it is not valid JSON or not an object: for
    readers that only look for an object and take anything else as plain text."""
    try:
        data = parse_json(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: What a lone surrogate becomes: the Unicode replacement character, as a UTF-8 decoder's "replace" gives.
REPLACEMENT_CHARACTER = "\ufffd"


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone UTF-16 surrogate, which UTF-8 cannot encode."""
    return _LONE_SURROGATE.search(text) is not None


def without_lone_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a str never holds a valid pair: JSON
    and UTF-8 decoders join those into one character)."""
    return _LONE_SURROGATE.sub(REPLACEMENT_CHARACTER, text)


def os_text(value: str) -> str | None:
    """Text Python read from the system (an argument, an environment variable) as the UTF-8 it is.

    Under a locale that is not UTF-8 (``LC_ALL=C`` with ``PYTHONUTF8=0``) Python reads every
    non-ASCII byte as a lone surrogate (``surrogateescape``); bytes that are UTF-8 are decoded
    here, and None says they are not UTF-8 text at all. Other text is returned as it is.
    """
    if value.isascii() or not has_lone_surrogate(value):
        return value
    try:
        return os.fsencode(value).decode("utf-8")
    except UnicodeError:
        return None


def text_for_os(value: str) -> str:
    """``value`` in the form the system can take it (a child's environment, a command line): the
    inverse of :func:`os_text`. Under a filesystem encoding that lacks some of its characters
    (``LC_ALL=C`` with ``PYTHONUTF8=0``: ASCII), starting a process with a question in Chinese
    failed with a UnicodeEncodeError; the text then goes as its UTF-8 bytes, which a reader of
    UTF-8 (a shell, the copilot's settings, :func:`os_text`) takes back as the same text. Bytes
    Python read from the system (lone surrogates in a path) stay the bytes they were."""
    try:
        os.fsencode(value)
    except UnicodeEncodeError:
        return os.fsdecode(value.encode("utf-8", "surrogateescape"))
    return value


def arguments_for_os(argv: Iterable[str]) -> list[str]:
    """A command line in the form the system can take (:func:`text_for_os`)."""
    return [text_for_os(arg) for arg in argv]


def environment_for_os(env: Mapping[str, str]) -> dict[str, str]:
    """A child's environment, names and values, in the form the system can take (:func:`text_for_os`)."""
    return {text_for_os(name): text_for_os(value) for name, value in env.items()}


def shown_os_text(value: str) -> str:
    """``value`` (a path, an argument Python read from the system) as a person reads and pastes it:
    :func:`os_text`, and where its bytes are not UTF-8 those bytes as ``\\xNN`` escapes (never a
    lone surrogate, which no UTF-8 writer or JSON parser takes)."""
    text = os_text(value)
    if text is None:
        # Bytes that are no UTF-8, or escaped bytes mixed with text the locale cannot encode: each
        # run of escaped bytes on its own, then any lone surrogate left as a ``\\udNNN`` escape.
        text = _ESCAPED_BYTES.sub(_escaped_bytes_text, value).encode("utf-8", "backslashreplace").decode("utf-8")
    return text


#: A run of bytes ``surrogateescape`` read as lone surrogates (U+DC80..U+DCFF, one per byte).
_ESCAPED_BYTES = re.compile("[\udc80-\udcff]+")


def _escaped_bytes_text(match: re.Match[str]) -> str:
    return bytes(ord(char) - 0xDC00 for char in match.group()).decode("utf-8", "backslashreplace")


ModelT = TypeVar("ModelT", bound=BaseModel)

#: Longest excerpt of a wrong value quoted in a message.
MAX_QUOTED = 60


class JSONFileError(ValueError):
    """A JSON file that cannot be read as its model; the message is the reason, without the path.

    ``undecodable``: the bytes are no UTF-8 text at all; ``field``: where in the JSON the model
    found its first problem ("" when the file as a whole is wrong: no UTF-8, no JSON, no object).
    """

    def __init__(self, reason: str, *, undecodable: bool = False, field: str = "") -> None:
        super().__init__(reason)
        self.undecodable = undecodable
        self.field = field


def decode_text(data: bytes) -> str:
    """UTF-8 text, without the BOM a Windows editor puts at the start (``json`` refuses it)."""
    return data.decode("utf-8-sig")


def validation_reason(error: ValidationError) -> str:
    """The first problem pydantic found, as ``field a.b[2].c: what is wrong (got …)``."""
    first = error.errors()[0]
    where = _location(first["loc"])
    if first["type"] == "missing":
        reason = f"field {where} is missing"
    elif first["type"] == "value_error" and where:
        # A validator of ours: its message says what is wrong; the value it judged adds nothing.
        reason = f"field {where}: {first['msg'].removeprefix('Value error, ')}"
    elif not where and first["type"] == "value_error":  # a validator of the whole model
        reason = first["msg"].removeprefix("Value error, ")
    elif not where:
        reason = f"expected a JSON object at the top level (got {type(first.get('input')).__name__})"
    else:
        got = repr(first.get("input"))
        got = got if len(got) <= MAX_QUOTED else got[:MAX_QUOTED] + "..."
        reason = f"field {where}: {first['msg']} (got {got})"
    more = error.error_count() - 1
    return reason + (f"; and {more} more problem(s)" if more else "")


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def read_json_model(path: Path, model: type[ModelT]) -> ModelT:
    """``path`` read as ``model``. ``OSError`` (``FileNotFoundError`` included) passes through;
    anything else wrong with the file is a :class:`JSONFileError` saying what and where: files are
    edited, copied and saved by people too, and pydantic's own message (``1 validation error for
    Report``) names neither the line nor the field."""
    data = path.read_bytes()
    try:
        text = decode_text(data)
    except UnicodeDecodeError as error:
        raise JSONFileError(f"not UTF-8 text ({error.reason} at byte {error.start})", undecodable=True) from None
    try:
        parse_json(text)  # syntax first: pydantic's JSON errors give no line or column
    except json.JSONDecodeError as error:
        raise JSONFileError(f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        raise JSONFileError(validation_reason(error), field=_location(error.errors()[0]["loc"])) from None
