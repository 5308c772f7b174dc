"""The one place command-line output for people is configured (used by every CLI of the project).

``make_console()`` for rich output, ``HelpFormatter`` for every argparse parser, and
``prepare_text_io()`` first thing in every command's ``main``.

On a terminal rich lays text out to the terminal's width. Anywhere else -- CI logs, files,
pipes -- lines are never hard-wrapped: a wrapped phrase cannot be grepped, and the width of a
terminal that is not there (``COLUMNS``, rich's 80-column default) must not change what a log says.
"""

from __future__ import annotations

import argparse
import codecs
import sys
from typing import IO, Any

from rich.console import Console
from rich.text import Text

from index.json_text import os_text

#: Width given to rich when the output is not a terminal: wide enough that tables never wrap cells.
UNWRAPPED_WIDTH = 100_000


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def writes_unicode(stream: IO[str]) -> bool:
    """Whether ``stream`` can write any character: its encoding is UTF-8 (or another UTF)."""
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name.startswith("utf")
    except LookupError:
        return False


def argv_text(arg: str) -> str:
    """A command-line argument as the UTF-8 text it was typed in, under a locale that is not UTF-8
    (Python read each non-ASCII byte as a lone surrogate: a query in Chinese became U+FFFD marks).
    Bytes that are not UTF-8 stay as Python read them.

    The ``type`` of every option that is text (a query, a question, names), not of paths: a path
    must stay as Python read it, the only form the file system can take back under such a locale
    (read as UTF-8, "batch-\u00e9.jsonl" could no longer be opened)."""
    text = os_text(arg)
    return arg if text is None else text


def prepare_text_io() -> None:
    """Make output for people survive a terminal or pipe that is not UTF-8. Characters stdout or
    stderr cannot encode are written as ``\\uXXXX`` escapes (a catalog's Chinese description, an
    ellipsis in ``--help`` stopped whole commands with a UnicodeEncodeError traceback under
    ``LC_ALL=C PYTHONUTF8=0`` or ``PYTHONIOENCODING=ascii``). Machine output written with
    :func:`json_ensure_ascii` stays valid JSON. Text options read themselves (:func:`argv_text`).
    Every console and help formatter calls it too, for the commands whose ``main`` does not."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        # (A C locale's stdout has errors="surrogateescape", which fails on any other character too.)
        failing = getattr(stream, "errors", "strict") in ("strict", "surrogateescape")
        if reconfigure is not None and failing and not writes_unicode(stream):
            reconfigure(errors="backslashreplace")


def json_ensure_ascii(stream: IO[str]) -> bool:
    """``ensure_ascii`` for JSON written to ``stream``: escapes where the stream cannot write all text."""
    return not writes_unicode(stream)


class _EscapingConsole(Console):
    """A console on a stream that cannot write every character: text is escaped (``\\uXXXX``, as
    :func:`prepare_text_io` has the stream do) *before* rich lays it out. Escaped only by the stream,
    a Chinese description took one column per character in the table's widths and six on the line,
    so every row after it was out of line with the header."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        encoding = self.encoding
        try:
            shown = text.encode(encoding, "backslashreplace").decode(encoding)
        except LookupError:
            shown = text
        return super().render_str(shown, **kwargs)


def make_console(*, stderr: bool = False, file: IO[str] | None = None, **kwargs: Any) -> Console:
    """A rich console on stdout (or stderr, or ``file``) that only wraps on a real terminal."""
    prepare_text_io()
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    console_class = Console if writes_unicode(stream) else _EscapingConsole
    if _is_terminal(stream):
        return console_class(file=file, stderr=stderr, **kwargs)
    kwargs.setdefault("width", UNWRAPPED_WIDTH)
    kwargs.setdefault("soft_wrap", True)
    return console_class(file=file, stderr=stderr, **kwargs)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help laid out to the terminal's width on a terminal, never wrapped anywhere else.

    argparse itself wraps at ``COLUMNS`` (or 80) even when ``--help`` goes to a pipe or a file.
    Descriptions and epilogs keep the line breaks they were written with.
    """

    def __init__(self, prog: str, **kwargs: Any) -> None:
        prepare_text_io()
        if not _is_terminal(sys.stdout):
            kwargs["width"] = UNWRAPPED_WIDTH
        super().__init__(prog, **kwargs)
