"""An agent's log of bounded size: unchanged under the cap, its head and tail with a note above it;
fed from a pipe that a real process floods (as the built-in agent's copilot's stderr is)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import anyio
import anyio.abc
import pytest

from evaluation.run.agents.bounded_log import BoundedLog, LogCut, cut_note, piped_into


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


# -- a pipe for a process the runner does not start (the built-in agent's copilot) ---------------------
FLOOD = 5_000_000


async def _run(command: str, stderr: object) -> anyio.abc.Process:
    """``command`` under ``/bin/sh`` with ``stderr``, to its exit (bounded)."""
    process = await anyio.open_process(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stderr=stderr)
    with anyio.fail_after(60):
        await process.wait()
    return process


async def test_a_process_flooding_a_pipe_keeps_its_head_and_tail(tmp_path: Path) -> None:
    path = tmp_path / "copilot.stderr.log"
    log = BoundedLog(path, "stderr", 65_536, writer="the copilot")
    with anyio.fail_after(60):
        async with piped_into(log) as pipe:
            flood = f"echo start >&2; head -c {FLOOD} /dev/zero | tr '\\0' y >&2; echo >&2; echo end >&2"
            process = await _run(flood, pipe)
            await process.aclose()
    cut = log.close()
    written = len(b"start\n") + FLOOD + len(b"\nend\n")
    assert cut == LogCut(written=written, head=32_768, tail=32_768, cut=written - 65_536)
    data = path.read_bytes()
    note = cut_note("stderr", cut, 65_536, "the copilot").encode()
    assert data == b"start\n" + b"y" * (32_768 - 6) + note + b"y" * (32_768 - 5) + b"\nend\n"
    assert f"{written - 65_536:,} of the {written:,} bytes the copilot wrote to stderr were cut here".encode() in note


async def test_a_process_left_holding_the_pipe_delays_its_end_only_so_long(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A process the copilot started that keeps its stderr (and never exits) must not keep the task
    waiting: the pipe is read for ``drain_seconds`` after the copilot is gone, no more."""
    path = tmp_path / "copilot.stderr.log"
    log = BoundedLog(path, "stderr", 65_536, writer="the copilot")
    holder = None
    try:
        with anyio.fail_after(60):
            async with piped_into(log, drain_seconds=1.0) as pipe:
                # The shell leaves a sleeper behind that holds the pipe, and prints its pid.
                process = await anyio.open_process(
                    ["/bin/sh", "-c", "echo before >&2; sleep 300 >&2 & echo $!"], stdin=subprocess.DEVNULL, stderr=pipe
                )
                async with process:
                    assert process.stdout is not None
                    holder = int((await process.stdout.receive()).decode())
                    await process.wait()
        assert log.close() is None
        assert path.read_bytes() == b"before\n"
        assert "a process it started still holds it open" in caplog.text
    finally:
        if holder is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(holder, signal.SIGKILL)
