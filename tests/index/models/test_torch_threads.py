"""The threads of a forward pass: the free cores, at least one, at most torch's own number."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from index.models import torch_threads
from index.models.torch_threads import other_running_threads, threads_for


@pytest.mark.parametrize(
    ("own", "cores", "others", "expected"),
    [
        (2, 2, 0, 2),  # idle: torch's own number
        (2, 2, 1, 1),  # one busy neighbour on two cores
        (2, 2, 7, 1),
        (4, 4, 1, 3),  # the cores left
        (2, 8, 0, 2),  # never more than torch's own number
        (2, 2, None, 1),  # unknown: one
    ],
)
def test_threads_for_the_free_cores(own: int, cores: int, others: int | None, expected: int) -> None:
    assert threads_for(own, cores, others) == expected


def test_the_baselines_ignore_the_machine() -> None:
    assert threads_for(3, 4, 3, "own") == 3 and threads_for(3, 4, 0, "one") == 1


def test_running_threads_are_read_from_loadavg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(torch_threads, "_LOADAVG", str(loadavg))
    loadavg.write_text("0.31 0.42 0.50 3/123 4567\n")
    assert other_running_threads() == 2
    loadavg.write_text("0.31 0.42 0.50 0/123 4567\n")  # never below none
    assert other_running_threads() == 0
    for garbage in ("", "0.31 0.42\n", "a b c x/y z\n"):
        loadavg.write_text(garbage)
        assert other_running_threads() is None, garbage
    loadavg.unlink()
    assert other_running_threads() is None


def test_this_process_s_own_running_threads_are_not_counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """torch's workers of the last pass spin a moment before they sleep: counted as others, they
    made back-to-back passes on an idle machine take one thread every other time."""
    loadavg, tasks = tmp_path / "loadavg", tmp_path / "task"
    monkeypatch.setattr(torch_threads, "_LOADAVG", str(loadavg))
    monkeypatch.setattr(torch_threads, "_OWN_TASKS", str(tasks))
    states = {"100": "(python) R", "101": "(pt_main) S", "102": "(a) R (b)) R", "103": "(omp worker) R", "104": "(x) D"}
    for task, named_state in states.items():
        (tasks / task).mkdir(parents=True)
        (tasks / task / "stat").write_text(f"{task} {named_state} 1 100 100 0 -1\n")
    loadavg.write_text("2.00 1.00 0.50 5/300 4567\n")
    assert other_running_threads() == 5 - 3  # 100, 102 (its name holds ") R") and 103 are running
    loadavg.write_text("2.00 1.00 0.50 2/300 4567\n")
    assert other_running_threads() == 0  # no fewer than none, and counting stops at the machine's 2
    (tasks / "105").mkdir()  # a thread that ended while the list was read: no stat any more
    loadavg.write_text("2.00 1.00 0.50 4/300 4567\n")
    assert other_running_threads() == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/loadavg is Linux's")
def test_this_machines_count_is_read() -> None:
    others = other_running_threads()
    assert others is not None and others >= 0
    assert torch_threads._own_running_threads(10_000) >= 1  # the caller, at least
