"""Server names as file names (logs, work dirs): safe on every file system, distinct names distinct."""

from __future__ import annotations

import hashlib
import re

#: Characters kept of a name cut short: with the hash and ``.log`` well inside the 255 bytes most
#: file systems allow per path component (a 300-character name failed the crawl with ENAMETOOLONG).
MAX_KEPT_CHARS = 80


def safe_file_name(name: str) -> str:
    """``name`` as one path component: unchanged when it is already safe and short, else cleaned,
    cut to :data:`MAX_KEPT_CHARS` and suffixed with a short hash of the original (``a b`` and ``a_b``,
    or two long names alike in their first 80 characters, must not share a log or a work dir)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    if cleaned == name and len(name) <= MAX_KEPT_CHARS:
        return name
    # surrogatepass: a lone surrogate (JSON's "\ud800") has no UTF-8 form, but still names one server.
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[:MAX_KEPT_CHARS].rstrip('._') or 'server'}-{digest}"
