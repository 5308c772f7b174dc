"""Reading the JSON files the evaluation writes and later reads back (``report.json``,
``repeats.json``, ``summary.json``), with one readable reason when a file cannot be used.

These files are also edited, copied and saved by people: a Windows editor starts them with a
BOM, a hand edit breaks the syntax or drops a field. pydantic's own message
(``1 validation error for Report``) names neither the line nor the field, so every reader goes
through :func:`read_json_model` and reports :class:`JSONFileError`'s text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from index.json_text import parse_json

ModelT = TypeVar("ModelT", bound=BaseModel)

#: Longest excerpt of a wrong value quoted in a message.
MAX_QUOTED = 60


class JSONFileError(ValueError):
    """A JSON file that cannot be read as its model; the message is the reason, without the path."""


def decode_text(data: bytes) -> str:
    """UTF-8 text, without the BOM a Windows editor puts at the start (``json`` refuses it)."""
    return data.decode("utf-8-sig")


def validation_reason(error: ValidationError) -> str:
    """The first problem pydantic found, as ``field a.b[2].c: what is wrong (got …)``."""
    first = error.errors()[0]
    where = _location(first["loc"])
    if first["type"] == "missing":
        reason = f"field {where} is missing"
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


def unreadable(path: Path, what: str, error: JSONFileError | OSError) -> str:
    """The one way a results file that cannot be used is reported: ``PATH: WHAT is unreadable (reason)``."""
    reason = str(error) if isinstance(error, JSONFileError) else f"cannot read it: {error.strerror or error}"
    return f"{path}: {what} is unreadable ({reason})"


def read_json_model(path: Path, model: type[ModelT]) -> ModelT:
    """``path`` read as ``model``. ``OSError`` (``FileNotFoundError`` included) passes through;
    anything else wrong with the file is a :class:`JSONFileError` saying what and where."""
    data = path.read_bytes()
    try:
        text = decode_text(data)
    except UnicodeDecodeError as error:
        raise JSONFileError(f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    try:
        parse_json(text)  # syntax first: pydantic's JSON errors give no line or column
    except json.JSONDecodeError as error:
        raise JSONFileError(f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        raise JSONFileError(validation_reason(error)) from None
