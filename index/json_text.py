"""Reading JSON text that came from outside: a file, a host, a child, a model.

Python's ``json.loads`` raises ``RecursionError``, not a ``ValueError``, for arrays or objects
nested deeper than it can follow (about a thousand levels), so a malformed file of
``[[[[…]]]]`` got past every reader's "not JSON" handling as a traceback.
"""

from __future__ import annotations

import json
from typing import Any


class NestedTooDeepError(json.JSONDecodeError):
    """JSON nested deeper than Python's reader follows: malformed input like any other."""

    def __init__(self, doc: str) -> None:
        message = "JSON nested too deeply to read (more than about a thousand levels of [ or {)"
        ValueError.__init__(self, message)
        self.msg, self.doc, self.pos, self.lineno, self.colno = message, doc, 0, 1, 1


def parse_json(text: str | bytes) -> Any:
    """``json.loads(text)``; JSON nested too deeply raises :class:`NestedTooDeepError`, a ``json.JSONDecodeError``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeepError(text if isinstance(text, str) else "") from None
