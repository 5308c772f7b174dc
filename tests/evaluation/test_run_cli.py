"""``python -m evaluation.run`` with shell agents (no copilot needed): workspaces, trajectories,
resume, per-task failures, selection errors and ``--judge``."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from evaluation.run import main
from evaluation.run_models import RunSummary
from server.trajectory import parse_event
from tests.evaluation.run_support import read_events, write_tasks
from tests.support.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.timeout(120)

FIXTURE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "fixture_server.py"


@pytest.fixture()
def bench(tmp_path: Path) -> dict[str, Path]:
    """Task files, a task list of three tasks (one with a missing input) and a servers file."""
    files = tmp_path / "annotated_data"
    (files / "txt").mkdir(parents=True)
    (files / "txt" / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (files / "markdown").mkdir()
    tasks = write_tasks(
        files / "all_annotations.json",
        [
            {"task_id": "task-write-1", "question": "Summarise /root/txt/notes.txt into /root/markdown/summary.md.",
             "file_name": "/root/txt/notes.txt", "category": "work"},
            {"task_id": "task-answer-2", "question": "What is 2+2?", "category": "Lifestyle"},
            {"task_id": "task-missing-3", "question": "Analyse /root/music/song.wav.", "file_name": "/root/music/song.wav",
             "category": "Leisure"},
        ],
    )
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {
        "fx": {"command": sys.executable, "args": [str(FIXTURE_SERVER), "--name", "fx"]},
        "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/"]},
    }}))
    return {"files": files, "tasks": tasks, "servers": servers, "out": tmp_path / "runs" / "r1", "tmp": tmp_path}


def run_cli(bench: dict[str, Path], *extra: str) -> int:
    return main([
        "--tasks", str(bench["tasks"]), "--out", str(bench["out"]), "--servers", str(bench["servers"]),
        "--copilot-home", str(bench["tmp"] / "home"), *extra,
    ])


# A shell "agent": records that it ran, writes into the workspace (a relative path, i.e. its cwd,
# and the absolute path the mapped question names), and answers through the answer file.
AGENT = (
    "echo {task_id} >> {log}; "
    "cat {question_file} > seen-question.txt; "
    "q=$(cat {question_file}); target=$(printf '%s' \"$q\" | grep -o '/[^ ]*summary.md' || true); "
    "if [ -n \"$target\" ]; then printf 'alpha and beta' > \"$target\"; fi; "
    "printf 'answer for %s' {task_id} > {answer_file}"
)


def agent_cmd(bench: dict[str, Path]) -> str:
    log = shlex.quote(str(bench["tmp"] / "agent-runs.log"))
    return AGENT.replace("{log}", log)


def summary(bench: dict[str, Path]) -> RunSummary:
    return RunSummary.model_validate_json((bench["out"] / "summary.json").read_text())


def test_command_agent_run_writes_trajectories_workspaces_and_summary(bench, capsys) -> None:
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--agent", "shell-agent") == 0
    out = bench["out"]
    records = summary(bench).tasks
    assert {k: r.status for k, r in records.items()} == {
        "task-write-1": "completed", "task-answer-2": "completed", "task-missing-3": "failed",
    }
    assert records["task-missing-3"].error_kind == "missing_files"
    assert "/root/music/song.wav" in (records["task-missing-3"].error or "")
    assert records["task-write-1"].category == "Office"  # 'work' is the paper's Office

    events = read_events(out / "task-write-1.jsonl")
    for line in (out / "task-write-1.jsonl").read_text().splitlines():
        parse_event(line)  # every line is a valid trajectory event
    start, *_, end = events
    workspace = out / "tasks" / "task-write-1" / "workspace"
    assert start["event"] == "session_start" and start["task_id"] == "task-write-1"
    assert start["agent"] == "shell-agent" and start["category"] == "Office"
    assert start["original_question"].startswith("Summarise /root/txt/notes.txt")
    assert start["question"] == f"Summarise {workspace}/txt/notes.txt into {workspace}/markdown/summary.md."
    assert start["path_map"] == {"/root": str(workspace)}
    assert start["date"] and start["runner_version"]
    final = [e for e in events if e["event"] == "final_answer"]
    assert [e["text"] for e in final] == ["answer for task-write-1"]
    changes = [e for e in events if e["event"] == "workspace"]
    assert len(changes) == 1
    files = {f["path"]: f for f in changes[0]["files"]}
    assert files["/root/markdown/summary.md"]["change"] == "created"
    assert files["/root/markdown/summary.md"]["preview"] == "alpha and beta"
    assert "/root/seen-question.txt" in files  # written relative to the agent's cwd: the workspace
    assert end["event"] == "session_end" and end["reason"] == "task completed"

    # Isolation: outputs exist in this task's workspace only; the shared files are untouched.
    assert (workspace / "markdown" / "summary.md").read_text() == "alpha and beta"
    assert not (out / "tasks" / "task-answer-2" / "workspace" / "markdown" / "summary.md").exists()
    assert sorted(p.name for p in bench["files"].rglob("*") if p.is_file()) == ["all_annotations.json", "notes.txt"]

    # The generated MCP config launches the copilot for this task.
    config = json.loads((out / "tasks" / "task-write-1" / "mcp_config.json").read_text())
    copilot = config["mcpServers"]["copilot"]
    assert copilot["args"][:2] == ["-m", "server"]
    assert copilot["env"]["COPILOT_TASK_ID"] == "task-write-1"
    assert copilot["env"]["COPILOT_LOG_FILE"] == str(out / "task-write-1.jsonl")
    assert copilot["env"]["COPILOT_QUESTION"] == start["question"]
    task_servers = json.loads(Path(copilot["env"]["COPILOT_SERVERS"]).read_text())["mcpServers"]
    assert task_servers["filesystem"]["args"][-1] == str(workspace)
    assert task_servers["fx"]["cwd"] == str(workspace)

    printed = capsys.readouterr()
    assert "run summary" in printed.out and "missing_files" in printed.err


def test_resume_skips_finished_tasks_and_retry_failed_reruns_failures(bench, capsys) -> None:
    log = bench["tmp"] / "agent-runs.log"
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench)) == 0
    assert log.read_text().split() == ["task-write-1", "task-answer-2"]
    first = summary(bench).tasks

    assert run_cli(bench, "--agent-cmd", agent_cmd(bench)) == 0
    assert log.read_text().split() == ["task-write-1", "task-answer-2"]  # nothing ran again
    assert summary(bench).tasks == first
    assert "3 task(s) finished earlier are skipped, 0 to run" in capsys.readouterr().err

    (bench["files"] / "music").mkdir()
    (bench["files"] / "music" / "song.wav").write_bytes(b"RIFF")
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--retry-failed") == 0
    assert log.read_text().split() == ["task-write-1", "task-answer-2", "task-missing-3"]
    assert summary(bench).tasks["task-missing-3"].status == "completed"
    # The failed attempt's trajectory is kept aside, not merged into the new one.
    assert len(list((bench["out"] / "tasks").glob("task-missing-3.attempt-1.jsonl.old"))) == 1
    starts = [e for e in read_events(bench["out"] / "task-missing-3.jsonl") if e["event"] == "session_start"]
    assert len(starts) == 1


def test_missing_agent_program_fails_each_task_without_crashing(bench, capsys) -> None:
    assert run_cli(bench, "--agent-cmd", "no-such-agent-xyz -p {question}", "--only", "task-answer-2", "task-write") == 0
    records = summary(bench).tasks
    assert set(records) == {"task-answer-2", "task-write-1"}
    assert all(r.status == "failed" and r.error_kind == "agent_not_found" for r in records.values())
    assert "'no-such-agent-xyz' is not on PATH" in (records["task-answer-2"].error or "")
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert "agent_not_found" in captured.err


def test_task_timeout_is_reported_per_task(bench) -> None:
    assert run_cli(bench, "--agent-cmd", "sleep 60", "--only", "task-answer-2", "--task-timeout", "1") == 0
    record = summary(bench).tasks["task-answer-2"]
    assert (record.status, record.error_kind) == ("timeout", "timeout")
    end = read_events(bench["out"] / "task-answer-2.jsonl")[-1]
    assert end["event"] == "session_end" and "timeout" in end["reason"]


def test_unreachable_model_endpoint_fails_each_task_fast(bench, capsys) -> None:
    code = run_cli(bench, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--only", "task-answer-2", "task-write-1")
    assert code == 0
    records = summary(bench).tasks
    assert all(r.error_kind == "llm_error" and "cannot reach http://127.0.0.1:9/v1" in (r.error or "") for r in records.values())
    assert summary(bench).model == "m" and summary(bench).agent == "copilot"


def test_concurrent_tasks_each_get_their_own_workspace(bench) -> None:
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--concurrency", "2", "--allow-missing-files") == 0
    records = summary(bench).tasks
    assert all(r.status == "completed" for r in records.values())
    start = read_events(bench["out"] / "task-missing-3.jsonl")[0]
    assert "input file(s) missing: /root/music/song.wav" in start["warnings"]
    seen = {
        task: (bench["out"] / "tasks" / task / "workspace" / "seen-question.txt").read_text()
        for task in records
    }
    assert all(f"/tasks/{task}/workspace" in text or "/root" not in text for task, text in seen.items())


def test_children_get_a_task_home_and_temp_while_sharing_the_real_caches(bench, monkeypatch) -> None:
    real_home = bench["tmp"] / "real-home"
    (real_home / ".npmrc").parent.mkdir(parents=True)
    (real_home / ".npmrc").write_text("registry=https://registry.example.test/\n")
    monkeypatch.setenv("HOME", str(real_home))
    for name in ("XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "npm_config_cache", "NPM_CONFIG_CACHE",
                 "npm_config_userconfig", "NPM_CONFIG_USERCONFIG", "UV_CACHE_DIR", "UV_TOOL_DIR", "UV_PYTHON_INSTALL_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COPILOT_WORKDIR", str(bench["tmp"] / "shared-work"))  # a per-task value replaces it
    monkeypatch.setenv("COPILOT_ROOTS", str(bench["tmp"]))  # so does the task's workspace
    servers = json.loads(bench["servers"].read_text())
    servers["mcpServers"]["notes"] = {"command": "uvx", "args": ["notes-server"], "env": {"HOME": "/srv/notes"}}
    bench["servers"].write_text(json.dumps(servers))

    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-write-1", "task-answer-2") == 0
    homes = set()
    for task in ("task-write-1", "task-answer-2"):
        task_dir = bench["out"] / "tasks" / task
        copilot_env = json.loads((task_dir / "mcp_config.json").read_text())["mcpServers"]["copilot"]["env"]
        # The pool puts each child's TMPDIR/TEMP/TMP in <COPILOT_WORKDIR>/<server>/tmp: the task's.
        assert copilot_env["COPILOT_WORKDIR"] == str(task_dir / "work")
        assert copilot_env["COPILOT_CHILD_LOG_DIR"] == str(task_dir / "children")
        # Children asking for the user's roots get the task's workspace (and 'works_in: roots' servers run there).
        assert copilot_env["COPILOT_ROOTS"] == str((task_dir / "workspace").resolve())
        entries = json.loads(Path(copilot_env["COPILOT_SERVERS"]).read_text())["mcpServers"]
        for name in ("fx", "filesystem"):
            env = entries[name]["env"]
            assert env["HOME"] == str(task_dir / "workspace"), name
            assert env["XDG_DATA_HOME"] == str(task_dir / "workspace" / ".local" / "share")
            assert env["npm_config_cache"] == str(real_home / ".npm")
            assert env["npm_config_userconfig"] == str(real_home / ".npmrc")
            assert env["UV_CACHE_DIR"] == str(real_home / ".cache" / "uv")
            assert env["UV_PYTHON_INSTALL_DIR"] == str(real_home / ".local" / "share" / "uv" / "python")
            assert env["XDG_CACHE_HOME"] == str(real_home / ".cache")
        assert entries["notes"]["env"]["HOME"] == "/srv/notes"
        assert entries["notes"]["env"]["npm_config_cache"] == str(real_home / ".npm")
        assert (task_dir / "workspace").is_dir()
        homes.add(entries["fx"]["env"]["HOME"])
    assert len(homes) == 2
    # Tool state under the home's hidden directories is never listed as the task's output.
    changes = next(e for e in read_events(bench["out"] / "task-answer-2.jsonl") if e["event"] == "workspace")
    assert [f["path"] for f in changes["files"]] == ["/root/seen-question.txt"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "task-nope"], "--only task-nope: no such task id. Did you mean"),
        (["--only", "task-"], "prefix matches 3 tasks"),
        (["--category", "Gardening"], "unknown category. Known: Leisure, Lifestyle, Office"),
        (["--agent-cmd", "agent {prompt}"], "unknown placeholder"),
        (["--agent", "my-agent"], "run other agents with --agent-cmd"),
        (["--concurrency", "0", "--agent-cmd", "true"], "--concurrency 0"),
    ],
)
def test_bad_arguments_give_one_clear_error(bench, capsys, args, message) -> None:
    assert run_cli(bench, *args) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err


def test_out_of_range_agent_option_names_the_flag(bench, capsys) -> None:
    assert run_cli(bench, "--model", "m", "--base-url", "http://127.0.0.1:9", "--max-tool-chars", "5") == 2
    err = capsys.readouterr().err
    assert "--max-tool-chars 5: Input should be greater than or equal to 100" in err and "Traceback" not in err


def test_missing_task_list_and_no_model(bench, capsys, monkeypatch) -> None:
    monkeypatch.delenv("MODEL", raising=False)
    bench["tasks"] = bench["tmp"] / "nope.json"
    assert run_cli(bench, "--agent-cmd", "true") == 2
    assert "nope.json: task list not found" in capsys.readouterr().err
    bench["tasks"] = bench["files"] / "all_annotations.json"
    assert run_cli(bench) == 2
    assert "no model given" in capsys.readouterr().err


def test_one_run_directory_holds_one_agent(bench, capsys) -> None:
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2") == 0
    assert run_cli(bench, "--base-url", "http://127.0.0.1:9/v1", "--model", "m") == 2
    assert "holds a run of echo; this command runs copilot with model m" in capsys.readouterr().err


def test_judge_option_judges_the_finished_run(bench, capsys) -> None:
    with ScriptedOpenAI(handler=lambda request: Reply(content="Thoughts: fine.\nStatus: success")) as judge_llm:
        code = run_cli(
            bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2", "task-write-1",
            "--judge", "--judge-base-url", judge_llm.base_url, "--judge-model", "judge-m", "--judge-api-key", "k",
            "--judge-no-progress", "--judge-cache-dir", str(bench["tmp"] / "judge-cache"),
        )
        assert judge_llm.requests, "the judge was never called"
    assert code == 0
    verdicts = [json.loads(line) for line in (bench["out"] / "judge" / "verdicts.jsonl").read_text().splitlines()]
    assert {v["task_id"]: v["verdict"] for v in verdicts} == {"task-answer-2": "success", "task-write-1": "success"}
    report = json.loads((bench["out"] / "judge" / "report.json").read_text())
    assert report["n_tasks"] == 2  # the denominator is what this run selected
    assert "judged: 2/2 succeeded" in capsys.readouterr().err


def test_sigterm_stops_the_run_cleanly_and_loses_nothing(bench) -> None:
    fifo = bench["tmp"] / "ready.fifo"
    os.mkfifo(fifo)
    pid_file = bench["tmp"] / "agent.pid"
    agent = f"echo $$ > {shlex.quote(str(pid_file))}; echo ready > {shlex.quote(str(fifo))}; sleep 300"
    process = subprocess.Popen(
        [sys.executable, "-m", "evaluation.run", "--tasks", str(bench["tasks"]), "--out", str(bench["out"]),
         "--servers", str(bench["servers"]), "--copilot-home", str(bench["tmp"] / "home"),
         "--agent-cmd", agent, "--only", "task-answer-2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        with fifo.open() as ready:  # blocks until the agent is running
            assert ready.read().strip() == "ready"
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert "rerun the same command to resume" in err and "Traceback" not in err
    agent_pid = int(pid_file.read_text())
    assert not psutil.pid_exists(agent_pid) or psutil.Process(agent_pid).status() == psutil.STATUS_ZOMBIE
    # The interrupted task has no record, so the next run does it again.
    assert "task-answer-2" not in summary(bench).tasks
    assert read_events(bench["out"] / "task-answer-2.jsonl")[-1]["reason"] == "interrupted"
