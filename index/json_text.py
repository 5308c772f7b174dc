"""Reading JSON text that came from outside: a file, a host, a child, a model.

Python's ``json.loads`` raises ``RecursionError``, not a ``ValueError``, for arrays or objects
nested deeper than it can follow (about a thousand levels), so a malformed file of
``[[[[…]]]]`` got past every reader's "not JSON" handling as a traceback.

It also reads ``"\\ud800"`` -- a lone surrogate escape -- into a string that no UTF-8 encoder
writes and no tokenizer takes; argv bytes that are not UTF-8 arrive as such surrogates too
(``surrogateescape``). :func:`without_lone_surrogates` makes such text usable.
"""

from __future__ import annotations

import json
import re
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


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: What a lone surrogate becomes: the Unicode replacement character, as a UTF-8 decoder's "replace" gives.
REPLACEMENT_CHARACTER = "\ufffd"


def without_lone_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a str never holds a valid pair: JSON
    and UTF-8 decoders join those into one character)."""
    return _LONE_SURROGATE.sub(REPLACEMENT_CHARACTER, text)
