"""The trajectory writer: one JSON line per event, readable back, whatever text a caller sent."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from server.settings import ServerSettings
from server.trajectory.records import ExecuteEvent, SessionEnd, SessionStart, TrajectoryWriter, parse_event
from server.trajectory.session_log import SessionLogs


def _lines(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8").splitlines()


def test_each_event_is_one_line_read_back_as_written(tmp_path: Path) -> None:
    writer = TrajectoryWriter(tmp_path / "logs" / "session.jsonl")
    event = ExecuteEvent(call_id="c-1", server="notes", tool="lire_ünïcode", params={"q": "東京"}, latency_ms=1.5)
    writer.write(event)
    writer.write(SessionEnd(reason="closed"))
    lines = _lines(writer.path)
    assert len(lines) == 2
    assert "東京" in lines[0]  # text kept as it is, not escaped
    read = parse_event(lines[0])
    assert read.model_dump() == event.model_dump()
    assert "error" not in lines[0]  # unset fields are left out
    assert parse_event(lines[1]).event == "session_end"


def test_text_without_a_utf8_form_is_replaced_not_lost(tmp_path: Path) -> None:
    writer = TrajectoryWriter(tmp_path / "session.jsonl")
    writer.write(ExecuteEvent(call_id="c-1", server="s", tool="t", params={"q": "a\ud800b"}, latency_ms=float("nan")))
    writer.write(ExecuteEvent(call_id="c-2", server="s", tool="t", latency_ms=2.0))
    lines = _lines(writer.path)
    first, second = (parse_event(line) for line in lines)
    assert first.params == {"q": "a?b"}
    assert '"call_id":"c-1"' in lines[0] and '"call_id":"c-2"' in lines[1]  # one format for every line
    assert second.call_id == "c-2"


def test_a_closed_writer_appends_nothing_and_writers_share_a_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    one, two = TrajectoryWriter(path), TrajectoryWriter(path)
    one.write(SessionEnd(reason="first"))
    two.write(SessionEnd(reason="second"))
    one.close()
    one.write(SessionEnd(reason="after close"))
    assert [parse_event(line).reason for line in _lines(path)] == ["first", "second"]


def test_session_start_names_the_transport_session_only_when_there_is_one(tmp_path: Path) -> None:
    writer = TrajectoryWriter(tmp_path / "session.jsonl")
    writer.write(SessionStart(session_id="a" * 32, transport_session_id="6e1bdb1c3dd34d5ba2c1c00ca775f65c"))
    writer.write(SessionStart(session_id="b" * 32))  # stdio, or a log written before the field existed
    http, stdio = (parse_event(line) for line in _lines(writer.path))
    assert http.transport_session_id == "6e1bdb1c3dd34d5ba2c1c00ca775f65c"
    assert stdio.transport_session_id is None
    assert "transport_session_id" not in _lines(writer.path)[1]


_CUT_SHORT = """
import resource, signal, sys
from server.trajectory.records import SessionEnd, TrajectoryWriter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG), as on a full disk
path, limit = sys.argv[1], int(sys.argv[2])
writer = TrajectoryWriter(path)
writer.write(SessionEnd(reason="first"))
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
try:
    writer.write(SessionEnd(reason="cut short " + "x" * 200))
except OSError as error:
    print("failed:", error.strerror)
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space again
writer.write(SessionEnd(reason="third"))
"""


def test_a_write_cut_short_by_a_full_disk_leaves_no_half_line(tmp_path: Path) -> None:
    """The half of the event that fit stayed, and the next event was appended to it: two events
    lost in one unreadable line, and the log said one."""
    path = tmp_path / "session.jsonl"
    first_line = len(SessionEnd(reason="first").model_dump_json(exclude_none=True)) + 1
    ran = subprocess.run(
        [sys.executable, "-c", _CUT_SHORT, str(path), str(first_line + 40)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[3], check=False,
    )
    assert ran.returncode == 0 and ran.stdout.startswith("failed:"), ran.stdout + ran.stderr
    assert [parse_event(line).reason for line in _lines(path)] == ["first", "third"]


def test_trajectories_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """They hold tool arguments and results: umask 000 made them 0666 in a 0777 directory."""
    previous = os.umask(0)
    try:
        writer = TrajectoryWriter(tmp_path / "logs" / "session.jsonl")
        writer.write(SessionEnd(reason="done"))
    finally:
        os.umask(previous)
    assert stat.S_IMODE(writer.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(writer.path.parent.stat().st_mode) == 0o700


def test_a_log_directory_gone_after_start_up_costs_events_not_requests(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Opening a session's log where the directory is now a file raised on every request (a
    traceback each time, the session never stored); now its events are counted as lost, once."""
    logs_dir = tmp_path / "logs"
    logs_dir.write_text("not a directory")
    logs = SessionLogs(ServerSettings(home=tmp_path, log_dir=logs_dir), copilot_version="test", index_info=lambda: None)
    with caplog.at_level("WARNING"):
        log = logs.open("s", None)
        assert logs.open("s", None) is log
        log.route("c-1", "q", [], 1.0)
        logs.end_all("client disconnected")
    assert caplog.text.count("could not write to trajectory log") == 1 and "Traceback" not in caplog.text
    assert "ended unwritable; 3 event(s) were lost, session_end included" in caplog.text


def test_taking_back_a_cut_write_leaves_another_writers_line_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writers in several processes may share a file (COPILOT_LOG_FILE). When one appended a line
    between our short write and its failure, cutting "our" bytes off the end cut theirs instead,
    and our next event went on the broken line. (A disk that fills between two writes of one
    line, and another process's append in between, cannot be arranged here: os.write stands in.)"""
    path = tmp_path / "shared.jsonl"
    ours, theirs = TrajectoryWriter(path), TrajectoryWriter(path)
    real_write = os.write
    calls = []

    def filling_disk(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:  # half of our line fits
            return real_write(fd, bytes(data[: len(data) // 2]))
        if len(calls) == 2:  # meanwhile the other process appends a whole line; then the disk is full
            monkeypatch.setattr(os, "write", real_write)
            theirs.write(SessionEnd(reason="theirs"))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", filling_disk)
    with pytest.raises(OSError):
        ours.write(SessionEnd(reason="ours, cut short"))
    ours.write(SessionEnd(reason="ours, next"))
    text = path.read_text(encoding="utf-8")
    assert '"event":"session_end","reason":"theirs"}\n' in text  # their bytes are all there
    assert parse_event(text.splitlines()[-1]).reason == "ours, next"  # on a line of its own
