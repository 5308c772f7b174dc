"""Bad trajectory input is skipped and named, never fatal; one judge per output directory; a
trajectory whose question differs from the task list is judged with the list's and flagged."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evaluation.judge.cli import main as judge_main
from evaluation.judge.lock import output_lock
from evaluation.judge.pipeline import judge_paths
from evaluation.trajectories import load_trajectories
from tests.evaluation.judge_helpers import (
    livemcpbench_entry,
    options,
    task_entry,
    verdict_lines,
    write_copilot_log,
    write_tasks,
)
from tests.support.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.timeout(120)


def test_malformed_entries_are_skipped_and_named_the_rest_is_read(tmp_path: Path) -> None:
    good = livemcpbench_entry("good", "Where is it?")
    bad_messages = {**livemcpbench_entry("m", "q"), "messages": "oops"}
    null_call = livemcpbench_entry("n", "q")
    null_call["messages"][2]["tool_calls"] = [None]
    bad_meta = {**livemcpbench_entry("a", "q"), "Annotator Metadata": "x"}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([bad_messages, good, null_call, bad_meta, "just text", {"messages": []}]))
    loaded = load_trajectories([path])
    assert list(loaded.trajectories) == ["good"]
    assert [str(problem) for problem in loaded.problems] == [
        f"{path}: entry 1: messages is a string, expected a list of messages; skipped",
        f"{path}: entry 3: messages[2].tool_calls[0] is null, expected a tool call object; skipped",
        f"{path}: entry 4: 'Annotator Metadata' is a string, expected an object; skipped",
        f"{path}: entry 5: is a string, expected an object with task_id and messages; skipped",
        f"{path}: entry 6: has no task_id; skipped",
    ]


def test_non_utf8_files_are_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "latin1.json").write_bytes(json.dumps([livemcpbench_entry("x", "caf\u00e9")], ensure_ascii=False).encode("latin-1"))
    log = write_copilot_log(tmp_path / "t.jsonl", "t", "q")
    log.write_bytes(log.read_bytes() + b'{"event": "final_answer", "text": "\xff\xfe"}\n')
    loaded = load_trajectories([tmp_path])
    assert list(loaded.trajectories) == ["t"] and loaded.trajectories["t"].final_answer == "done"
    problems = [str(problem) for problem in loaded.problems]
    assert any(p.startswith(f"{tmp_path / 'latin1.json'}: not UTF-8 text") for p in problems), problems
    assert f"{log}:{len(log.read_bytes().splitlines())}: not UTF-8 text (invalid start byte at byte 35); skipped" in problems


def test_the_judge_judges_the_good_entries_of_a_damaged_file(llm: ScriptedOpenAI, tmp_path: Path, capsys) -> None:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([livemcpbench_entry("good", "Where is it?"), {**livemcpbench_entry("m", "q"), "messages": "oops"}]))
    llm.handler = lambda request: Reply(content="Status: success")
    code = judge_main([str(path), "--base-url", llm.base_url, "--model", "j", "--no-progress",
                       "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")])
    assert code == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{path}: entry 2: messages is a string" in err
    assert [v["task_id"] for v in verdict_lines(tmp_path / "out" / "verdicts.jsonl")] == ["good"]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["inputs"]["malformed_lines"] == 1


def test_non_utf8_task_list_is_a_clear_error(tmp_path: Path, capsys) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_bytes(b'[{"task_id": "t", "Question": "caf\xe9"}]')
    write_copilot_log(tmp_path / "t.jsonl", "t", "q")
    assert judge_main([str(tmp_path / "t.jsonl"), "--tasks", str(tasks), "--model", "j", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tasks}: task list is not UTF-8 text") and "Traceback" not in err


async def test_a_second_judge_on_the_same_output_stops_with_a_clear_error(llm: ScriptedOpenAI, tmp_path: Path) -> None:
    """A real second judge process meets the first one's lock (held here while it judges)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "t.jsonl", "t", "q")
    out = tmp_path / "out"
    out.mkdir()
    with output_lock(out):
        done = subprocess.run(
            [sys.executable, "-m", "evaluation.judge", str(logs), "--base-url", llm.base_url, "--model", "j",
             "--no-progress", "--cache-dir", str(tmp_path / "cache"), "--out", str(out)],
            capture_output=True, text=True, timeout=60, check=False,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: another judge is writing to {out} (pid ")
    assert "pass another --out DIR" in done.stderr and not llm.requests
    # The lock is gone with its holder: judging works now, and nothing was written twice.
    llm.handler = lambda request: Reply(content="Status: success")
    await judge_paths([logs], options(llm, tmp_path, out_dir=out))
    await judge_paths([logs], options(llm, tmp_path, out_dir=out))
    assert [v["task_id"] for v in verdict_lines(out / "verdicts.jsonl")] == ["t"]


async def test_concurrent_judges_in_one_process_do_not_both_judge(llm: ScriptedOpenAI, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "t.jsonl", "t", "q")
    first_request = threading.Event()
    release = threading.Event()

    def slow(request: dict) -> Reply:
        first_request.set()
        release.wait(timeout=30)
        return Reply(content="Status: success")

    llm.handler = slow
    import anyio  # noqa: PLC0415

    errors: list[BaseException] = []

    async def first() -> None:
        await judge_paths([logs], options(llm, tmp_path, out_dir=tmp_path / "out", cache_dir=tmp_path / "c1"))

    async def second() -> None:
        await anyio.to_thread.run_sync(lambda: first_request.wait(30))
        try:
            await judge_paths([logs], options(llm, tmp_path, out_dir=tmp_path / "out", cache_dir=tmp_path / "c2"))
        except Exception as error:  # noqa: BLE001 -- the error is what is checked
            errors.append(error)
        release.set()

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        group.start_soon(second)
    assert len(errors) == 1 and "another judge is writing to" in str(errors[0])
    assert len(verdict_lines(tmp_path / "out" / "verdicts.jsonl")) == 1


def test_a_question_that_differs_from_the_task_list_is_flagged_and_recorded(
    llm: ScriptedOpenAI, tmp_path: Path, capsys
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    # As in task 086e2393 of the published runs: the trajectory says /root/docs/, the list /root/word/.
    write_copilot_log(logs / "t.jsonl", "t", "Summarise /root/docs/a.docx.")
    # The runner's own logs carry the unmapped question too: no false alarm for the path mapping.
    write_copilot_log(logs / "u.jsonl", "u", "Read /tmp/run/tasks/u/workspace/x.txt.", original_question="Read /root/x.txt.")
    tasks = write_tasks(tmp_path / "tasks.json", [task_entry("t", "Summarise /root/word/a.docx."), task_entry("u", "Read /root/x.txt.")])
    llm.handler = lambda request: Reply(content="Status: success")
    code = judge_main([str(logs), "--tasks", str(tasks), "--base-url", llm.base_url, "--model", "j", "--no-progress",
                       "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")])
    assert code == 0
    err = capsys.readouterr().err
    assert "warning: task t: the trajectory's question differs from the task list's" in err
    assert "/root/word/a.docx" in err and "/root/docs/a.docx" in err and "task u" not in err
    prompts = [json.dumps(r["messages"]) for r in llm.requests]
    assert any("Summarise /root/word/a.docx." in p for p in prompts)  # the task list's is judged
    verdicts = {v["task_id"]: v for v in verdict_lines(tmp_path / "out" / "verdicts.jsonl")}
    assert verdicts["t"]["question"] == "Summarise /root/word/a.docx."
    assert verdicts["t"]["trajectory_question"] == "Summarise /root/docs/a.docx."
    assert verdicts["u"]["trajectory_question"] is None
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [m["task_id"] for m in report["inputs"]["question_mismatches"]] == ["t"]
