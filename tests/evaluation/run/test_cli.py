"""``python -m evaluation.run`` with shell agents (no copilot needed): workspaces, trajectories,
resume, per-task failures, selection errors and ``--judge``."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from evaluation.run.cli import main
from evaluation.run.models import RunSummary
from server.trajectory.records import parse_event
from tests.evaluation.run.support import read_events, write_tasks
from tests.support.cli import PROJECT, cli_env, line_with
from tests.support.cli import run_cli as run_real_cli
from tests.support.scripted_openai import Reply, ScriptedOpenAI, ToolCall, last_user_text

pytestmark = pytest.mark.timeout(120)

FIXTURE_SERVER = Path(__file__).resolve().parents[2] / "fixtures" / "fixture_server.py"


@pytest.fixture(scope="module")
def built_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copilot home whose index covers the bench's two servers (built once from a small catalog)."""
    from index.storage.build import build_index  # noqa: PLC0415
    from index.catalog.records import Catalog, CatalogServer, ToolRecord  # noqa: PLC0415
    from index.settings import CopilotSettings  # noqa: PLC0415

    root = tmp_path_factory.mktemp("built-home")
    catalog = Catalog(
        servers={"fx": CatalogServer(tool_count=1), "filesystem": CatalogServer(tool_count=1)},
        tools=[
            ToolRecord(server="fx", name="echo", description="Echo the given text back unchanged."),
            ToolRecord(server="filesystem", name="read_file", description="Read a file from disk."),
        ],
    ).save(root / "catalog.json")
    build_index(catalog, CopilotSettings(home=root / "home"), show_progress=False)
    return root / "home"


@pytest.fixture()
def bench(tmp_path: Path, built_home: Path) -> dict[str, Path]:
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
    return {
        "files": files, "tasks": tasks, "servers": servers, "out": tmp_path / "runs" / "r1", "tmp": tmp_path,
        "home": built_home,
    }


def run_cli(bench: dict[str, Path], *extra: str) -> int:
    return main([
        "--tasks", str(bench["tasks"]), "--out", str(bench["out"]), "--servers", str(bench["servers"]),
        "--copilot-home", str(bench["home"]), *extra,
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
    assert copilot["env"]["COPILOT_LIVEMCPBENCH_ALIAS"] == "1"  # the paper's prompts call 'execute-tool'
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
    # The skipped failure is named with the way to rerun it (the fix may be in place by now).
    assert (
        "3 task(s) finished earlier are skipped, 0 to run (1 of the skipped failed or timed out: "
        "--retry-failed reruns them)"
    ) in " ".join(capsys.readouterr().err.split())

    (bench["files"] / "music").mkdir()
    (bench["files"] / "music" / "song.wav").write_bytes(b"RIFF")
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--retry-failed") == 0
    assert log.read_text().split() == ["task-write-1", "task-answer-2", "task-missing-3"]
    assert summary(bench).tasks["task-missing-3"].status == "completed"
    # The failed attempt's trajectory is kept aside, not merged into the new one.
    assert len(list((bench["out"] / "tasks").glob("task-missing-3.attempt-1.jsonl.old"))) == 1
    starts = [e for e in read_events(bench["out"] / "task-missing-3.jsonl") if e["event"] == "session_start"]
    assert len(starts) == 1


def test_real_cli_skips_the_copilots_own_entry_and_prints_unwrapped_lines(bench, capsys) -> None:
    # The user's Claude Desktop config as the servers file: it holds the copilot's own entry too.
    config = json.loads(bench["servers"].read_text())
    config["mcpServers"]["copilot"] = {"command": sys.executable, "args": ["-m", "server"]}
    bench["servers"].write_text(json.dumps(config))
    command = [
        "evaluation.run", "--tasks", str(bench["tasks"]), "--out", str(bench["out"]), "--servers", str(bench["servers"]),
        "--copilot-home", str(bench["tmp"] / "home"), "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2",
    ]
    first = run_real_cli(*command, env=cli_env())  # no terminal, COLUMNS=40
    assert first.returncode == 0, first.stderr
    [warning] = [line for line in first.stderr.splitlines() if "skipping server 'copilot'" in line]
    assert f"skipping server 'copilot': it is this copilot ({sys.executable} -m server)" in warning
    assert summary(bench).tasks["task-answer-2"].status == "completed"

    capsys.readouterr()
    assert main(command[1:]) == 0  # the same command again, in this process (a real one costs a cold start)
    line_with(capsys.readouterr().err, f"resuming {bench['out'].resolve()}: 1 task(s) finished earlier are skipped, 0 to run")


def test_a_question_the_locale_cannot_encode_reaches_the_agent_and_the_copilot(bench) -> None:
    # LC_ALL=C with PYTHONUTF8=0: the filesystem encoding is ASCII. Starting a command agent with
    # {question} in Chinese, or the built-in agent's copilot (the question is in its environment),
    # failed every such task with a UnicodeEncodeError; both now get the question's UTF-8 bytes.
    question = "北京今天的天气怎么样？"
    tasks = write_tasks(bench["tmp"] / "zh" / "all_annotations.json", [{"task_id": "zh-1", "question": question}])
    legacy = cli_env(LC_ALL="C", PYTHONUTF8="0", COPILOT_WARM_INDEX="false")
    common = ["evaluation.run", "--tasks", str(tasks), "--servers", str(bench["servers"]), "--copilot-home", str(bench["home"])]
    shell = run_real_cli(*common, "--out", str(bench["tmp"] / "shell"), "--agent-cmd", "printf '%s' {question} > {answer_file}", env=legacy)
    assert shell.returncode == 0 and "Traceback" not in shell.stderr, shell.stderr
    with ScriptedOpenAI(handler=lambda request: Reply(content=f"asked: {last_user_text(request)}")) as llm:
        builtin = run_real_cli(
            *common, "--out", str(bench["tmp"] / "builtin"), "--base-url", llm.base_url, "--api-key", "k", "--model", "m",
            env=legacy,
        )
    assert builtin.returncode == 0 and "Traceback" not in builtin.stderr, builtin.stderr
    for run, answer in (("shell", question), ("builtin", f"asked: {question}")):
        events = read_events(bench["tmp"] / run / "zh-1.jsonl")
        assert [event["text"] for event in events if event["event"] == "final_answer"] == [answer], run
    copilot_start = [event for event in read_events(bench["tmp"] / "builtin" / "zh-1.jsonl") if event["event"] == "session_start"][-1]
    assert "copilot_version" in copilot_start and copilot_start["question"] == question  # the copilot read it back


def test_missing_agent_program_stops_the_run_before_any_task(bench, capsys) -> None:
    # Before: every task was recorded as failed (agent_not_found), so the rerun after installing the
    # agent skipped them all as "finished earlier".
    assert run_cli(bench, "--agent-cmd", "no-such-agent-xyz -p {question}", "--only", "task-answer-2", "task-write") == 2
    assert summary(bench).tasks == {}
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    err = " ".join(captured.err.split())
    assert err.startswith("error: --agent-cmd: agent program 'no-such-agent-xyz' is not on PATH (install it")
    assert "None of the 2 pending task(s) was run or recorded in" in err and "rerun the same command" in err
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2", "task-write") == 0
    assert {k: r.status for k, r in summary(bench).tasks.items()} == {"task-answer-2": "completed", "task-write-1": "completed"}


def test_a_bad_copilot_setting_stops_the_run_with_its_name_not_a_traceback(bench, capsys, monkeypatch) -> None:
    # Before: the index check built the copilot's settings unguarded, and pydantic's traceback ended the run.
    monkeypatch.setenv("COPILOT_FAST_RELAY", "sometimes")
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2") == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    err = " ".join(captured.err.split())
    assert err.startswith("error: COPILOT_FAST_RELAY") and "sometimes" in err
    assert summary(bench).tasks == {}


def test_a_flooding_agents_logs_are_capped_and_the_cut_is_recorded(bench) -> None:
    # 5 MB on each stream, the answer printed last on stdout: a real process, as a chatty agent would.
    flood = 5_000_000
    agent = (
        f"echo agent-start; head -c {flood} /dev/zero | tr '\\0' x; echo; echo 'the answer'; "
        f"echo err-start >&2; head -c {flood} /dev/zero | tr '\\0' y >&2; echo >&2; echo err-end >&2"
    )
    cap = 65_536
    args = ("--agent-cmd", agent, "--only", "task-answer-2", "--max-agent-log-bytes", str(cap))
    assert run_cli(bench, *args) == 0
    task_dir = bench["out"] / "tasks" / "task-answer-2"
    stdout, stderr = (task_dir / "agent.stdout.log").read_bytes(), (task_dir / "agent.stderr.log").read_bytes()
    assert len(stdout) < cap + 300 and len(stderr) < cap + 300
    assert stdout.startswith(b"agent-start\n") and stdout.endswith(b"x\nthe answer\n")
    assert stderr.startswith(b"err-start\n") and stderr.endswith(b"y\nerr-end\n")
    written_out, written_err = len("agent-start\n") + flood + len("\nthe answer\n"), len("err-start\n") + flood + len("\nerr-end\n")
    assert f"{written_out - cap:,} of the {written_out:,} bytes the agent wrote to stdout were cut here".encode() in stdout
    record = summary(bench).tasks["task-answer-2"]
    assert record.status == "completed"
    assert record.agent_logs_cut == {"agent.stdout.log": written_out - cap, "agent.stderr.log": written_err - cap}
    end = read_events(bench["out"] / "task-answer-2.jsonl")[-1]
    assert end["event"] == "session_end" and end["agent_logs_cut"] == record.agent_logs_cut
    final = [e["text"] for e in read_events(bench["out"] / "task-answer-2.jsonl") if e["event"] == "final_answer"]
    assert len(final) == 1 and final[0].endswith("the answer")  # the answer on stdout survives the cap


#: A line of the copilot's log (``server.__main__``'s format).
COPILOT_LOG_LINE = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING) [\w.]+: ")


def test_the_builtin_agents_copilot_stderr_is_capped_and_the_cut_is_recorded(bench, monkeypatch) -> None:
    # A real copilot at DEBUG writes a line per execute call: a scripted model's 40 calls make it
    # write several times the cap to its stderr (before, copilot.stderr.log kept all of it).
    monkeypatch.setenv("COPILOT_LOG_LEVEL", "DEBUG")
    monkeypatch.setenv("COPILOT_WARM_INDEX", "false")  # nothing routes: no embedding model to load
    calls = 40

    def model(request: dict) -> Reply:
        done = sum(1 for message in request["messages"] if message.get("role") == "tool")
        if done < calls:
            echo = {"server_name": "fx", "tool_name": "echo", "params": {"text": f"call {done}"}}
            return Reply(tool_calls=[ToolCall("execute", echo)])
        return Reply(content="4")

    cap = 2048
    with ScriptedOpenAI(handler=model) as llm:
        args = ("--base-url", llm.base_url, "--api-key", "k", "--model", "m", "--max-agent-log-bytes", str(cap))
        assert run_cli(bench, *args, "--only", "task-answer-2") == 0
    record = summary(bench).tasks["task-answer-2"]
    assert (record.status, record.error, record.turns) == ("completed", None, calls + 1)
    assert record.agent_logs_cut is not None and set(record.agent_logs_cut) == {"copilot.stderr.log"}
    cut = record.agent_logs_cut["copilot.stderr.log"]
    end = read_events(bench["out"] / "task-answer-2.jsonl")[-1]
    assert end["event"] == "session_end" and end["agent_logs_cut"] == record.agent_logs_cut

    log = (bench["out"] / "tasks" / "task-answer-2" / "copilot.stderr.log").read_bytes()
    note = re.search(
        rb"\n\[\.\.\. evaluation\.run: ([\d,]+) of the ([\d,]+) bytes the copilot wrote to stderr were cut here; "
        rb"this log keeps the first 1,024 and the last 1,024 \(--max-agent-log-bytes 2,048\) \.\.\.\]\n",
        log,
    )
    assert note is not None, log[:2000]
    assert int(note[1].replace(b",", b"")) == cut > 0
    assert int(note[2].replace(b",", b"")) == cut + cap  # all it wrote: the head, the cut, the tail
    head, tail = log[: note.start()], log[note.end() :]
    assert len(head) == len(tail) == cap // 2
    assert COPILOT_LOG_LINE.match(head)  # from the copilot's first line on
    assert tail.endswith(b"\n") and b"on the fast path\n" in tail  # to its last: the calls' lines
    assert all(COPILOT_LOG_LINE.match(line) for line in tail.splitlines()[1:])  # (the first one is cut)


def test_task_timeout_is_reported_per_task(bench) -> None:
    assert run_cli(bench, "--agent-cmd", "sleep 60", "--only", "task-answer-2", "--task-timeout", "1") == 0
    record = summary(bench).tasks["task-answer-2"]
    assert (record.status, record.error_kind) == ("timeout", "timeout")
    end = read_events(bench["out"] / "task-answer-2.jsonl")[-1]
    assert end["event"] == "session_end" and "timeout" in end["reason"]


def test_unreachable_model_endpoint_stops_the_run_and_records_no_task(bench, capsys) -> None:
    # Before: every task was recorded as failed (llm_error): a resume skipped them all, and a judge
    # counted the endpoint's outage as the agent's failures.
    code = run_cli(bench, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--only", "task-answer-2", "task-write-1")
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error: the model endpoint check failed before any task ran: cannot reach http://127.0.0.1:9/v1")
    assert "check --base-url / OPENAI_BASE_URL" in err and "None of the 2 pending task(s) was run or recorded" in err
    assert "Traceback" not in err
    assert summary(bench).tasks == {}
    assert not (bench["out"] / "task-answer-2.jsonl").exists()
    # The rerun runs them all: nothing was recorded as finished.
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2", "task-write-1") == 0
    assert {k: r.status for k, r in summary(bench).tasks.items()} == {"task-answer-2": "completed", "task-write-1": "completed"}


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

    # 'notes' cannot start here, so the index cannot cover it: the run goes on only when allowed to.
    args = ("--agent-cmd", agent_cmd(bench), "--only", "task-write-1", "task-answer-2", "--allow-partial-index")
    assert run_cli(bench, *args) == 0
    start = read_events(bench["out"] / "task-write-1.jsonl")[0]
    assert any("notes" in warning and "--allow-partial-index" in warning for warning in start["warnings"])
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
        (["--only", "task-nope"], "--only task-nope: no such task id (the task list holds 3 tasks"),
        (["--only", "task-"], "prefix matches 3 tasks"),
        (["--category", "Gardening"], "unknown category. Categories in the task list: Leisure, Lifestyle, Office"),
        (["--category", "Ofice"], "--category Ofice: unknown category. Did you mean Office?"),
        (["--agent-cmd", "agent {prompt}"], "unknown placeholder"),
        (["--agent", "my-agent"], "run other agents with --agent-cmd"),
        (["--concurrency", "0", "--agent-cmd", "true"], "--concurrency 0"),
        (["--repeats", "0", "--agent-cmd", "true"], "--repeats 0: must be at least 1"),
        (["--limit", "0", "--agent-cmd", "true"], "--limit 0: must be at least 1"),
        (["--task-timeout", "nan", "--agent-cmd", "true"], "--task-timeout nan: must be a positive number of seconds"),
        (["--llm-timeout", "0", "--agent-cmd", "true"], "--llm-timeout 0: must be a positive number of seconds"),
        (["--confirm", "deny", "--agent-cmd", "true"], "--confirm deny: applies to the built-in agent"),
        (["--max-agent-log-bytes", "10", "--agent-cmd", "true"], "--max-agent-log-bytes 10: must be at least 1024"),
    ],
)
def test_bad_arguments_give_one_clear_error(bench, capsys, args, message) -> None:
    assert run_cli(bench, *args) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err


@pytest.mark.parametrize("which", ["tasks", "servers"])
def test_non_utf8_input_files_are_a_clear_error(bench, capsys, which) -> None:
    bench[which].write_bytes(bench[which].read_bytes().replace(b"Summarise", b"R\xe9sum\xe9"))
    if which == "servers":
        bench[which].write_bytes(b'{"mcpServers": {"caf\xe9": {"command": "x"}}}')
    assert run_cli(bench, "--agent-cmd", "true") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bench[which]}: ") and "is not UTF-8 text" in err and "Traceback" not in err


def test_out_of_range_agent_option_names_the_flag(bench, capsys) -> None:
    assert run_cli(bench, "--model", "m", "--base-url", "http://127.0.0.1:9", "--max-tool-chars", "5") == 2
    err = capsys.readouterr().err
    assert "--max-tool-chars 5: Input should be greater than or equal to 100" in err and "Traceback" not in err
    assert run_cli(bench, "--model", "m", "--base-url", "http://127.0.0.1:9", "--temperature", "-1") == 2
    assert "--temperature -1.0: Input should be greater than or equal to 0" in capsys.readouterr().err


def test_missing_task_list_and_no_model(bench, capsys, monkeypatch) -> None:
    monkeypatch.delenv("MODEL", raising=False)
    bench["tasks"] = bench["tmp"] / "nope.json"
    assert run_cli(bench, "--agent-cmd", "true") == 2
    assert "nope.json: task list not found" in capsys.readouterr().err
    bench["tasks"] = bench["files"] / "all_annotations.json"
    assert run_cli(bench) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no model given: pass --model NAME or set MODEL." in err  # the agent takes one model, not a jury
    monkeypatch.delenv("JUDGE_MODEL", raising=False)
    assert run_cli(bench, "--agent-cmd", "true", "--judge") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no model given: pass --judge-model NAME (a comma-separated list makes a jury) or set JUDGE_MODEL." in err


def test_one_run_directory_holds_one_agent(bench, capsys) -> None:
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2") == 0
    # Off a terminal (captured here), each finished task is a line: the bar is drawn only at the end.
    assert "✓ [1/1] task-answer-2 completed" in capsys.readouterr().err
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
    assert "2/2 tasks succeeded" in capsys.readouterr().err


def test_a_bad_judge_tools_file_or_task_id_stops_the_run_before_any_task(bench, capsys) -> None:
    tools = bench["tmp"] / "tools.json"
    tools.write_text(json.dumps({"tools": [{"name": "echo"}]}))
    code = run_cli(bench, "--agent-cmd", agent_cmd(bench), "--judge", "--judge-model", "j", "--judge-base-url",
                   "http://127.0.0.1:9/v1", "--judge-tools", str(tools))
    err = capsys.readouterr().err
    assert code == 2 and f"error: --judge-tools: {tools}: not a catalog snapshot (tools.0.server: Field required)" in err
    entries = json.loads(bench["tasks"].read_text())
    entries[1]["task_id"] = 2
    bench["tasks"].write_text(json.dumps(entries))
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench)) == 2
    err = capsys.readouterr().err
    assert f"error: {bench['tasks']}: entry 2: task_id: Input should be a valid string (got 2)." in err
    assert not (bench["tmp"] / "agent-runs.log").exists()  # no task ran


def test_every_judge_option_is_checked_before_the_first_task(bench, capsys) -> None:
    # Before: a missing --judge-human-labels or an unwritable --judge-out was reported after every
    # task had run, the latter as "pass --out DIR".
    judge = ["--judge", "--judge-model", "j", "--judge-base-url", "http://127.0.0.1:9/v1"]
    missing = bench["tmp"] / "labels.json"
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), *judge, "--judge-human-labels", str(missing)) == 2
    assert f"error: --judge-human-labels: {missing}: human labels not found." in capsys.readouterr().err
    # Each file named by its own option: the advice used to be "pass --tools", which the runner rejects.
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), *judge, "--judge-tools", str(missing)) == 2
    assert f"error: --judge-tools: {missing}: tool list not found (expected a copilot catalog" in capsys.readouterr().err
    in_the_way = bench["tmp"] / "a-file"
    in_the_way.write_text("")
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), *judge, "--judge-out", str(in_the_way / "judge")) == 2
    err = capsys.readouterr().err
    assert f"error: --judge-out {in_the_way / 'judge'}: cannot write there ({in_the_way} is not a directory)" in err
    assert "--out DIR" not in err
    assert not (bench["tmp"] / "agent-runs.log").exists()  # no task ran


def _start_run(
    bench: dict[str, Path], ignore: tuple[signal.Signals, ...], *extra: str
) -> tuple[subprocess.Popen, Path]:
    """A run whose one task's agent waits forever, started as a background job or under nohup
    would be (``ignore``: signals ignored from the start); returns once the agent is running."""
    fifo = bench["tmp"] / "ready.fifo"
    os.mkfifo(fifo)
    pid_file = bench["tmp"] / "agent.pid"
    agent = f"echo $$ > {shlex.quote(str(pid_file))}; echo ready > {shlex.quote(str(fifo))}; sleep 300"

    def ignore_signals() -> None:
        # Also undo what this test process inherited (pytest run under nohup ignores SIGHUP).
        for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN if signum in ignore else signal.SIG_DFL)

    process = subprocess.Popen(
        [sys.executable, "-m", "evaluation.run", "--tasks", str(bench["tasks"]), "--out", str(bench["out"]),
         "--servers", str(bench["servers"]), "--copilot-home", str(bench["home"]),
         "--agent-cmd", agent, "--only", "task-answer-2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore_signals,
    )
    try:
        with fifo.open() as ready:  # blocks until the agent is running
            assert ready.read().strip() == "ready"
    except BaseException:
        process.kill()
        raise
    return process, pid_file


def _assert_stopped_cleanly(bench: dict[str, Path], process: subprocess.Popen, pid_file: Path, err: str) -> None:
    assert process.returncode == 130, err
    assert "rerun the same command to resume" in err and "Traceback" not in err
    agent_pid = int(pid_file.read_text())
    assert not psutil.pid_exists(agent_pid) or psutil.Process(agent_pid).status() == psutil.STATUS_ZOMBIE
    # The interrupted task has no record, so the next run does it again ...
    assert "task-answer-2" not in summary(bench).tasks
    assert read_events(bench["out"] / "task-answer-2.jsonl")[-1]["reason"] == "interrupted"
    # ... and the run's task list exists already, so the README's judge command works on it.
    listed = json.loads((bench["out"] / "tasks.json").read_text())
    assert [entry["task_id"] for entry in listed] == ["task-answer-2"]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_a_background_run_cleanly(bench, stop) -> None:
    # A job started with '&' ignores SIGINT: SIGTERM (CI timeouts, kill) and SIGHUP must do its job.
    process, pid_file = _start_run(bench, ignore=(signal.SIGINT,))
    try:
        process.send_signal(stop)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    _assert_stopped_cleanly(bench, process, pid_file, err)
    assert f"interrupted ({stop.name})" in err
    assert f"finished tasks are saved in {bench['out'] / 'summary.json'};" in " ".join(err.split())


_TWO_SIGTERMS = """
import logging, os, signal, sys
import anyio
from evaluation.run.cli import _stop_on_signal
logging.basicConfig(level=logging.WARNING, format="%(message)s")

async def main() -> None:
    stopped_by: list[str] = []
    async with anyio.create_task_group() as watching:
        with anyio.CancelScope() as work:
            watching.start_soon(_stop_on_signal, work, stopped_by)
            await anyio.wait_all_tasks_blocked()  # the watcher listens
            os.kill(os.getpid(), signal.SIGTERM)
            await anyio.sleep_forever()  # the work, until the first signal stops it
        # Cleaning up after the stopped work (an agent given 5 s to leave): a second signal now.
        os.kill(os.getpid(), signal.SIGTERM)
        with anyio.fail_after(10):
            while "while stopping" not in log.getvalue():
                await anyio.sleep(0.01)
        watching.cancel_scope.cancel()
    print("cleaned up after", stopped_by)

import io
log = io.StringIO()
logging.getLogger().addHandler(logging.StreamHandler(log))
anyio.run(main)
"""


def test_a_second_sigterm_while_the_run_stops_does_not_kill_it_mid_cleanup() -> None:
    """The runner gives a stopped agent 5 s to leave. The signal watcher returned after the first
    SIGTERM, so a second one in that time met the default handler: the runner died by it, leaving
    the agent running and its private config (the run's secrets) in the temporary directory."""
    ran = subprocess.run(
        [sys.executable, "-c", _TWO_SIGTERMS], capture_output=True, text=True, timeout=60, cwd=PROJECT, check=False
    )
    assert ran.returncode == 0, (ran.returncode, ran.stderr)
    assert ran.stdout.strip() == "cleaned up after ['SIGTERM']"
    assert "received SIGTERM while stopping: the stopped tasks are still cleaning up" in ran.stderr


def test_a_second_run_on_the_same_out_stops_before_any_task(bench, capsys) -> None:
    # Started again while the first is still running (another terminal, a nohup job): without a
    # lock both ran every task, each deleting the other's workspace and trajectory mid-task.
    process, pid_file = _start_run(bench, ignore=())
    try:
        assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2") == 2
        err = " ".join(capsys.readouterr().err.split())
        out = bench["out"].resolve()
        assert f"error: another run is using {out} (pid {process.pid}, since " in err
        assert "wait for it to finish (or stop it), or pass another --out." in err
        assert not (bench["tmp"] / "agent-runs.log").exists()  # the second run ran nothing
        assert pid_file.exists() and (out / "tasks" / "task-answer-2" / "workspace").is_dir()  # nor reset the first's
        process.send_signal(signal.SIGTERM)
        _, first_err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, first_err
    # The lock went with its holder: the next run resumes normally.
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2") == 0
    assert (bench["tmp"] / "agent-runs.log").read_text().split() == ["task-answer-2"]


def test_an_interrupted_repeated_run_names_where_its_summaries_are(bench) -> None:
    process, _ = _start_run(bench, (signal.SIGINT,), "--repeats", "2")
    try:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert f"finished tasks are saved in {bench['out'] / 'repeat-*' / 'summary.json'};" in " ".join(err.split())


def test_a_nohup_run_survives_sighup_and_stops_on_sigterm(bench) -> None:
    process, pid_file = _start_run(bench, ignore=(signal.SIGINT, signal.SIGHUP))
    try:
        process.send_signal(signal.SIGHUP)  # ignored, as nohup asked
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    _assert_stopped_cleanly(bench, process, pid_file, err)
    assert "interrupted (SIGTERM)" in err


#: Which (task, repeat) the scripted judge calls a success: task-write-1 always (c=3),
#: task-answer-2 in the first repeat only (c=1), task-missing-3 never (c=0).
REPEAT_SUCCESSES = {("task-write-1", 1), ("task-write-1", 2), ("task-write-1", 3), ("task-answer-2", 1)}


def repeat_judge(request: dict) -> Reply:
    import re  # noqa: PLC0415

    text = json.dumps(request["messages"])
    found = re.search(r"answer for (task-[a-z0-9-]+) in \S*repeat-(\d)", text)
    verdict = found is not None and (found.group(1), int(found.group(2))) in REPEAT_SUCCESSES
    return Reply(content="Thoughts: checked.\nStatus: " + ("success" if verdict else "failure"))


def test_repeats_are_judged_each_and_reported_as_pass_at_k(bench, capsys) -> None:
    agent = "printf 'answer for %s in %s' {task_id} {workspace} > {answer_file}"
    with ScriptedOpenAI(handler=repeat_judge) as judge_llm:
        judge = ["--judge", "--judge-base-url", judge_llm.base_url, "--judge-model", "judge-m", "--judge-api-key", "k",
                 "--judge-no-progress", "--judge-cache-dir", str(bench["tmp"] / "judge-cache")]
        assert run_cli(bench, "--agent-cmd", agent, "--repeats", "3", "--allow-missing-files", *judge) == 0
        requests = len(judge_llm.requests)
        # Off a terminal each task is a line; with repeats it names its repeat (counts restart per repeat).
        lines = capsys.readouterr().err.splitlines()
        for number in (1, 2, 3):
            assert sum(line.startswith(f"✓ repeat-{number} [") for line in lines) == 3, lines
        # A rerun resumes every repeat: no task runs again, no verdict is asked for again.
        assert run_cli(bench, "--agent-cmd", agent, "--allow-missing-files", *judge) == 0
        assert len(judge_llm.requests) == requests
    out = bench["out"]
    assert json.loads((out / "repeats.json").read_text())["repeats"] == ["repeat-1", "repeat-2", "repeat-3"]
    for number in (1, 2, 3):
        repeat = out / f"repeat-{number}"
        assert len(RunSummary.model_validate_json((repeat / "summary.json").read_text()).tasks) == 3
        assert (repeat / "judge" / "report.json").is_file()
    report = json.loads((out / "judge" / "repeats.json").read_text())
    assert report["n_repeats"] == 3 and report["n_tasks"] == 3
    by_task = {t["task_id"]: t for t in report["tasks"]}
    assert [by_task[t]["successes"] for t in ("task-write-1", "task-answer-2", "task-missing-3")] == [3, 1, 0]
    assert by_task["task-answer-2"]["outcomes"] == ["success", "failure", "failure"]
    # Known answers: pass@1 = (1 + 1/3 + 0) / 3; pass@2 = (1 + 2/3 + 0) / 3; pass@3 = 2/3; pass^2 = pass^3 = 1/3.
    assert report["pass_at_1"] == pytest.approx(4 / 9)
    assert report["pass_at_k"] == pytest.approx({"1": 4 / 9, "2": 5 / 9, "3": 2 / 3})
    assert report["pass_hat_k"] == pytest.approx({"1": 4 / 9, "2": 1 / 3, "3": 1 / 3})
    assert report["flaky_tasks"] == 1
    # Success rates per repeat 2/3, 1/3, 1/3: their sample standard deviation.
    assert report["between_repeats_sd"] == pytest.approx((1 / 3) / 3**0.5)
    assert all(r["first_task"] and r["last_task"] for r in report["repeats"])  # the date of each repeat
    assert (out / "judge" / "repeats.html").is_file() and (out / "judge" / "plots" / "pass_k.png").is_file()
    err = capsys.readouterr().err
    assert "3 repeats of 3 tasks: pass@1 44.4%" in err and "pass@3 66.7%, pass^3 33.3%" in err


def test_a_single_run_directory_cannot_take_repeats(bench, capsys) -> None:
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2") == 0
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2", "--repeats", "2") == 2
    assert "holds a single run (summary.json); repeats go into their own directories" in capsys.readouterr().err


@pytest.mark.parametrize("inside", [False, True], ids=["a file", "under a file"])
def test_an_out_path_that_cannot_be_a_directory_is_one_clear_error(bench, capsys, inside) -> None:
    blocker = bench["tmp"] / "taken.txt"
    blocker.write_text("not a directory\n")
    bench["out"] = blocker / "run" if inside else blocker
    assert run_cli(bench, "--agent-cmd", "true") == 2
    err = capsys.readouterr().err
    assert f"--out {bench['out']}: cannot use it as the run directory" in " ".join(err.split())
    assert "Traceback" not in err and blocker.read_text() == "not a directory\n"


# An agent that looks for the runner among its ancestors and reads the runner's environment, as a
# hostile agent or a child server started under it could.
_SNOOPING_AGENT = """
import sys
secret, report, answer = sys.argv[1].encode(), sys.argv[2], sys.argv[3]
pid, seen = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[1]), []
while pid > 1:
    if b"evaluation.run" in open(f"/proc/{pid}/cmdline", "rb").read():
        try:
            seen.append("secret" if secret in open(f"/proc/{pid}/environ", "rb").read() else "blank")
        except OSError:
            seen.append("unreadable")
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
open(report, "w").write(" ".join(seen))
open(answer, "w").write("done")
"""


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc (Linux)")
def test_an_agent_cannot_read_the_runners_secrets(bench) -> None:
    secret = f"sekrit-{os.getpid()}-value"
    script, report = bench["tmp"] / "snoop.py", bench["tmp"] / "snoop.txt"
    script.write_text(_SNOOPING_AGENT, encoding="utf-8")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {secret} {shlex.quote(str(report))} {{answer_file}}"
    result = run_real_cli(
        "evaluation.run", "--tasks", str(bench["tasks"]), "--out", str(bench["out"]), "--servers", str(bench["servers"]),
        "--copilot-home", str(bench["home"]), "--agent-cmd", command, "--only", "task-answer-2",
        env=cli_env(RUNNER_TEST_API_TOKEN=secret),
    )
    assert result.returncode == 0, result.stderr
    # The runner was found among the agent's ancestors (so the check ran), and its secret was not readable.
    seen = report.read_text().split()
    assert seen and "secret" not in seen, seen


@pytest.mark.parametrize("taken", ["summary.json", "tasks.json"])
def test_a_directory_where_the_run_writes_its_files_is_one_error_before_any_task(bench, capsys, taken: str) -> None:
    (bench["out"] / taken).mkdir(parents=True)
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2") == 2
    err = capsys.readouterr().err
    expected = {
        "summary.json": f"error: {bench['out'] / 'summary.json'}: the run summary's place is taken by a directory;",
        "tasks.json": f"error: cannot write the run's task list {bench['out'] / 'tasks.json'} (a directory is in its place);",
    }[taken]
    assert expected in err and "Traceback" not in err
    assert not (bench["tmp"] / "agent-runs.log").exists()  # no task ran


def test_a_summary_that_cannot_be_saved_stops_the_run_with_one_error(bench, capsys) -> None:
    # What a full disk does to the summary's save after a task (the same OSError path).
    (bench["out"] / "summary.json.tmp").mkdir(parents=True)
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench), "--only", "task-answer-2") == 2
    err = capsys.readouterr().err
    assert f"error: cannot save the run summary {bench['out'] / 'summary.json'}: Is a directory." in err
    assert "rerun the same command to resume" in err and "Traceback" not in err


def test_the_summary_table_shows_ids_long_enough_to_tell_apart() -> None:
    from evaluation.run.summary_view import _id_labels

    uuids = ["0b2f0d7e-aaaa-4c1e-9f6e-000000000001", "7c9e6679-7425-40de-944b-e07fc1f90ae7"]
    assert _id_labels(uuids) == {task_id: task_id[:8] + "…" for task_id in uuids}
    # Before, both rows read "task-wri".
    assert _id_labels(["task-write-1", "task-write-2", "other"]) == {
        "task-write-1": "task-write-1", "task-write-2": "task-write-2", "other": "other"
    }
    assert _id_labels(["a-long-shared-prefix-x1", "a-long-shared-prefix-y2"]) == {
        "a-long-shared-prefix-x1": "a-long-shared-prefix-x…", "a-long-shared-prefix-y2": "a-long-shared-prefix-y…"
    }


def test_linked_and_dangling_task_files_cost_no_task(bench) -> None:
    # A dangling link anywhere in the task files failed every task as "workspace" (recorded, so a
    # resume skipped them); a linked directory below the top level was copied empty, silently.
    (bench["tmp"] / "elsewhere").mkdir()
    (bench["tmp"] / "elsewhere" / "shared.txt").write_text("shared text")
    (bench["files"] / "txt" / "linked").symlink_to(bench["tmp"] / "elsewhere")
    (bench["files"] / "txt" / "broken.txt").symlink_to(bench["tmp"] / "nowhere")
    assert run_cli(bench, "--agent-cmd", "cat txt/linked/shared.txt", "--only", "task-write-1", "task-answer-2") == 0
    assert {k: (r.status, r.error) for k, r in summary(bench).tasks.items()} == {
        "task-write-1": ("completed", None), "task-answer-2": ("completed", None),
    }  # fmt: skip
    events = read_events(bench["out"] / "task-answer-2.jsonl")
    assert events[0]["warnings"] == [
        f"{bench['files'] / 'txt' / 'broken.txt'}: a symbolic link to {bench['tmp'] / 'nowhere'}, which leads to no file; "
        "not copied"
    ]
    assert [e["text"] for e in events if e["event"] == "final_answer"] == ["shared text"]


def test_an_input_path_leading_out_of_root_is_refused_with_what_to_fix(bench) -> None:
    # It exists beside the task files, so the check looked there and let the task run without it.
    (bench["files"].parent / "secret.txt").write_text("outside the task files")
    write_tasks(bench["tasks"], [{"task_id": "t-out", "question": "Read /root/../secret.txt", "file_name": "/root/../secret.txt"}])
    assert run_cli(bench, "--agent-cmd", agent_cmd(bench)) == 0
    record = summary(bench).tasks["t-out"]
    assert (record.status, record.error_kind) == ("failed", "missing_files")
    assert record.error == (
        f"input file(s) /root/../secret.txt (outside /root) not found in {bench['files']}; correct the task's "
        "file_name (a path outside /root is never in the workspace) or pass --allow-missing-files to run the task anyway"
    )
    assert not (bench["tmp"] / "agent-runs.log").exists()


def test_the_run_keeps_a_redacted_mcp_config_and_the_agent_gets_the_real_one(bench, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_SECRET_hugging_face_token")
    monkeypatch.setenv("COPILOT_HTTP_TOKEN", "copilot-http-SECRET-token-1234")
    seen = bench["tmp"] / "seen"
    seen.mkdir()
    agent = (
        f"stat -c %a {{mcp_config}} > {seen}/mode; dirname {{mcp_config}} | xargs stat -c %a > {seen}/dir-mode; "
        f"cp {{mcp_config}} {seen}/config.json; echo {{mcp_config}} > {seen}/path; printf done > {{answer_file}}"
    )
    assert run_cli(bench, "--agent-cmd", agent, "--only", "task-answer-2") == 0
    assert summary(bench).tasks["task-answer-2"].status == "completed"
    task_dir = bench["out"] / "tasks" / "task-answer-2"
    kept = json.loads((task_dir / "mcp_config.json").read_text())["mcpServers"]["copilot"]["env"]
    given = json.loads((seen / "config.json").read_text())["mcpServers"]["copilot"]["env"]
    # The agent's copilot gets the token it may need; the stdio copilot has no use for the HTTP server's.
    assert given["HF_TOKEN"] == "hf_SECRET_hugging_face_token" and "COPILOT_HTTP_TOKEN" not in given
    assert kept == {**given, "HF_TOKEN": "***"}
    private = Path((seen / "path").read_text().strip())
    assert bench["out"] not in private.parents and not private.exists()  # outside the run, gone after the task
    assert (seen / "mode").read_text().strip() == "600" and (seen / "dir-mode").read_text().strip() == "700"
    everything = "".join(p.read_text(errors="replace") for p in bench["out"].rglob("*") if p.is_file())
    assert "SECRET" not in everything


def test_verbose_logs_name_the_model_endpoint_without_its_password(bench, capsys, caplog, monkeypatch) -> None:
    import logging

    from index.cli.log_setup import NOISY_LOGGERS

    for name in NOISY_LOGGERS:  # as a fresh process has them (another test's CLI may have quieted them)
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    caplog.set_level(logging.INFO)
    with ScriptedOpenAI() as llm:
        url = llm.base_url.replace("http://", "http://agent:gw-PASSWORD-SECRET@")
        llm.models_body = b'"not a model list"'  # it answered: the probe passes; the chat call is refused
        llm.handler = lambda request: Reply(status=401)
        code = run_cli(bench, "-v", "--base-url", url, "--api-key", "k", "--model", "m", "--only", "task-answer-2")
    assert code == 0  # the task failed (llm_error), the run did not
    err = capsys.readouterr().err
    assert "gw-PASSWORD-SECRET" not in caplog.text and "gw-PASSWORD-SECRET" not in err
    assert "agent:***@127.0.0.1" in err + caplog.text + json.dumps(summary(bench).model_dump(mode="json"))
