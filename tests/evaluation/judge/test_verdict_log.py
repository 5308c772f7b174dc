"""``verdicts.jsonl``: appending after a damaged or unterminated last line."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.judge.verdict_log import VerdictLog, VerdictRecord


def _record(task_id: str) -> VerdictRecord:
    return VerdictRecord(
        task_id=task_id, category="Office", verdict="success", judge_model="judge-a", prompt="p", prompt_hash="h",
        config_hash="c", trajectory_hash="t",
    )


def _write(path: Path, *task_ids: str) -> None:
    log = VerdictLog(path)
    for task_id in task_ids:
        log.append(_record(task_id))
    log.close()


@pytest.mark.parametrize(
    ("cut", "kept"),
    [
        (1, ["t1", "t2", "t3"]),  # only the final newline is gone (an editor that strips it)
        (40, ["t1", "t3"]),  # the last verdict was cut mid-write (SIGKILL, a full disk): judged again
    ],
)
def test_a_verdict_appended_after_an_unterminated_last_line_starts_its_own_line(
    tmp_path: Path, cut: int, kept: list[str]
) -> None:
    # Before: the new verdict was glued onto the last line, and both were skipped as unreadable:
    # the tasks silently left the rate on every rerun.
    path = tmp_path / "verdicts.jsonl"
    _write(path, "t1", "t2")
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    _write(path, "t3")
    assert [record.task_id for record in VerdictLog(path).read()] == kept
    assert path.read_bytes().endswith(b"\n")


def test_a_log_that_ends_with_a_newline_or_is_empty_gets_no_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.jsonl"
    path.write_bytes(b"")
    _write(path, "t1")
    _write(path, "t2")
    assert path.read_text(encoding="utf-8").count("\n") == 2 and "\n\n" not in path.read_text(encoding="utf-8")


def test_a_log_saved_with_a_bom_keeps_its_first_verdict(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.jsonl"
    _write(path, "t1", "t2")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [record.task_id for record in VerdictLog(path).read()] == ["t1", "t2"]


def test_a_cut_line_is_set_aside_once_byte_for_byte_and_later_reads_do_not_warn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "verdicts.jsonl"
    _write(path, "t1", "t2")
    data = path.read_bytes()
    cut_line = data.splitlines(keepends=True)[1][:-40]
    path.write_bytes(b"\xef\xbb\xbf" + data[:-40])  # a BOM, and the last verdict cut mid-write
    _write(path, "t3")
    log = VerdictLog(path)
    with caplog.at_level("WARNING"):
        assert log.set_aside_damaged() == 1
    assert "1 unreadable verdict line(s) (line 2; an interrupted write) moved to verdicts.damaged.jsonl" in caplog.text
    assert log.damaged_path.read_bytes() == cut_line + b"\n"  # kept for whoever wants it
    assert [record.task_id for record in log.read()] == ["t1", "t3"]
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert log.set_aside_damaged() == 0
        log.read()
    assert caplog.text == ""  # said once, not on every rerun
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["verdicts.damaged.jsonl", "verdicts.jsonl"]


def test_a_log_with_nothing_damaged_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.jsonl"
    _write(path, "t1", "t2")
    before = path.stat()
    assert VerdictLog(path).set_aside_damaged() == 0
    assert path.stat().st_ino == before.st_ino and not VerdictLog(path).damaged_path.exists()
