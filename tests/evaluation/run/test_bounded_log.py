"""An agent's log of bounded size: unchanged under the cap, its head and tail with a note above it."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.run.bounded_log import BoundedLog, LogCut, cut_note


def written(path: Path, chunks: list[bytes], cap: int) -> tuple[bytes, LogCut | None]:
    log = BoundedLog(path, "stdout", cap)
    for chunk in chunks:
        log.write(chunk)
    cut = log.close()
    return path.read_bytes(), cut


def test_a_stream_under_the_cap_is_kept_unchanged(tmp_path: Path) -> None:
    data, cut = written(tmp_path / "log", [b"a" * 600, b"b" * 424], cap=1024)  # exactly the cap
    assert data == b"a" * 600 + b"b" * 424 and cut is None


def pieces(stream: bytes, sizes: list[int]) -> list[bytes]:
    """``stream`` in chunks of ``sizes`` (the last size repeats until the end)."""
    chunks, start = [], 0
    while start < len(stream):
        size = sizes[min(len(chunks), len(sizes) - 1)]
        chunks.append(stream[start : start + size])
        start += size
    return chunks


# One byte at a time; small chunks; chunks that pass the head, then the cap; one chunk over it all;
# a chunk that passes the cap while the head is only partly written.
@pytest.mark.parametrize("sizes", [[1], [7], [100], [700], [5000], [300, 4700]])
def test_a_stream_over_the_cap_keeps_its_head_and_tail_around_a_note(tmp_path: Path, sizes: list[int]) -> None:
    stream = bytes(i % 251 for i in range(5000))  # every position tells which byte it is
    data, cut = written(tmp_path / "log", pieces(stream, sizes), cap=1000)
    assert cut == LogCut(written=5000, head=500, tail=500, cut=4000)
    note = cut_note("stdout", cut, 1000).encode()
    assert data == stream[:500] + note + stream[-500:]
    assert b"4,000 of the 5,000 bytes the agent wrote to stdout were cut here" in note


def test_the_file_holds_the_head_while_the_stream_still_flows(tmp_path: Path) -> None:
    # What a reader sees while the agent runs: everything up to the cap, then the head only.
    log = BoundedLog(tmp_path / "log", "stderr", 1000)
    log.write(b"s" * 900)
    assert (tmp_path / "log").read_bytes() == b"s" * 900
    log.write(b"t" * 200)  # past the cap: the file is cut back to its head
    assert (tmp_path / "log").read_bytes() == b"s" * 500
    assert log.close() == LogCut(written=1100, head=500, tail=500, cut=100)
    assert (tmp_path / "log").read_bytes().endswith(b"s" * 300 + b"t" * 200)
