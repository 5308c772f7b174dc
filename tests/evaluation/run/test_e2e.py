"""End to end against the REAL copilot (``python -m server``) with fixture child servers:
the built-in agent driven by a scripted tool-calling model over HTTP, an external MCP-client agent
through ``--agent-cmd``, a model endpoint that refuses tools, resume, and judging the result."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import certifi
import pytest

from evaluation.judge.cli import main as judge_main
from evaluation.run.cli import main as run_main
from evaluation.run.models import RunSummary
from tests.evaluation.run.support import path_in, read_events, route_execute_answer, tool_results, write_tasks
from tests.support.scripted_openai import Reply, ScriptedOpenAI, ToolCall

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        importlib.util.find_spec("index.storage.build") is None or importlib.util.find_spec("server.app") is None,
        reason="the copilot server and the index builder are not installed yet",
    ),
]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="module")
def copilot_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A servers file with one fixture server, crawled into a catalog and indexed in a temp home."""
    root = tmp_path_factory.mktemp("e2e")
    home = root / "home"
    servers = root / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {
        "fx": {
            "command": sys.executable,
            "args": [str(FIXTURES / "fixture_server.py"), "--name", "fx"],
            "description": "Fixture server: echo text, add numbers, write files.",
            "category": "Office",
        },
    }}))
    catalog = root / "catalog.json"
    env = {**os.environ, "COPILOT_HOME": str(home), "COPILOT_CATALOG": str(catalog), "HF_HUB_OFFLINE": "1"}
    for command in (
        ["crawl", "--servers", str(servers), "--out", str(catalog)],
        ["build", "--catalog", str(catalog)],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "index", *command], env=env, capture_output=True, text=True, timeout=240, check=False
        )
        assert done.returncode == 0, f"index {command[0]} failed: {done.stderr[-2000:]}"
    files = root / "annotated_data"
    (files / "markdown").mkdir(parents=True)
    (files / "txt").mkdir()
    (files / "txt" / "input.txt").write_text("some input\n")
    tasks = write_tasks(
        files / "all_annotations.json",
        [
            {"task_id": "e2e-write", "question": "Write hello into /root/markdown/hello.md.", "category": "Office",
             "file_name": "/root/txt/input.txt", "steps": "1. write the file"},
            {"task_id": "e2e-relative", "question": "Save the word banana in notes/relative.txt.", "category": "Lifestyle"},
        ],
    )
    return {"home": home, "servers": servers, "catalog": catalog, "tasks": tasks, "root": root}


@pytest.fixture()
def copilot_vars(copilot_env, monkeypatch) -> dict[str, Path]:
    monkeypatch.setenv("COPILOT_HOME", str(copilot_env["home"]))
    monkeypatch.setenv("COPILOT_CATALOG", str(copilot_env["catalog"]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return copilot_env


@pytest.fixture()
def without_search(monkeypatch) -> None:
    """For tests whose agents never route: the tasks' copilots (they pass COPILOT_* on) do not load
    the embedding model in the background, seconds of CPU each that nothing here would use."""
    monkeypatch.setenv("COPILOT_WARM_INDEX", "false")


def run(env: dict[str, Path], out: Path, *extra: str, tasks: Path | None = None) -> int:
    return run_main([
        "--tasks", str(tasks or env["tasks"]), "--out", str(out), "--servers", str(env["servers"]),
        "--copilot-home", str(env["home"]), "--task-timeout", "180", *extra,
    ])


def model(request: dict) -> Reply:
    """Writes the file the question names (an absolute, mapped path, or a path relative to the
    server's working directory); answers with what the tool returned."""
    question = request["messages"][1]["content"]
    if "hello.md" in question:
        handler = route_execute_answer(
            "fx", "write_file", lambda q: {"path": path_in(q, "hello.md"), "text": "hello"},
            answer=lambda r: f"Wrote {tool_results(r)[-1]}",
        )
    else:
        handler = route_execute_answer(
            "fx", "write_file", {"path": "notes/relative.txt", "text": "banana"},
            answer=lambda r: f"Saved to {tool_results(r)[-1]}",
        )
    return handler(request)


def test_builtin_agent_runs_tasks_through_the_real_copilot_and_is_judged(copilot_vars, tmp_path) -> None:
    env = copilot_vars
    out = tmp_path / "run"
    with ScriptedOpenAI(handler=model) as llm:
        assert run(env, out, "--base-url", llm.base_url, "--api-key", "k", "--model", "scripted-m", "--concurrency", "2") == 0
        requests_after_first_run = len(llm.requests)
        offered = {tool["function"]["name"]: tool["function"] for tool in llm.requests[0]["tools"]}
        # Resume: everything finished, so nothing runs and the model is not called again.
        assert run(env, out, "--base-url", llm.base_url, "--api-key", "k", "--model", "scripted-m") == 0
        assert len(llm.requests) == requests_after_first_run

    # The model sees the copilot's route and execute exactly as the copilot publishes them.
    assert set(offered) == {"route", "execute"}
    assert "query" in offered["route"]["parameters"]["properties"] and offered["route"]["description"]
    assert {"server_name", "tool_name"} <= set(offered["execute"]["parameters"]["required"])
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    assert {k: (r.status, r.error) for k, r in summary.tasks.items()} == {
        "e2e-write": ("completed", None), "e2e-relative": ("completed", None),
    }
    assert summary.tasks["e2e-write"].turns == 3 and summary.tasks["e2e-write"].tool_calls == 2
    assert summary.catalog_hash and summary.model == "scripted-m"

    workspace = out / "tasks" / "e2e-write" / "workspace"
    events = read_events(out / "e2e-write.jsonl")
    kinds = [e["event"] for e in events]
    starts = [e for e in events if e["event"] == "session_start"]
    assert starts[0]["agent"] == "copilot" and starts[0]["model"] == "scripted-m"  # the runner's, first
    assert starts[0]["catalog_hash"] == summary.catalog_hash
    assert any(s.get("task_id") == "e2e-write" and s is not starts[0] for s in starts)  # the copilot's own
    route = next(e for e in events if e["event"] == "route")
    assert ("fx", "write_file") in {(hit["server"], hit["tool"]) for hit in route["results"]}
    execute = next(e for e in events if e["event"] == "execute")
    assert (execute["server"], execute["tool"]) == ("fx", "write_file")
    assert execute["params"]["path"] == str(workspace / "markdown" / "hello.md")
    assert kinds.count("usage") == 3
    answer = next(e for e in events if e["event"] == "final_answer")
    assert answer["text"] == f"Wrote {workspace / 'markdown' / 'hello.md'}"
    changes = next(e for e in events if e["event"] == "workspace")
    assert [(f["path"], f["change"], f["preview"]) for f in changes["files"]] == [
        ("/root/markdown/hello.md", "created", "hello")
    ]
    assert kinds[-1] == "session_end" and kinds.index("route") < kinds.index("final_answer") < kinds.index("workspace")
    # Isolation: the file exists in this task's workspace only.
    assert (workspace / "markdown" / "hello.md").read_text() == "hello"
    assert not (out / "tasks" / "e2e-relative" / "workspace" / "markdown" / "hello.md").exists()
    assert not Path("/root/markdown/hello.md").exists()
    # A child server writing relative to its working directory writes into the task's workspace.
    relative = read_events(out / "e2e-relative.jsonl")
    other = out / "tasks" / "e2e-relative" / "workspace"
    assert next(e for e in relative if e["event"] == "final_answer")["text"] == f"Saved to {other / 'notes' / 'relative.txt'}"
    assert [f["path"] for f in next(e for e in relative if e["event"] == "workspace")["files"]] == ["/root/notes/relative.txt"]
    assert not (Path.cwd() / "notes" / "relative.txt").exists()

    # The produced run is judged by evaluation.judge, end to end.
    with ScriptedOpenAI(handler=lambda request: Reply(content="The file was written.\nStatus: success")) as judge_llm:
        code = judge_main([
            str(out), "--tasks", str(out / "tasks.json"), "--base-url", judge_llm.base_url, "--api-key", "k",
            "--model", "judge-m", "--no-progress", "--cache-dir", str(tmp_path / "judge-cache"),
        ])
        judge_prompts = [json.dumps(r["messages"]) for r in judge_llm.requests]
    assert code == 0
    verdicts = {json.loads(line)["task_id"]: json.loads(line)["verdict"]
                for line in (out / "judge" / "verdicts.jsonl").read_text().splitlines()}
    assert verdicts == {"e2e-write": "success", "e2e-relative": "success"}
    assert any("Wrote " in prompt and "write_file" in prompt for prompt in judge_prompts)


def test_external_mcp_agent_through_agent_cmd(copilot_vars, tmp_path) -> None:
    env = copilot_vars
    out = tmp_path / "run"
    agent = (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'mcp_agent.py'))} --config {{mcp_config}} "
        "--question-file {question_file} --answer-file {answer_file} "
        "--execute fx/write_file --param text=hello --path-param path"
    )
    assert run(env, out, "--agent-cmd", agent, "--agent", "fixture-agent", "--only", "e2e-write") == 0
    record = RunSummary.model_validate_json((out / "summary.json").read_text()).tasks["e2e-write"]
    stderr = (out / "tasks" / "e2e-write" / "agent.stderr.log").read_text()
    assert (record.status, record.error) == ("completed", None), stderr
    workspace = out / "tasks" / "e2e-write" / "workspace"
    events = read_events(out / "e2e-write.jsonl")
    assert [e["agent"] for e in events if e["event"] == "session_start" and "agent" in e][:1] == ["fixture-agent"]
    assert {e["event"] for e in events} >= {"session_start", "route", "execute", "final_answer", "workspace", "session_end"}
    execute = next(e for e in events if e["event"] == "execute")
    assert execute["params"] == {"text": "hello", "path": str(workspace / "markdown" / "hello.md")}
    answer = next(e for e in events if e["event"] == "final_answer")
    assert answer["text"].startswith("copilot copilot lists") and "execute fx/write_file" in answer["text"]
    changes = next(e for e in events if e["event"] == "workspace")
    assert [f["path"] for f in changes["files"]] == ["/root/markdown/hello.md"]
    assert record.tool_calls == 2


HOME_PROBES = ("HOME", "TMPDIR", "npm_config_cache", "UV_CACHE_DIR")


def home_writer(name: str) -> Callable[[dict], Reply]:
    """A model that writes ``~/name`` through the fixture server, then asks the same child for its
    environment, and answers with every result, one a line."""

    def handler(request: dict) -> Reply:
        done = len(tool_results(request))
        if done == 0:
            call = {"server_name": "fx", "tool_name": "write_home_file", "params": {"name": name, "text": "kept"}}
            return Reply(tool_calls=[ToolCall("execute", call)])
        if done < 1 + len(HOME_PROBES):
            probe = {"server_name": "fx", "tool_name": "get_env", "params": {"name": HOME_PROBES[done - 1]}}
            return Reply(tool_calls=[ToolCall("execute", probe)])
        return Reply(content="\n".join(tool_results(request)))

    return handler


def test_a_child_writing_to_home_writes_into_the_task_not_the_real_home(copilot_vars, without_search, tmp_path) -> None:
    env = copilot_vars
    out = tmp_path / "run"
    tasks = write_tasks(tmp_path / "home-task" / "all_annotations.json", [
        {"task_id": "e2e-home", "question": "Keep a note in your home directory.", "category": "Lifestyle"},
    ])
    name = f"e2e-home-{uuid.uuid4().hex}.txt"
    real_home = Path.home()
    try:
        with ScriptedOpenAI(handler=home_writer(name)) as llm:
            assert run(env, out, "--base-url", llm.base_url, "--api-key", "k", "--model", "m", tasks=tasks) == 0
        written_in_real_home = (real_home / name).exists()
    finally:
        (real_home / name).unlink(missing_ok=True)
    record = RunSummary.model_validate_json((out / "summary.json").read_text()).tasks["e2e-home"]
    assert (record.status, record.error) == ("completed", None)
    task_dir = (out / "tasks" / "e2e-home").resolve()
    answer = next(e for e in read_events(out / "e2e-home.jsonl") if e["event"] == "final_answer")["text"]
    written, home, tmpdir, npm_cache, uv_cache = answer.splitlines()
    assert written == str(task_dir / "workspace" / name)
    assert (task_dir / "workspace" / name).read_text() == "kept"
    assert not written_in_real_home
    assert home == str(task_dir / "workspace")
    # HOME is the task's /root, as in LiveMCPBench's container: the judge sees what landed there.
    changes = next(e for e in read_events(out / "e2e-home.jsonl") if e["event"] == "workspace")
    assert tmpdir == str(task_dir / "work" / "fx" / "tmp")
    # The package caches stay the real, shared ones: npx/uvx do not download again per task.
    expected_npm = os.environ.get("npm_config_cache") or os.environ.get("NPM_CONFIG_CACHE") or str(real_home / ".npm")
    assert npm_cache == expected_npm
    uv = subprocess.run([Path(sys.executable).with_name("uv"), "cache", "dir"], capture_output=True, text=True,
                        timeout=30, check=True)
    assert uv_cache == uv.stdout.strip()
    # The child's stderr log is the task's too; the file saved in the home is the only listed output.
    assert (task_dir / "children" / "fx.log").is_file()
    assert [f["path"] for f in changes["files"]] == [f"/root/{name}"]


def test_endpoint_refusing_tools_is_a_per_task_failure(copilot_vars, without_search, tmp_path, capsys) -> None:
    env = copilot_vars
    out = tmp_path / "run"
    refusal = Reply(status=400, body={"error": {"message": "this model does not support tools", "code": 400}})
    with ScriptedOpenAI(handler=lambda request: refusal) as llm:
        assert run(env, out, "--base-url", llm.base_url, "--model", "no-tools", "--only", "e2e-relative") == 0
    record = RunSummary.model_validate_json((out / "summary.json").read_text()).tasks["e2e-relative"]
    assert (record.status, record.error_kind) == ("failed", "tools_refused")
    assert "does not support tools" in (record.error or "")
    events = read_events(out / "e2e-relative.jsonl")
    assert not [e for e in events if e["event"] == "final_answer"]
    assert events[-1]["event"] == "session_end" and "tools_refused" in events[-1]["reason"]
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out


# A real CA file: the runner's own HTTPS clients load SSL_CERT_FILE too.
MACHINE_SETTINGS = {
    "SSL_CERT_FILE": certifi.where(),
    "NODE_EXTRA_CA_CERTS": certifi.where(),
    "HTTPS_PROXY": "http://proxy.corp.test:3128",
}
ENV_PROBES = (*MACHINE_SETTINGS, "OPENAI_API_KEY")


def env_prober(request: dict) -> Reply:
    """A model that asks the fixture child for each probed variable, then answers with them."""
    done = len(tool_results(request))
    if done < len(ENV_PROBES):
        probe = {"server_name": "fx", "tool_name": "get_env", "params": {"name": ENV_PROBES[done]}}
        return Reply(tool_calls=[ToolCall("execute", probe)])
    return Reply(content="\n".join(tool_results(request)))


def strict_host_reading(variable: str) -> str:
    """An ``--agent-cmd`` host that starts the copilot from ``{mcp_config}`` with nothing but the
    config's environment and answers with what fx/get_env says of ``variable``."""
    return (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'mcp_agent.py'))} --config {{mcp_config}} "
        "--question-file {question_file} --answer-file {answer_file} --strict-env --no-route "
        f"--execute fx/get_env --param name={variable}"
    )


def final_answer(out: Path, task: str = "e2e-relative") -> str:
    return next(e for e in read_events(out / f"{task}.jsonl") if e["event"] == "final_answer")["text"]


def test_children_get_the_machine_s_tls_and_proxy_settings_but_no_secrets(
    copilot_vars, without_search, tmp_path, monkeypatch
) -> None:
    """Before: the copilot got only COPILOT_*/HF_*, the SDK's client then kept HOME/PATH/…, and
    every npx/uvx child behind a TLS-intercepting proxy failed (server_unavailable)."""
    env = copilot_vars
    for name, value in MACHINE_SETTINGS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-runner-secret")
    out = tmp_path / "run"
    with ScriptedOpenAI(handler=env_prober) as llm:
        assert run(env, out, "--base-url", llm.base_url, "--model", "m", "--only", "e2e-relative") == 0
    answer = next(e for e in read_events(out / "e2e-relative.jsonl") if e["event"] == "final_answer")["text"]
    assert answer.splitlines() == [*MACHINE_SETTINGS.values(), "<unset>"]

    # The same through {mcp_config}, for a host that passes nothing but the config's env.
    external = tmp_path / "external"
    assert run(env, external, "--agent-cmd", strict_host_reading("NODE_EXTRA_CA_CERTS"), "--only", "e2e-relative") == 0
    assert final_answer(external).endswith(f"execute fx/get_env: {certifi.where()}")


def test_a_server_that_takes_a_placeholders_value_starts_in_every_task(
    copilot_vars, without_search, tmp_path, monkeypatch
) -> None:
    """An entry's ``"env": {"FX_ACCOUNT": "${FX_ACCOUNT}"}`` (the README's way to hand a server a
    key): the task's copilot, started by a strict host with nothing but its config's environment,
    switched the server off in every task ("FX_ACCOUNT not set"). The run's copy of the config
    masks the value, as the copilot masks placeholders everywhere."""
    env = dict(copilot_vars)
    entry = json.loads(env["servers"].read_text())["mcpServers"]["fx"]
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"fx": {**entry, "env": {"FX_ACCOUNT": "${FX_ACCOUNT}"}}}}))
    env["servers"] = servers
    monkeypatch.setenv("FX_ACCOUNT", "acct-7f3e9c")
    out = tmp_path / "run"
    assert run(env, out, "--agent-cmd", strict_host_reading("FX_ACCOUNT"), "--only", "e2e-relative") == 0
    assert final_answer(out).endswith("execute fx/get_env: acct-7f3e9c")
    shown = json.loads((out / "tasks" / "e2e-relative" / "mcp_config.json").read_text())
    assert shown["mcpServers"]["copilot"]["env"]["FX_ACCOUNT"] == "***"


def deleter(request: dict) -> Reply:
    """A model that deletes an item (a destructive tool) and reports what execute said."""
    if not tool_results(request):
        call = {"server_name": "fx", "tool_name": "delete_item", "params": {"item_id": "old-report"}}
        return Reply(tool_calls=[ToolCall("execute", call)])
    return Reply(content=tool_results(request)[-1])


@pytest.mark.parametrize(
    ("policy", "answered", "result"),
    [
        (None, "approved", "deleted old-report"),
        ("deny", "declined", "The user declined to run fx/delete_item"),
        ("ask", None, "Confirmation required"),
    ],
)
def test_confirmations_follow_the_runner_s_policy_and_are_counted(
    copilot_vars, without_search, tmp_path, policy, answered, result
) -> None:
    env = copilot_vars
    out = tmp_path / "run"
    extra = ["--confirm", policy] if policy else []
    with ScriptedOpenAI(handler=deleter) as llm:
        assert run(env, out, "--base-url", llm.base_url, "--model", "m", "--only", "e2e-relative", *extra) == 0
    events = read_events(out / "e2e-relative.jsonl")
    assert events[0]["confirm"] == (policy or "approve")  # the policy is part of the record
    answer = next(e for e in events if e["event"] == "final_answer")["text"]
    assert result in answer
    confirmations = [e for e in events if e["event"] == "confirmation"]
    execute = next(e for e in events if e["event"] == "execute")
    if answered is None:  # no elicitation: the agent got the confirm-token message
        assert confirmations == [] and execute["error_kind"] == "confirmation_required"
    else:
        assert [(c["answer"], c["server"], c["tool"]) for c in confirmations] == [(answered, "fx", "delete_item")]
    with ScriptedOpenAI(handler=lambda request: Reply(content="Status: success")) as judge_llm:
        assert judge_main([
            str(out), "--tasks", str(out / "tasks.json"), "--base-url", judge_llm.base_url, "--model", "j",
            "--no-progress", "--cache-dir", str(tmp_path / "cache"),
        ]) == 0
    report = json.loads((out / "judge" / "report.json").read_text())
    row = next(r for r in report["tasks"] if r["task_id"] == "e2e-relative")
    assert row["confirmations"] == {answered or "token": 1}
    assert report["confirmations"]["requested"] == 1 and report["confirmations"]["policy"] == [policy or "approve"]


def test_a_fresh_home_is_indexed_before_the_first_task(copilot_vars, tmp_path, monkeypatch) -> None:
    """Before: a fresh COPILOT_HOME answered every route with 'no tool index'."""
    env = copilot_vars
    fresh = tmp_path / "fresh-home"
    monkeypatch.setenv("COPILOT_HOME", str(fresh))
    servers = json.loads(env["servers"].read_text())
    # 'fy' is not in the catalog: the runner crawls it; 'fx' comes from the catalog snapshot.
    servers["mcpServers"]["fy"] = {**servers["mcpServers"]["fx"], "args": [str(FIXTURES / "fixture_server.py"), "--name", "fy"]}
    both = tmp_path / "servers.json"
    both.write_text(json.dumps(servers))
    out = tmp_path / "run"
    with ScriptedOpenAI(handler=model) as llm:
        code = run_main([
            "--tasks", str(env["tasks"]), "--out", str(out), "--servers", str(both), "--copilot-home", str(fresh),
            "--task-timeout", "180", "--base-url", llm.base_url, "--model", "m", "--only", "e2e-relative",
        ])
    assert code == 0
    summary = RunSummary.model_validate_json((out / "summary.json").read_text())
    assert summary.index is not None and summary.index.indexed_now == ["fx", "fy"] and summary.index.missing == {}
    route = next(e for e in read_events(out / "e2e-relative.jsonl") if e["event"] == "route")
    assert route.get("error") is None and {hit["server"] for hit in route["results"]} <= {"fx", "fy"}
    assert route["results"]


def test_tasks_do_not_start_on_an_index_that_misses_a_server(copilot_vars, tmp_path, capsys) -> None:
    env = copilot_vars
    servers = json.loads(env["servers"].read_text())
    servers["mcpServers"]["broken"] = {"command": str(tmp_path / "no-such-program")}
    broken = tmp_path / "servers.json"
    broken.write_text(json.dumps(servers))
    out = tmp_path / "run"
    with ScriptedOpenAI(handler=model) as llm:
        code = run_main([
            "--tasks", str(env["tasks"]), "--out", str(out), "--servers", str(broken), "--copilot-home", str(env["home"]),
            "--base-url", llm.base_url, "--model", "m", "--only", "e2e-relative",
        ])
        assert not llm.requests  # no task started
    assert code == 2
    err = capsys.readouterr().err
    assert "does not cover 1 of the 2 server(s)" in err and "broken:" in err and "--allow-partial-index" in err
    assert "Traceback" not in err
