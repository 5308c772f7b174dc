"""``python -m evaluation.judge``: exit codes and messages for good and bad input."""

from __future__ import annotations

import argparse
import csv
import errno
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluation.judge.cli import main
from evaluation.judge.options import JudgeError, JudgeOptions, add_judge_arguments
from tests.evaluation.judge_helpers import (
    livemcpbench_entry,
    task_entry,
    write_copilot_log,
    write_tasks,
)
from tests.support.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.timeout(60)


PROJECT = Path(__file__).resolve().parents[3]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _common(tmp_path: Path, base_url: str) -> list[str]:
    return ["--base-url", base_url, "--model", "judge-a", "--cache-dir", str(tmp_path / "cache"), "--no-progress"]


def _one_task_logs(tmp_path: Path) -> Path:
    """A logs directory holding one task's trajectory (``t1``, "question t1")."""
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "t1.jsonl", "t1", "question t1")
    return logs


def test_cli_judges_and_reports_problems(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _one_task_logs(tmp_path)
    write_copilot_log(logs / "stray.jsonl", "zz-unknown", "stray question")
    with (logs / "t1.jsonl").open("a") as handle:
        handle.write("{broken\n")
    tasks = write_tasks(tmp_path / "tasks.json", [task_entry("t1", "question t1"), task_entry("t2", "question t2")])
    llm.handler = lambda request: Reply(content="Status: success")
    code = main([str(logs), "--tasks", str(tasks), *_common(tmp_path, llm.base_url)])
    err = capsys.readouterr().err
    assert code == 0
    assert "1/2 tasks succeeded: 50.0%" in err
    assert "t1.jsonl:4" in err and "1 input problem" in err
    assert "not in the task list" in err and "zz-unknown" in err
    out = logs / "judge"  # default: beside the logs
    assert {p.name for p in out.iterdir()} >= {"verdicts.jsonl", "report.json", "report.md", "report.html"}
    report = json.loads((out / "report.json").read_text())
    assert report["inputs"]["malformed_lines"] == 1 and report["inputs"]["unknown_task_ids"] == ["zz-unknown"]
    assert report["missing_trajectories"] == ["t2"]


def test_tasks_the_judge_never_decided_are_left_out_of_the_rate_not_failed(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the unjudged task counted as a failure: 1/3 = 33.3% for an agent that is 1/2 on the
    # tasks anyone decided, in the headline, report.json and every table.
    logs = tmp_path / "logs"
    logs.mkdir()
    for task_id in ("ok", "bad", "lost"):
        write_copilot_log(logs / f"{task_id}.jsonl", task_id, f"question {task_id}")
    llm.handler = lambda request: (
        Reply(status=500) if "question lost" in str(request)
        else Reply(content="Status: success" if "question ok" in str(request) else "Status: failure")
    )
    assert main([str(logs), "--max-retries", "0", *_common(tmp_path, llm.base_url)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "1/2 tasks succeeded: 50.0%" in err and "1 not judged (left out of the rate)" in err
    report = json.loads((logs / "judge" / "report.json").read_text())
    assert (report["success_rate"], report["success"], report["failure"], report["not_judged"]) == (0.5, 1, 1, ["lost"])
    assert report["n_tasks"] == 3 and report["by_category"]["Other"]["n"] == 2
    markdown = (logs / "judge" / "report.md").read_text()
    assert "1/2 tasks succeeded: 50.0%" in markdown and "1 not judged, left out." in markdown


def test_tasks_the_run_itself_ended_are_named_apart_from_the_agents_failures(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a task the model endpoint or the copilot broke read like any failure of the agent: the
    # headline, the task table and the CLI said nothing of a rerun that could change the rate.
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "ok.jsonl", "ok", "question ok", answer="done")
    write_copilot_log(logs / "slow.jsonl", "slow", "question slow", answer=None, run_end=("timeout", "timeout"))
    write_copilot_log(logs / "llm.jsonl", "llm", "question llm", answer=None, run_end=("failed", "llm_error"))
    write_copilot_log(logs / "cop.jsonl", "cop", "question cop", answer=None, run_end=("failed", "copilot_failed"))
    llm.handler = lambda request: Reply(content="Status: success" if "question ok" in str(request) else "Status: failure")
    assert main([str(logs), *_common(tmp_path, llm.base_url)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "1/4 tasks succeeded" in err
    assert "2 unsuccessful task(s) were ended by the run itself, not the agent (copilot_failed 1, llm_error 1)" in err
    assert "--retry-failed" in err and "(cop, llm)" in err
    report = json.loads((logs / "judge" / "report.json").read_text())
    assert report["run_broke"] == {"cop": "copilot_failed", "llm": "llm_error"}  # a timeout is the agent's
    rows = {row["task_id"]: row for row in report["tasks"]}
    assert (rows["slow"]["run_status"], rows["slow"]["run_broke"]) == ("timeout", None)
    markdown = (logs / "judge" / "report.md").read_text()
    assert "ended by the run itself" in markdown and "llm: llm_error" in markdown
    assert "| failed: llm_error |" in markdown and "| timeout |" in markdown


def test_a_run_where_nothing_could_be_judged_prints_no_success_rate(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _one_task_logs(tmp_path)
    llm.handler = lambda request: Reply(status=500)
    code = main([str(logs), "--max-retries", "0", *_common(tmp_path, llm.base_url)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1
    assert "nothing could be judged: 1 task(s) not judged (see below), 0 without trajectory; no success rate." in err
    assert "tasks succeeded" not in err and "not judged t1: " in err
    # The report written says so too: no rate (not 0%), with the count of judged tasks beside it.
    report = json.loads((logs / "judge" / "report.json").read_text())
    assert report["success_rate"] is None and report["n_judged"] == 0 and report["n_tasks"] == 1
    assert all(rate["rate"] is None for rate in report["by_category"].values())
    assert all(judge["success_rate"] is None for judge in report["judges"])
    markdown = (logs / "judge" / "report.md").read_text()
    assert "Success rate: n/a -- not judged (0 of 1 tasks judged)" in markdown and "0.0%" not in markdown
    html = (logs / "judge" / "report.html").read_text()
    assert "n/a (not judged)" in html and ">0/1<" in html


def test_empty_directory_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "logs").mkdir()
    code = main([str(tmp_path / "logs"), *_common(tmp_path, "http://127.0.0.1:9/v1")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: no trajectories found in") and "Traceback" not in err
    assert list((tmp_path / "logs").iterdir()) == []  # no empty judge/ directory left behind


def test_missing_path_and_missing_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code = main([str(tmp_path / "nope"), *_common(tmp_path, "http://127.0.0.1:9/v1")])
    assert code == 2 and "no such file or directory" in capsys.readouterr().err
    monkeypatch.delenv("MODEL", raising=False)
    code = main([str(tmp_path), "--base-url", "http://127.0.0.1:9/v1"])
    assert code == 2 and "no model given: pass --model" in capsys.readouterr().err


def test_a_jury_member_or_a_repeat_given_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _two_days(tmp_path)
    code = main([str(runs[0]), "--base-url", "http://127.0.0.1:9/v1", "--model", "a, b,a"])
    err = capsys.readouterr().err
    assert code == 2 and "--model: 'a' is listed twice" in err and "Traceback" not in err
    twice = [str(runs[0]), str(runs[1]), f"{runs[0]}/"]
    code = main([*twice, "--repeats", "--out", str(tmp_path / "both"), *_common(tmp_path, "http://127.0.0.1:9/v1")])
    err = capsys.readouterr().err
    assert code == 2 and f"--repeats: {runs[0]} and {runs[0]} are the same run directory" in err
    assert not (tmp_path / "both").exists()


class _HangUpServer:
    """A TCP endpoint that accepts each connection and closes it at once, counting them."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.connections = 0
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:  # closed: the test is over
                return
            self.connections += 1
            connection.close()

    def __enter__(self) -> _HangUpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        self._thread.join(timeout=10)


def test_unreachable_endpoint_fails_fast_with_the_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(20):
        write_copilot_log(logs / f"t{i}.jsonl", f"t{i}", f"question {i}")
    write_tasks(tmp_path / "tasks.json", [task_entry(f"t{i}", f"question {i}") for i in range(20)])
    with _HangUpServer() as endpoint:
        url = f"http://127.0.0.1:{endpoint.port}/v1"
        code = main([str(logs), "--tasks", str(tmp_path / "tasks.json"), *_common(tmp_path, url)])
    err = capsys.readouterr().err
    # One line, no success figure: nothing was judged, so "0/20 succeeded" would be a false result.
    assert code == 2
    assert err.splitlines() == [err.strip()] and err.startswith(f"error: cannot reach {url} (")
    assert not list((logs / "judge").glob("report*"))
    # One probe, not 20 tasks x retries: counted, not timed (a loaded machine is slow, not wrong).
    assert endpoint.connections == 1


def test_unreachable_endpoint_keeps_earlier_verdicts_and_writes_no_report(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "t1.jsonl", "t1", "question 1")
    llm.handler = lambda request: Reply(content="Status: success")
    assert main([str(logs), *_common(tmp_path, llm.base_url)]) == 0
    out = logs / "judge"
    for report in out.glob("report*"):
        report.unlink()
    verdicts = (out / "verdicts.jsonl").read_text()
    write_copilot_log(logs / "t2.jsonl", "t2", "question 2")  # a new task: needs the endpoint
    capsys.readouterr()
    with _HangUpServer() as endpoint:
        url = f"http://127.0.0.1:{endpoint.port}/v1"
        code = main([str(logs), *_common(tmp_path, url)])
    err = capsys.readouterr().err
    assert code == 2 and "succeeded" not in err and "Traceback" not in err
    assert err.splitlines()[-1].startswith(f"error: cannot reach {url} (")
    assert "1 verdict(s) kept in" in err and "rerun the same command" in err
    assert (out / "verdicts.jsonl").read_text() == verdicts  # t1's verdict kept, nothing appended
    assert not list(out.glob("report*"))


def test_bad_task_file_and_bad_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "t1.jsonl", "t1", "q")
    bad = tmp_path / "tasks.json"
    bad.write_text('[\n  {"task_id": "t1",,}\n]')
    code = main([str(logs), "--tasks", str(bad), *_common(tmp_path, "http://127.0.0.1:9/v1")])
    assert code == 2 and f"{bad}:2: task list is not valid JSON" in capsys.readouterr().err
    code = main([str(logs), "--concurrency", "0", *_common(tmp_path, "http://127.0.0.1:9/v1")])
    assert code == 2 and "--concurrency" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--timeout", "0", "--timeout: must be a positive number of seconds (got 0)."),
        ("--timeout", "-5", "--timeout: must be a positive number of seconds (got -5)."),
        ("--timeout", "nan", "--timeout: must be a positive number of seconds (got nan)."),
        ("--max-retries", "-1", "--max-retries: must be 0 or more (got -1)."),
    ],
)
def test_endpoint_limits_that_cannot_work_are_refused_before_any_request(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, says: str
) -> None:
    # Once: "did not answer within -5 s" for a live endpoint, tracebacks for nan and -1.
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "t1.jsonl", "t1", "q")
    code = main([str(logs), option, value, *_common(tmp_path, llm.base_url)])
    assert code == 2 and capsys.readouterr().err == f"error: {says}\n"
    assert llm.requests == [] and not (logs / "judge").exists()


def test_prefixed_endpoint_limits_name_the_runner_option() -> None:
    parser = argparse.ArgumentParser()
    add_judge_arguments(parser, prefix="judge-")
    args = parser.parse_args(["--judge-model", "m", "--judge-timeout", "0"])
    with pytest.raises(JudgeError, match="^--judge-timeout: must be a positive number"):
        JudgeOptions.from_args(args, prefix="judge-")


def test_a_tools_file_or_task_list_of_the_wrong_shape_is_one_line_before_any_judging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "t1.jsonl", "t1", "q")
    tools = tmp_path / "servers.json"
    tools.write_text(json.dumps({"mcpServers": {"fx": {"command": "x"}}}))  # a servers file, not a tool list
    code = main([str(logs), "--tools", str(tools), *_common(tmp_path, "http://127.0.0.1:9/v1")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: --tools: {tools}: not a tool list") and len(err.splitlines()) == 1
    tasks = write_tasks(tmp_path / "tasks.json", [task_entry("t1", "q"), {**task_entry("t2", "q2"), "task_id": 2}])
    code = main([str(logs), "--tasks", str(tasks), *_common(tmp_path, "http://127.0.0.1:9/v1")])
    err = capsys.readouterr().err
    assert code == 2 and err == f"error: {tasks}: entry 2: task_id: Input should be a valid string (got 2).\n"
    assert not (logs / "judge").exists()  # nothing was judged or written


def test_unwritable_output_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps([livemcpbench_entry("L1", "q")]))
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main([str(bench), "--out", str(blocker / "out"), *_common(tmp_path, "http://127.0.0.1:9/v1")])
    assert code == 2 and "cannot write to output directory" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["file", "loop"])
def test_an_unusable_cache_directory_is_one_error_before_judging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A --cache-dir that is a file warned once per entry and asked for every reply again; one
    that is a symlink loop said "(File exists)" (as --out did)."""
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps([livemcpbench_entry("L1", "q")]))
    cache = tmp_path / "cache"
    if kind == "file":
        cache.write_text("")
    else:
        cache.symlink_to(tmp_path / "loop")
        (tmp_path / "loop").symlink_to(cache)
    code = main([str(bench), *_common(tmp_path, "http://127.0.0.1:9/v1"), "--cache-dir", str(cache)])
    reason = "not a directory" if kind == "file" else os.strerror(errno.ELOOP)
    assert code == 2
    assert capsys.readouterr().err == (
        f"error: cannot write to the reply cache directory {cache} ({reason}); pass --cache-dir DIR.\n"
    )


def test_prefixed_options_for_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")  # the runner's own agent model
    add_judge_arguments(parser, prefix="judge-", exclude={"tasks"})
    monkeypatch.setenv("MODEL", "agent-model")
    monkeypatch.setenv("JUDGE_MODEL", "judge-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://example.test/v1")
    args = parser.parse_args(["--model", "agent", "--judge-prompt", "evidence", "--judge-concurrency", "3"])
    judge = JudgeOptions.from_args(args, prefix="judge-", tasks_file=Path("t.json"))
    assert judge.llm.models == ["judge-env"] and judge.llm.base_url == "http://example.test/v1"
    assert (judge.prompt, judge.concurrency, judge.tasks_file) == ("evidence", 3, Path("t.json"))
    args = parser.parse_args(["--judge-model", "a, b ,c"])
    assert JudgeOptions.from_args(args, prefix="judge-").llm.models == ["a", "b", "c"]


def test_module_entry_point_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evaluation.judge", "--help"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "--auto-key-points" in done.stdout and "--human-labels" in done.stdout


def test_summary_prints_error_texts_with_brackets_verbatim(tmp_path: Path) -> None:
    # Endpoint replies quoted in errors may contain "[/x]"; they must print as text, not fail as markup.
    from rich.console import Console

    from evaluation.judge.cli import _print_summary
    from evaluation.judge.pipeline import JudgeSummary, TaskFailure

    summary = JudgeSummary(
        out_dir=tmp_path,
        errors=[TaskFailure(task_id="t[1]", error="HTTP 400: [/bad] tag in reply")],
        unknown_task_ids=["[/odd]"],
    )
    console = Console(record=True, width=200)
    _print_summary(summary, console)
    text = console.export_text()
    assert "not judged t[1]: HTTP 400: [/bad] tag in reply" in text
    assert "[/odd]" in text


def _two_days(tmp_path: Path) -> list[Path]:
    """Two run directories (monday, tuesday), each with task ``t`` answered that day."""
    runs = []
    for day in ("monday", "tuesday"):
        run = tmp_path / day
        run.mkdir()
        write_copilot_log(run / "t.jsonl", "t", "question t", answer=f"answer on {day}")
        runs.append(run)
    return runs


def test_several_run_directories_are_judged_as_repeats(tmp_path: Path, capsys) -> None:
    from tests.support.scripted_openai import Reply, ScriptedOpenAI  # noqa: PLC0415

    runs = _two_days(tmp_path)
    verdict = lambda request: Reply(content="Status: success" if "monday" in str(request) else "Status: failure")  # noqa: E731
    with ScriptedOpenAI(handler=verdict) as llm:
        args = [*map(str, runs), "--repeats", "--base-url", llm.base_url, "--model", "j", "--no-progress",
                "--cache-dir", str(tmp_path / "cache")]
        assert main(args) == 2
        assert "--repeats: pass --out DIR" in capsys.readouterr().err
        assert main([*args, "--out", str(tmp_path / "both")]) == 0
    report = json.loads((tmp_path / "both" / "repeats.json").read_text())
    assert [r["name"] for r in report["repeats"]] == ["monday", "tuesday"]
    assert report["tasks"][0]["outcomes"] == ["success", "failure"] and report["pass_at_k"]["2"] == 1.0
    assert (runs[0] / "judge" / "report.json").is_file()


def test_progress_off_a_terminal_is_plain_lines_as_tasks_finish(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # rich draws its bar off a terminal only once, when it stops: a judge run logged to a file
    # showed nothing until it ended. capsys's stderr is not a terminal.
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(20):
        write_copilot_log(logs / f"t{i:02}.jsonl", f"t{i:02}", f"question {i}")
    llm.handler = lambda request: Reply(content="Status: success")
    common = [arg for arg in _common(tmp_path, llm.base_url) if arg != "--no-progress"]
    assert main([str(logs), "--concurrency", "3", *common]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "judging 20 task(s)"
    steps = [line for line in lines if line.startswith("judging: ")]
    assert [line.split(" (")[0] for line in steps] == [f"judging: {n} of 20" for n in range(2, 21, 2)]
    assert steps[0] == "judging: 2 of 20 (10%): success 2"
    assert steps[-1].startswith("judging: 20 of 20 (100%): success 20 in ") and steps[-1].endswith("s")
    assert not any("━" in line for line in lines)  # no bar drawn at the end either
    assert main([str(logs), *common]) == 0  # all done already: no progress lines at all
    assert not any(line.startswith("judging") for line in capsys.readouterr().err.splitlines())


def test_repeats_with_unjudged_tasks_say_so(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A repeat whose judge requests failed counted those tasks as failed attempts: pass@k too low
    # in repeats.json/.md with no word of why.
    runs = _two_days(tmp_path)
    llm.handler = lambda request: Reply(status=500) if "tuesday" in str(request) else Reply(content="Status: success")
    args = [*map(str, runs), "--repeats", "--out", str(tmp_path / "both"), "--max-retries", "0"]
    assert main([*args, *_common(tmp_path, llm.base_url)]) == 1
    report = json.loads((tmp_path / "both" / "repeats.json").read_text())
    assert report["tasks"][0]["outcomes"] == ["success", "not_judged"]
    # The unjudged attempt is no attempt (before: a failed one, pass@1 0.5): 1 of 1 judged attempts.
    assert (report["tasks"][0]["n"], report["tasks"][0]["pass_at_1"], report["pass_at_1"]) == (1, 1.0, 1.0)
    assert report["pass_at_k"] == {"1": 1.0} and report["unjudged_tasks"] == []
    [warning] = [w for w in report["warnings"] if w.startswith("tasks never judged")]
    assert "(tuesday: 1)" in warning and "left out of their tasks' attempts" in warning
    assert f"warning: {warning}" in " ".join(capsys.readouterr().err.split())


def test_repeats_where_a_task_was_never_judged_leave_it_out(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _two_days(tmp_path)
    for run in runs:
        write_copilot_log(run / "u.jsonl", "u", "question u", answer="u")
    llm.handler = lambda request: Reply(status=500) if "question u" in str(request) else Reply(content="Status: failure")
    args = [*map(str, runs), "--repeats", "--out", str(tmp_path / "both"), "--max-retries", "0"]
    assert main([*args, *_common(tmp_path, llm.base_url)]) == 1
    report = json.loads((tmp_path / "both" / "repeats.json").read_text())
    rows = {row["task_id"]: row for row in report["tasks"]}
    assert (rows["u"]["n"], rows["u"]["pass_at_1"], rows["u"]["pass_at_k"]) == (0, None, {})
    # Before: u's two unjudged attempts were two failures; now pass@k is t's alone.
    assert report["unjudged_tasks"] == ["u"] and report["pass_at_1"] == 0.0 and report["pass_at_k"] == {"1": 0.0, "2": 0.0}
    assert any(w.startswith("1 of 2 tasks were judged in no repeat (u)") for w in report["warnings"])
    assert "| u | Other | 0/0 | n/a | n/a | n/a |" in (tmp_path / "both" / "repeats.md").read_text()
    # pass@2 rests on t alone, and the line says so.
    assert report["tasks_at_k"] == {"1": 1, "2": 1}
    assert "pass@2 0.0%, pass^2 0.0% (over 1 task);" in " ".join(capsys.readouterr().err.split())


def test_repeats_with_nothing_judged_print_no_interval(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "pass@1 n/a (95% CI 0.0%-0.0%)", and pass_at_1_ci95 [0.0, 0.0] in repeats.json.
    runs = _two_days(tmp_path)
    llm.handler = lambda request: Reply(status=500)
    args = [*map(str, runs), "--repeats", "--out", str(tmp_path / "both"), "--max-retries", "0"]
    assert main([*args, *_common(tmp_path, llm.base_url)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "nothing could be judged" in err and "2 repeats of 1 tasks: pass@1 n/a, pass@2 n/a, pass^2 n/a;" in err
    assert "0.0%-0.0%" not in err
    report = json.loads((tmp_path / "both" / "repeats.json").read_text())
    assert (report["pass_at_1"], report["pass_at_1_ci95"], report["tasks_at_k"]) == (None, None, {})
    for run in runs:
        single = json.loads((run / "judge" / "report.json").read_text())
        assert (single["success_rate"], single["ci95"]) == (None, None)


def test_a_task_with_no_question_anywhere_counts_as_not_judged_with_an_accurate_hint(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the task left the rate silently (no "not judged" in the headline, exit 0), and the
    # hint said "pass --tasks FILE" to a command that had passed it.
    logs = _one_task_logs(tmp_path)
    write_copilot_log(logs / "t2.jsonl", "t2", None)
    tasks = write_tasks(tmp_path / "tasks.json", [task_entry("t1", "question t1"), task_entry("t2", "")])
    llm.handler = lambda request: Reply(content="Status: success")
    assert main([str(logs), "--tasks", str(tasks), *_common(tmp_path, llm.base_url)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "1/1 tasks succeeded: 100.0%" in err and "1 not judged (left out of the rate)" in err
    assert f"task t2 has no question (its entry in the task list {tasks} has an empty Question" in err
    assert "pass --tasks FILE" not in err
    assert "1 task(s) not judged because of an input problem above (t2); fix it and rerun." in err


def test_an_interrupted_repeated_run_is_judged_over_the_repeats_that_ran(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "error: no trajectories found in …/repeat-2", exit 2, nothing judged at all.
    run = tmp_path / "run"
    for name in ("repeat-1", "repeat-2"):
        (run / name).mkdir(parents=True)
        write_tasks(run / name / "tasks.json", [task_entry("t", "question t")])  # written before any task runs
    write_copilot_log(run / "repeat-1" / "t.jsonl", "t", "question t")
    (run / "repeats.json").write_text(json.dumps({"repeats": ["repeat-1", "repeat-2"]}), encoding="utf-8")
    llm.handler = lambda request: Reply(content="Status: success")
    assert main([str(run), *_common(tmp_path, llm.base_url)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"{run / 'repeat-2'}: not run yet (no trajectory); resume the run" in err
    report = json.loads((run / "judge" / "repeats.json").read_text())
    assert (report["n_repeats"], report["not_run"], report["pass_at_1"]) == (1, ["repeat-2"], 1.0)
    assert report["warnings"][0].startswith("1 of 2 repeats have not run yet (repeat-2)")
    assert (run / "repeat-1" / "judge" / "report.json").is_file() and not (run / "repeat-2" / "judge").exists()
    (run / "repeat-1" / "t.jsonl").unlink()
    assert main([str(run), *_common(tmp_path, llm.base_url)]) == 2
    assert "none of the 2 repeats holds a trajectory yet" in capsys.readouterr().err


def test_a_copilot_catalog_that_does_not_exist_is_an_error_not_a_judge_without_tools(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = _one_task_logs(tmp_path)
    monkeypatch.setenv("COPILOT_CATALOG", str(tmp_path / "catalgo.json"))
    assert main([str(logs), *_common(tmp_path, llm.base_url)]) == 2
    err = capsys.readouterr().err
    assert f"error: COPILOT_CATALOG={tmp_path / 'catalgo.json'}: no such file" in err and "--tools FILE" in err
    assert not llm.requests


def test_a_verdict_cut_by_a_kill_is_set_aside_by_the_next_run_and_not_warned_about_again(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    logs = _one_task_logs(tmp_path)
    write_copilot_log(logs / "t2.jsonl", "t2", "question t2")
    tasks = write_tasks(tmp_path / "tasks.json", [task_entry("t1", "question t1"), task_entry("t2", "question t2")])
    llm.handler = lambda request: Reply(content="Status: success")
    arguments = [str(logs), "--tasks", str(tasks), *_common(tmp_path, llm.base_url)]
    assert main(arguments) == 0
    verdicts = logs / "judge" / "verdicts.jsonl"
    verdicts.write_bytes(verdicts.read_bytes()[:-40])  # the last verdict cut mid-write
    capsys.readouterr()
    caplog.set_level("WARNING")
    assert main(arguments) == 0
    err = capsys.readouterr().err
    warned = "verdicts.jsonl: 1 unreadable verdict line(s) (line 2; an interrupted write) moved to verdicts.damaged.jsonl"
    assert warned in caplog.text
    assert "2/2 tasks succeeded" in err and "judged 1 now, 1 already done" in err
    caplog.clear()
    assert main(arguments) == 0
    err = capsys.readouterr().err
    assert "unreadable" not in caplog.text and "judged 0 now, 2 already done" in err


PASSWORD = "gw-PASSWORD-SECRET"


def _gateway_url(llm: ScriptedOpenAI) -> str:
    """``llm``'s URL as a gateway with credentials in it (``user:pass@``)."""
    return llm.base_url.replace("http://", f"http://judge:{PASSWORD}@")


@pytest.fixture
def loud_http_loggers() -> Iterator[None]:
    """The HTTP clients' loggers as a fresh process has them (another test's CLI may have quieted them)."""
    from index.cli.log_setup import NOISY_LOGGERS

    saved = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def test_a_gateway_urls_credentials_stay_out_of_reports_and_verbose_logs(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
    loud_http_loggers: None,
) -> None:
    logs = _one_task_logs(tmp_path)
    llm.handler = lambda request: Reply(content="Status: success")
    caplog.set_level(logging.INFO)
    assert main([str(logs), *_common(tmp_path, _gateway_url(llm)), "-v"]) == 0
    assert llm.requests  # the gateway was used
    report = json.loads((logs / "judge" / "report.json").read_text())
    assert report["judge"]["base_url"] == llm.base_url.replace("http://", "http://judge:***@")
    written = "".join(path.read_text() for path in (logs / "judge").glob("report.*"))
    shown = [written, caplog.text, capsys.readouterr().err]
    assert not [text for text in shown if PASSWORD in text]


def test_a_judge_error_names_the_gateway_without_its_credentials(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _one_task_logs(tmp_path)
    llm.handler = lambda request: Reply(status=401)
    assert main([str(logs), *_common(tmp_path, _gateway_url(llm))]) == 2
    err = capsys.readouterr().err
    assert "HTTP 401 from http://judge:***@127.0.0.1:" in err
    assert PASSWORD not in err


def test_a_rerun_that_judges_again_says_why(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _one_task_logs(tmp_path)
    llm.handler = lambda request: Reply(content="Status: success")
    write_tasks(tmp_path / "tasks.json", [task_entry("t1", "question t1")])
    assert main([str(logs), "--tasks", str(tmp_path / "tasks.json"), *_common(tmp_path, llm.base_url)]) == 0
    write_tasks(tmp_path / "tasks.json", [task_entry("t1", "question t1, corrected")])
    capsys.readouterr()
    assert main([str(logs), "--tasks", str(tmp_path / "tasks.json"), *_common(tmp_path, llm.base_url)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "judged 1 now, 0 already done" in err
    assert "judged again: 1 whose question, key points or tool descriptions changed since its verdict" in err


def test_judging_a_judged_run_again_into_a_new_out_reads_no_earlier_judge_output(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Judged once (default ``logs/judge``), once more into ``logs/judge-jury``, then into a new
    ``--out``: each earlier judge's ``verdicts.jsonl`` was read as a log, "1 input problem(s)
    (skipped): …/judge/verdicts.jsonl: not a trajectory log (no 'event' field)", and counted in the
    report's ``inputs``."""
    logs = _one_task_logs(tmp_path)
    llm.handler = lambda request: Reply(content="Status: success")
    assert main([str(logs), *_common(tmp_path, llm.base_url)]) == 0
    assert main([str(logs), *_common(tmp_path, llm.base_url), "--out", str(logs / "judge-jury")]) == 0
    capsys.readouterr()
    new_out = tmp_path / "new-out"
    assert main([str(logs), *_common(tmp_path, llm.base_url), "--out", str(new_out)]) == 0
    err = capsys.readouterr().err
    assert "input problem" not in err and "not a trajectory log" not in err
    assert "1/1 tasks succeeded" in err
    report = json.loads((new_out / "report.json").read_text())
    assert report["inputs"]["problems"] == [] and report["inputs"]["files_read"] == 1
    # The CSV tables are written by default beside report.json, and listed with it.
    assert f"wrote {new_out / 'tasks.csv'}" in err and f"wrote {new_out / 'categories.csv'}" in err
    with (new_out / "tasks.csv").open(encoding="utf-8", newline="") as handle:
        assert [(row["task_id"], row["outcome"]) for row in csv.DictReader(handle)] == [("t1", "success")]
