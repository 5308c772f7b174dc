"""Directories for Unix sockets whose paths stay short wherever the tests run.

A Unix socket's path is bounded (107 bytes on Linux), and pytest's temporary directories sit
under ``$TMPDIR`` plus ~50 characters of their own: with a ``TMPDIR`` of 60 characters or more,
every test that listened on a socket there failed with "AF_UNIX path too long".
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: Where the short directories go: /tmp when it can be written (its path is short whatever TMPDIR says).
_SHORT_ROOT = "/tmp" if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK) else None


class SocketDirs:
    """Makes fresh directories under one short base directory (the ``socket_dirs`` fixture's)."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def mktemp(self, prefix: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.base))


def short_base_dir() -> Path:
    """A new private directory with a short path (the caller removes it)."""
    return Path(tempfile.mkdtemp(prefix="mcpc-", dir=_SHORT_ROOT))
