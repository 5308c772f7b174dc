"""Showing text a child server supplied (tool names, descriptions) to people on a terminal.

A hostile server can put terminal control sequences in its tool names and descriptions: ESC
sequences that recolour, move the cursor or retitle the window, carriage returns and newlines that
overwrite or fake lines of our output. Such characters are shown as escapes (``\\x1b``), never sent.
"""

from __future__ import annotations

import re
import shlex

# C0 controls, DEL, C1 controls (0x9b is a one-byte CSI on some terminals), the Unicode line and
# paragraph separators (line breaks on some terminals), the bidi overrides that reorder what is seen,
# and lone surrogates (a JSON "\\ud800", an argv byte that is not UTF-8): no UTF-8 stream can write
# them, so printing one raised UnicodeEncodeError and cut the output off mid-way.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: The surrogates Python's ``surrogateescape`` makes of the bytes 0x80-0xff that are not UTF-8 (argv, file names).
_ESCAPED_BYTES = range(0xDC80, 0xDD00)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}  # as repr() writes them


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def printable(text: str) -> str:
    """``text`` with every control character (and lone surrogate) written as a visible escape (``\\x1b``,
    ``\\n``, ``\\ud800``), as repr() would: safe to write to any terminal or UTF-8 stream."""
    return _CONTROLS.sub(_escaped, text)


def shell_word(text: str) -> str:
    """``text`` as one word for a shell command people copy: ``shlex.quote`` when it is plain; with
    control characters, bash's ``$'...'`` quoting, which shows them as escapes and still gives the
    shell the exact text (a tool id pasted from ``approve with:`` must match the real one)."""
    if not _CONTROLS.search(text):
        return shlex.quote(text)
    quoted = text.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _CONTROLS.sub(_bash_escaped, quoted) + "'"


def _bash_escaped(match: re.Match[str]) -> str:
    # $'\x9b' would be the byte 0x9b, not the character U+009B (UTF-8 c2 9b): C1 controls as \u.
    code = ord(match.group())
    if code in _ESCAPED_BYTES:  # the byte it stands for: Python reads that argument back as this very text
        return f"\\x{code - 0xDC00:02x}"
    return _NAMED.get(match.group()) or (f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}")


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 tool``, ``2 tools`` (``plural`` for nouns that do not just take an s)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
