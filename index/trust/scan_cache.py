"""Remembered poisoning-scan results, so ``index build`` does not rescan an unchanged catalog.

Scanning every definition of a 500-tool catalog takes over a second, and every build screens
the whole catalog. A scan's findings depend only on the definition (its pin hash), on the
:class:`~index.trust.scan.ScanContext` (the other tools it may shadow) and on the scanner
itself, so they are kept in ``COPILOT_HOME/index/trust-scan-cache.json`` under
``definition hash:context digest``, with a digest of the scanner (the source of its modules, the Unicode
data and the confusables table it uses) for the whole file: a changed scanner rescans
everything. The file is replaced atomically; one that cannot be read is ignored with a
warning and rebuilt, never an error (it holds nothing that cannot be computed again).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from index.json_text import parse_json
from index.storage.atomic import write_atomic
from index.catalog.records import ToolRecord
from index.trust import scan as scan_module
from index.trust.scan import Finding, ScanContext, scan_tool

logger = logging.getLogger(__name__)

CACHE_VERSION = 1
FILE_NAME = "trust-scan-cache.json"

#: Entries kept: this run's first, then older ones (another catalog built from the same home).
MAX_ENTRIES = 20_000


def scanner_sources() -> list[Path]:
    """Every module of the scanner package, in a fixed order: a rule changed in any of them counts."""
    return sorted(Path(scan_module.__file__).parent.glob("*.py"), key=lambda path: path.name)


@lru_cache(maxsize=1)
def scanner_digest() -> str:
    """Changes whenever the scan could give another answer for the same definition."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        confusables = version("confusable_homoglyphs")
    except PackageNotFoundError:
        confusables = "absent"
    parts = [
        *(f"{path.name}\n".encode() + path.read_bytes() for path in scanner_sources()),
        f"{unicodedata.unidata_version}|{confusables}|{sys.version_info[:2]}|{CACHE_VERSION}".encode(),
    ]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:32]


class ScanCache:
    """``scan_tool`` with its results remembered in one JSON file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._entries: dict[str, list[dict[str, Any]]] | None = None
        self._used: set[str] = set()
        self._dirty = False

    @classmethod
    def in_home(cls, home: Path) -> ScanCache:
        return cls(home / "index" / FILE_NAME)

    def scan(self, record: ToolRecord, context: ScanContext, definition_hash: str) -> list[Finding]:
        """The findings of ``scan_tool(record, context)``; ``definition_hash`` is the record's pin hash."""
        key = f"{definition_hash}:{context.digest}"
        with self._lock:
            entries = self._load()
            stored = entries.get(key)
            if stored is not None:
                try:
                    findings = [Finding.model_validate(item) for item in stored]
                except ValidationError:
                    stored = None  # a hand-edited entry: scan again
                else:
                    self.hits += 1
                    self._used.add(key)
                    return findings
        findings = scan_tool(record, context)
        with self._lock:
            self.misses += 1
            entries[key] = [finding.model_dump(mode="json") for finding in findings]
            self._used.add(key)
            self._dirty = True
        return findings

    def save(self) -> None:
        """Write the file when something was scanned; a failure is logged (the cache is optional)."""
        with self._lock:
            if not self._dirty or self._entries is None:
                return
            kept = {key: self._entries[key] for key in self._entries if key in self._used}
            for key, findings in self._entries.items():
                if len(kept) >= MAX_ENTRIES:
                    break
                kept.setdefault(key, findings)
            document = {"version": CACHE_VERSION, "scanner": scanner_digest(), "entries": kept}
            try:
                write_atomic(self.path, json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n")
            except OSError as error:
                logger.warning("cannot write the trust-scan cache %s (%s); the next build scans again", self.path, error)
                return
            self._dirty = False

    def _load(self) -> dict[str, list[dict[str, Any]]]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> dict[str, list[dict[str, Any]]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as error:
            return self._unreadable(f"cannot read it: {error}")
        try:
            document = parse_json(text)
        except json.JSONDecodeError as error:
            return self._unreadable(f"not JSON: line {error.lineno}: {error.msg}")
        entries = document.get("entries") if isinstance(document, dict) else None
        if not isinstance(entries, dict) or not all(isinstance(value, list) for value in entries.values()):
            return self._unreadable("not a scan cache")
        if document.get("version") != CACHE_VERSION or document.get("scanner") != scanner_digest():
            logger.debug("the scanner changed since %s was written: rescanning every definition", self.path)
            self._dirty = True
            return {}
        return entries

    def _unreadable(self, reason: str) -> dict[str, list[dict[str, Any]]]:
        logger.warning("ignoring the trust-scan cache %s (%s); it is rebuilt by this run", self.path, reason)
        self._dirty = True
        return {}
