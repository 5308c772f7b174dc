"""Reading the JSON files the evaluation writes and later reads back (``report.json``,
``repeats.json``, ``summary.json``), with one readable reason when a file cannot be used.

The reading itself is :func:`index.json_text.read_json_model` (the copilot's own kept files are
read the same way); here is how the evaluation reports a file it cannot use.
"""

from __future__ import annotations

from pathlib import Path

from index.json_text import JSONFileError, decode_text, read_json_model, validation_reason

__all__ = ["JSONFileError", "decode_text", "read_json_model", "unreadable", "validation_reason"]


def unreadable(path: Path, what: str, error: JSONFileError | OSError) -> str:
    """The one way a results file that cannot be used is reported: ``PATH: WHAT is unreadable (reason)``."""
    reason = str(error) if isinstance(error, JSONFileError) else f"cannot read it: {error.strerror or error}"
    return f"{path}: {what} is unreadable ({reason})"

