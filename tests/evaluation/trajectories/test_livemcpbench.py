"""Reading LiveMCPBench's published trajectory files (``evaluation/trajectories/livemcpbench.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.trajectories import load_trajectories
from tests.evaluation.judge_helpers import SAMPLE_TRAJECTORIES, livemcpbench_entry

pytestmark = pytest.mark.timeout(30)


def test_livemcpbench_file_is_read_with_routes_calls_and_aliases(tmp_path: Path) -> None:
    entries = [
        livemcpbench_entry("a", "Where is X?", "travel", route_hits=[("maps", "search"), ("maps", "geocode")]),
        livemcpbench_entry("b", "Play Y", "entertainment", tool_output="Tool call timed out."),
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(entries))
    result = load_trajectories([path])
    a, b = result.trajectories["a"], result.trajectories["b"]
    assert a.format == "livemcpbench" and a.category == "Travel" and b.category == "Leisure"
    assert a.route_calls[0].hits == [("maps", "search"), ("maps", "geocode")]
    assert a.execute_calls[0].server == "maps" and a.execute_calls[0].params == {"q": "x"}
    assert a.final_answer == "Here is the answer."
    assert a.turns == 3 and a.steps == ["find it"] and a.gold_tools == ["geocode"]
    assert b.execute_calls[0].is_error and b.execute_calls[0].error_kind == "timeout"


def test_a_task_list_passed_as_trajectories_is_explained(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([{"task_id": "a", "Question": "q"}]))
    result = load_trajectories([path])
    assert not result.trajectories
    assert "pass it with --tasks" in result.problems[0].message


def test_a_task_twice_keeps_the_later_entry_and_says_so(tmp_path: Path) -> None:
    first = livemcpbench_entry("a", "Where is X?", "travel")
    second = livemcpbench_entry("a", "Where is X?", "travel")
    second["messages"][-1]["content"] = "A later answer."
    path = tmp_path / "run.json"
    path.write_text(json.dumps([first, livemcpbench_entry("b", "Play Y", "entertainment"), second]))
    other = tmp_path / "other.json"
    other.write_text(json.dumps([livemcpbench_entry("b", "Play Y", "entertainment")]))
    result = load_trajectories([path, other])
    assert result.trajectories["a"].final_answer == "A later answer."
    assert [(p.kind, p.entry) for p in result.problems] == [("duplicate_task", 1), ("duplicate_task", None)]
    assert str(result.problems[0]) == f"{path}: entry 1: task_id 'a' again at entry 3; this earlier entry is skipped (the later one is judged)"
    assert str(other) in result.problems[1].message


def test_broken_json_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text('[\n{"task_id": "a",\n oops}\n]')
    problem = load_trajectories([path]).problems[0]
    assert problem.kind == "malformed_line" and problem.line == 3


@pytest.mark.skipif(
    not SAMPLE_TRAJECTORIES.is_file(), reason=f"LiveMCPBench sample not present at {SAMPLE_TRAJECTORIES}"
)
def test_real_livemcpbench_sample() -> None:
    result = load_trajectories([SAMPLE_TRAJECTORIES])
    assert result.problems == []
    by_category = {t.category for t in result.trajectories.values()}
    assert by_category == {"Finance", "Travel", "Leisure"}
    audio = next(t for t in result.trajectories.values() if t.category == "Leisure")
    assert sum(1 for call in audio.execute_calls if call.error_kind == "timeout") == 5
    finance = next(t for t in result.trajectories.values() if t.category == "Finance")
    assert finance.route_calls[0].hits[0] == ("yahoo-finance", "get_historical_stock_prices")


def test_a_file_saved_with_a_bom_is_read(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([livemcpbench_entry("a", "Where is X?")]).encode())
    result = load_trajectories([path])
    assert result.problems == [] and result.trajectories["a"].question == "Where is X?"
