"""The trajectory writer: one JSON line per event, readable back, whatever text a caller sent."""

from __future__ import annotations

from pathlib import Path

from server.trajectory.records import ExecuteEvent, SessionEnd, SessionStart, TrajectoryWriter, parse_event


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
