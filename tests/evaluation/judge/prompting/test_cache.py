"""The judge's reply cache (evaluation.judge.prompting.cache) when its disk fails it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.judge.prompting.cache import CachedCompletion, CompletionCache

REPO = Path(__file__).resolve().parents[4]

_FULL_DISK = """
import json, logging, resource, signal, sys
from pathlib import Path
from evaluation.judge.prompting.cache import CachedCompletion, CompletionCache
logging.basicConfig(level=logging.WARNING, format="%(message)s")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG), as on a full disk
directory = Path(sys.argv[1])
cache = CompletionCache(directory)
resource.setrlimit(resource.RLIMIT_FSIZE, (10, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
for key in ("aa01", "aa02", "bb03"):
    cache.put(key, CachedCompletion(model="judge", text="Status: success " * 20))
print(json.dumps(sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())))
"""


def test_entries_a_full_disk_refuses_leave_no_temporary_files_and_one_warning(tmp_path: Path) -> None:
    """Each failed entry left its partly written temporary file behind (on a disk already full),
    with a warning of its own."""
    ran = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(tmp_path / "cache")],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == []
    assert ran.stderr.count("cannot write judge cache entry") == 1, ran.stderr
    assert "File too large" in ran.stderr


def test_a_cache_that_cannot_be_read_is_reported_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    not_a_directory = tmp_path / "cache"
    not_a_directory.write_text("")
    cache = CompletionCache(not_a_directory)
    with caplog.at_level("WARNING"):
        assert [cache.get(key) for key in ("aa01", "aa02", "bb03")] == [None, None, None]
    assert caplog.text.count("cannot read judge cache entry") == 1 and cache.misses == 3


def test_an_entry_is_read_back_as_written(tmp_path: Path) -> None:
    cache = CompletionCache(tmp_path / "cache")
    entry = CachedCompletion(model="judge", text="Status: success", input_tokens=3, latency_ms=1.5)
    cache.put("cd04", entry)
    assert cache.get("cd04") == entry and cache.hits == 1
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == ["cd04.json"]
