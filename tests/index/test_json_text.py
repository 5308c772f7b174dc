"""JSON from outside nested deeper than Python's reader follows is malformed input like any other
(``index.json_text``), and every reader of files, settings and messages reports it as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.tasks import load_tasks
from evaluation.trajectories import load_trajectories
from index.catalog.servers import load_servers
from index.errors import CopilotError
from index.json_text import NestedTooDeepError, parse_json, parse_json_object
from tests.evaluation.judge_helpers import write_copilot_log
from tests.support.cli import run_cli

pytestmark = pytest.mark.timeout(120)

DEEP = "[" * 100_000 + "]" * 100_000
TOO_DEEP = "nested too deeply"


def test_deep_json_is_a_decode_error_and_the_rest_parses_as_before() -> None:
    with pytest.raises(NestedTooDeepError) as raised:
        parse_json(DEEP)
    assert isinstance(raised.value, json.JSONDecodeError) and isinstance(raised.value, ValueError)
    assert TOO_DEEP in str(raised.value)
    with pytest.raises(NestedTooDeepError):
        parse_json(DEEP.encode())
    assert parse_json('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}
    assert parse_json(b"[[[[1]]]]") == [[[[1]]]]
    with pytest.raises(json.JSONDecodeError):
        parse_json("{not json")


def test_an_object_or_none_for_readers_that_take_anything_else_as_text() -> None:
    assert parse_json_object('{"server": "maps", "tool": "geocode"}') == {"server": "maps", "tool": "geocode"}
    for not_an_object in ("[1, 2]", '"text"', "3", "null", "{not json", DEEP, "1" * 5000, ""):
        assert parse_json_object(not_an_object) is None, not_an_object[:20]


def test_a_string_cut_short_is_reported_whole_with_where_it_starts(tmp_path: Path) -> None:
    # Python keeps this one message's position out of ``msg``: every reader showed
    # "(Unterminated string starting at)", cut off, as in a catalog a kill left half written.
    with pytest.raises(json.JSONDecodeError) as raised:
        parse_json('{"tools": [\n  {"name": "ab')
    assert raised.value.msg == "Unterminated string (it starts at line 2 column 12)"
    from index.catalog.records import CatalogError, load_catalog  # noqa: PLC0415

    catalog = tmp_path / "catalog.json"
    catalog.write_text('{"tools": [\n  {"name": "ab', encoding="utf-8")
    with pytest.raises(CatalogError) as bad:
        load_catalog(catalog)
    assert str(bad.value).startswith(f"{catalog}:2: catalog is not valid JSON (Unterminated string (it starts at line 2 column 12)).")
    assert f"crawl --out {catalog}" in str(bad.value)


def test_a_deep_log_line_or_trajectory_file_is_a_reported_problem_and_the_rest_is_read(tmp_path: Path) -> None:
    write_copilot_log(tmp_path / "t1.jsonl", "t1", "What time is it?")
    (tmp_path / "t2.jsonl").write_text(DEEP + "\n", encoding="utf-8")
    (tmp_path / "published.json").write_text(DEEP, encoding="utf-8")
    result = load_trajectories([tmp_path, tmp_path / "published.json"])
    assert set(result.trajectories) == {"t1"}
    messages = [problem.message for problem in result.problems]
    assert any("t2.jsonl" in (problem.file or "") for problem in result.problems), messages
    assert any(TOO_DEEP in message for message in messages), messages


def test_a_deep_servers_file_or_task_list_is_one_clear_error(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text('{"mcpServers": ' + DEEP + "}", encoding="utf-8")
    with pytest.raises(CopilotError, match=TOO_DEEP):
        load_servers(servers)
    tasks = tmp_path / "tasks.json"
    tasks.write_text(DEEP, encoding="utf-8")
    with pytest.raises(CopilotError, match=TOO_DEEP):
        load_tasks(tasks)


def test_the_judge_says_so_instead_of_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "deep.jsonl").write_text(DEEP + "\n", encoding="utf-8")
    result = run_cli("evaluation.judge", "--model", "m", "--base-url", "http://127.0.0.1:9", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: no trajectories found") and "deep.jsonl:1" in result.stderr


def test_a_number_too_long_for_python_is_a_decode_error_at_it_in_every_reader(tmp_path: Path) -> None:
    # Python refuses integers of more than 4,300 digits with a plain ValueError: a traceback from
    # the servers file, the catalog and the LiveMCPBench import alike.
    long_number = "7" * 5001
    with pytest.raises(json.JSONDecodeError) as raised:
        parse_json('{\n  "a": ' + long_number + "}")
    assert raised.value.msg == "a number too long to read (5,001 digits; at most 4,300)"
    assert (raised.value.lineno, raised.value.colno) == (2, 8)
    with pytest.raises(UnicodeDecodeError):
        parse_json(b'"\xff"')  # other ValueErrors are what they were
    servers = tmp_path / "servers.json"
    servers.write_text('{"mcpServers": {"a": {"command": "x", "timeout": ' + long_number + "}}}", encoding="utf-8")
    with pytest.raises(CopilotError, match=r"servers.json:1:\d+: not valid JSON \(a number too long to read"):
        load_servers(servers)
    catalog = tmp_path / "catalog.json"
    catalog.write_text('{"tools": [' + long_number + "]}", encoding="utf-8")
    built = run_cli("index", "build", "--catalog", str(catalog), env={"COPILOT_HOME": str(tmp_path / "home")})
    assert built.returncode == 2 and "Traceback" not in built.stderr, built.stderr
    assert "a number too long to read (5,001 digits; at most 4,300)" in built.stderr
