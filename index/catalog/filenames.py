"""Server names as file names (logs, work dirs): safe on every file system, distinct names distinct."""

from __future__ import annotations

import hashlib
import re


def safe_file_name(name: str) -> str:
    """``name`` as one path component: unchanged when it is already safe, else cleaned and suffixed
    with a short hash of the original (``a b`` and ``a_b`` must not share a log or a work dir)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    if cleaned == name:
        return name
    return f"{cleaned or 'server'}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
