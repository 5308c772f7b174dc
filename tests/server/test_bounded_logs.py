"""What the copilot records and repeats stays bounded whatever a caller or a child sends."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from index.catalog.servers import ServerConfig
from server.bounded import cap_for_log, shown_name
from server.pool.sessions import ChildPool, PoolSettings
from server.trajectory.session_log import SessionLogs
from server.settings import ServerSettings
from server.trajectory.records import ExecuteResult, parse_event

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fixture_server.py"

pytestmark = pytest.mark.timeout(90)


def test_cap_for_log_cuts_long_strings_and_big_containers_and_says_how_much() -> None:
    value = {"text": "x" * 5000, "items": list(range(3000)), "ok": "short"}
    capped, note = cap_for_log(value, field_chars=100, total_chars=1_000_000)
    assert capped["text"].startswith("x" * 100) and "4,900 of 5,000 characters cut" in capped["text"]
    assert len(capped["items"]) == 1001 and "2,000 of 3,000 items cut" in capped["items"][-1]
    assert capped["ok"] == "short"
    assert note == "cut from the log: 4,900 characters and 2,000 entries"
    untouched, none = cap_for_log({"a": 1, "b": "y"}, field_chars=100, total_chars=1000)
    assert none is None and untouched == {"a": 1, "b": "y"}


def test_cap_for_log_bounds_the_whole_event_and_deep_nesting() -> None:
    many = {f"p{i}": "z" * 1000 for i in range(500)}  # 500,000 characters in fields under the field cap
    capped, note = cap_for_log(many, field_chars=10_000, total_chars=20_000)
    assert len(json.dumps(capped)) < 40_000 and note is not None
    deep: object = "leaf"
    for _ in range(100):
        deep = [deep]
    capped_deep, _ = cap_for_log(deep, field_chars=100, total_chars=10_000)
    assert "nested deeper than" in json.dumps(capped_deep)


def test_long_names_are_shortened_when_repeated() -> None:
    assert shown_name("time") == "time"
    shortened = shown_name("s" * 1_000_000)
    assert len(shortened) < 200 and "1,000,000 characters" in shortened


def test_trajectory_events_are_cut_to_the_log_budget(tmp_path: Path) -> None:
    log_file = tmp_path / "t.jsonl"
    settings = ServerSettings(home=tmp_path, log_file=log_file, log_max_field_chars=1000, log_max_event_chars=50_000)
    logs = SessionLogs(settings, copilot_version="test", index_info=lambda: None)
    log = logs.open("s", None)
    log.route("c-1", "q" * 1_000_000, [], 1.0)
    log.execute(
        "c-2", "srv" * 400_000, "tool", {"blob": "b" * 10_000_000}, ExecuteResult(content=[]), 1.0, error="e" * 50_000
    )
    logs.end_all("done")
    size = log_file.stat().st_size
    assert size < 60_000, size
    events = [parse_event(line) for line in log_file.read_text(encoding="utf-8").splitlines()]
    route, execute = (e for e in events if e.event in ("route", "execute"))
    assert route.query.startswith("q" * 1000) and "999,000 of 1,000,000 characters cut" in route.query
    assert "9,999,000 of 10,000,000 characters cut" in execute.params["blob"]
    assert execute.server.endswith("characters cut]")
    assert getattr(execute, "log_cut", "").startswith("cut from the log:")


def test_session_start_is_cut_to_the_log_budget_like_every_other_event(tmp_path: Path) -> None:
    # A stdio host's clientInfo of 3,000,000 characters was written whole, with no note.
    log_file = tmp_path / "t.jsonl"
    settings = ServerSettings(
        home=tmp_path, log_file=log_file, log_max_field_chars=1000, log_max_event_chars=50_000, question="Q" * 200_000
    )
    logs = SessionLogs(settings, copilot_version="test", index_info=lambda: None)
    log = logs.open("s", {"name": "n" * 3_000_000, "version": "1"})
    log.begin(None)
    logs.end_all("done")
    start = parse_event(log_file.read_text(encoding="utf-8").splitlines()[0])
    assert start.event == "session_start" and log_file.stat().st_size < 60_000
    assert start.client["name"].startswith("n" * 1000) and "2,999,000 of 3,000,000 characters cut" in start.client["name"]
    assert start.client["version"] == "1" and "199,000 of 200,000 characters cut" in start.question
    assert getattr(start, "log_cut", "").startswith("cut from the log:")


async def test_a_running_childs_stderr_log_is_rotated_by_size(tmp_path: Path) -> None:
    config = ServerConfig(name="noisy", command=sys.executable, args=[str(FIXTURE), "--name", "noisy"])
    limit = 64 * 1024
    settings = PoolSettings(home=tmp_path, shutdown_grace=0.5, child_log_max_bytes=limit)
    log_path = settings.server_log("noisy")
    with anyio.fail_after(60):
        async with ChildPool({"noisy": config}, settings) as pool:
            for round_ in range(3):
                result = await pool.call_tool("noisy", "write_stderr", {"size": 300_000, "marker": f"round-{round_}"})
                assert result.content[0].text == "logged"
                assert log_path.stat().st_size <= limit + 1024, round_
            backup = log_path.with_name(log_path.name + ".1")
            assert backup.stat().st_size <= limit
            assert b"round-2" in backup.read_bytes()  # the newest lines are kept, the oldest go
            # The child keeps logging into the emptied file (its descriptor appends).
            await pool.call_tool("noisy", "write_stderr", {"size": 0, "marker": "after-rotation"})
            assert b"after-rotation" in log_path.read_bytes()
            assert b"log rotated at" in log_path.read_bytes() + backup.read_bytes()


async def test_huge_names_are_not_echoed_back_whole(tmp_path: Path) -> None:
    from index.catalog.servers import load_servers
    from server.copilot import Copilot
    from tests.server.support.copilot_harness import copilot_settings, fixture_entry, write_servers

    servers = load_servers(write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")}))
    settings = copilot_settings(tmp_path / "home", tmp_path, auto_index=False, warm_index=False)
    async with Copilot.running(settings, servers, start_now=True) as copilot:
        with anyio.fail_after(60):
            unknown_server = await copilot.execute("s" * 1_000_000, "echo", {}, None, None, None)
            unknown_tool = await copilot.execute("alpha", "t" * 1_000_000, {}, None, None, None)
    for result in (unknown_server, unknown_tool):
        text = result.content[0].text
        assert result.is_error and len(text) < 5_000, len(text)
        assert "1,000,000 characters" in text


def test_a_third_party_line_repeated_without_end_is_logged_a_few_times_then_not() -> None:
    # The SDK's client logged a traceback for each of a child's 5,000 unreadable notifications.
    import io
    import logging

    from server.bounded import RepeatedLogLines

    stream = io.StringIO()
    logger = logging.getLogger("tests.repeated")
    logger.propagate = False
    logger.handlers[:] = [logging.StreamHandler(stream)]
    logger.addFilter(RepeatedLogLines(limit=5, with_traceback=2))
    for index in range(100):
        try:
            raise ValueError(index)
        except ValueError:
            logger.warning("Failed to validate notification: %s", "notifications/resources/updated", exc_info=True)
    logger.warning("another line")
    lines = stream.getvalue().splitlines()
    assert sum("Failed to validate notification" in line for line in lines) == 5
    assert sum(line.startswith("Traceback") for line in lines) == 2
    assert "(repeated 5 times; further such lines are not logged)" in stream.getvalue()
    assert lines[-1] == "another line"


def test_names_a_client_sent_are_shortened_in_recent_errors() -> None:
    # The status file kept 20 recent errors with the names whole: 1 MB names made a 6 MB file,
    # rewritten every 2 s and printed whole by `python -m server status`.
    from server.telemetry.hub import Telemetry  # noqa: PLC0415

    telemetry = Telemetry()
    with telemetry.call("execute") as outcome:
        outcome.server, outcome.tool = "s" * 1_000_000, "t" * 200_000
        outcome.kind, outcome.error = "unknown_server", "no such server"
    (recent,) = telemetry.recent_errors
    assert len(recent.server) < 200 and "1,000,000 characters" in recent.server
    assert len(recent.tool) < 200 and "200,000 characters" in recent.tool


def test_a_log_that_cannot_be_written_is_reported_once_and_its_losses_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # COPILOT_LOG_FILE=/dev/full (a full disk) logged a traceback to stderr for every event.
    log_file = tmp_path / "t.jsonl"
    settings = ServerSettings(home=tmp_path, log_file=log_file)
    logs = SessionLogs(settings, copilot_version="test", index_info=lambda: None)
    log = logs.open("s", None)
    log.begin(None)
    log_file.unlink()
    log_file.mkdir()  # every append now fails (IsADirectoryError), as a full disk would
    with caplog.at_level("WARNING"):
        for number in range(5):
            log.route(f"c-{number}", "q", [], 1.0)
    assert caplog.text.count("could not write to trajectory log") == 1 and "Traceback" not in caplog.text
    caplog.clear()
    log_file.rmdir()
    with caplog.at_level("WARNING"):
        log.route("c-9", "q", [], 1.0)
    assert f"trajectory log {log_file} is written again; 5 event(s) were lost" in caplog.text
    assert [parse_event(line).event for line in log_file.read_text(encoding="utf-8").splitlines()] == ["route"]


def test_empty_strings_and_containers_count_against_the_cap() -> None:
    """They cost nothing: a 1,000 x 1,000 nest of empty lists (4 MB of JSON) passed a 10,000-character cap whole."""
    nest = [[[] for _ in range(1000)] for _ in range(1000)]
    capped, note = cap_for_log(nest, field_chars=100, total_chars=10_000)
    assert note is not None and "entries" in note
    assert len(json.dumps(capped)) < 40_000
    strings, note = cap_for_log([""] * 100_000, field_chars=100, total_chars=10_000)
    assert note is not None and len(json.dumps(strings)) < 40_000
