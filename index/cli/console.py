"""The one place command-line output for people is configured (used by every CLI of the project).

``make_console()`` for rich output, ``HelpFormatter`` for every argparse parser.

On a terminal rich lays text out to the terminal's width. Anywhere else -- CI logs, files,
pipes -- lines are never hard-wrapped: a wrapped phrase cannot be grepped, and the width of a
terminal that is not there (``COLUMNS``, rich's 80-column default) must not change what a log says.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from rich.console import Console

#: Width given to rich when the output is not a terminal: wide enough that tables never wrap cells.
UNWRAPPED_WIDTH = 100_000


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def make_console(*, stderr: bool = False, file: IO[str] | None = None, **kwargs: Any) -> Console:
    """A rich console on stdout (or stderr, or ``file``) that only wraps on a real terminal."""
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    if _is_terminal(stream):
        return Console(file=file, stderr=stderr, **kwargs)
    kwargs.setdefault("width", UNWRAPPED_WIDTH)
    kwargs.setdefault("soft_wrap", True)
    return Console(file=file, stderr=stderr, **kwargs)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help laid out to the terminal's width on a terminal, never wrapped anywhere else.

    argparse itself wraps at ``COLUMNS`` (or 80) even when ``--help`` goes to a pipe or a file.
    Descriptions and epilogs keep the line breaks they were written with.
    """

    def __init__(self, prog: str, **kwargs: Any) -> None:
        if not _is_terminal(sys.stdout):
            kwargs["width"] = UNWRAPPED_WIDTH
        super().__init__(prog, **kwargs)
