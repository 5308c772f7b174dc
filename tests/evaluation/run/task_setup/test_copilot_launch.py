"""How a task launches the copilot: the environment it passes on (and what it keeps back)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evaluation.run.task_setup.copilot_launch import copilot_launch, sweep_stale_agent_configs

MACHINE = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/runner",
    "LANG": "C.UTF-8",
    "SSL_CERT_FILE": "/etc/corp/ca.pem",
    "REQUESTS_CA_BUNDLE": "/etc/corp/ca.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/corp/ca.pem",
    "HTTPS_PROXY": "http://proxy.corp:3128",
    "no_proxy": "localhost,127.0.0.1",
    "UV_INDEX_URL": "https://pypi.corp/simple",
    "COPILOT_TOP_K": "7",
    "COPILOT_TASK_ID": "stale-from-the-runner",
    "OPENAI_API_KEY": "sk-agent-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
}


def launch(tmp_path: Path, **extra: str):
    return copilot_launch(
        servers_file=tmp_path / "servers.json",
        task_id="t1",
        question="q?",
        log_file=tmp_path / "t1.jsonl",
        copilot_home=tmp_path / "home",
        cwd=tmp_path,
        environ={**MACHINE, **extra},
    )


def test_the_copilot_gets_what_its_children_need_tls_proxies_registries(tmp_path: Path) -> None:
    env = launch(tmp_path).env
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "HTTPS_PROXY", "no_proxy", "UV_INDEX_URL",
                 "LANG", "HOME"):
        assert env[name] == MACHINE[name], name
    assert env["PATH"].startswith("/usr/bin:/bin")
    assert env["COPILOT_TOP_K"] == "7"


def test_secrets_and_stale_per_task_settings_stay_behind(tmp_path: Path) -> None:
    env = launch(tmp_path).env
    assert "OPENAI_API_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["COPILOT_TASK_ID"] == "t1"


def test_the_mcp_config_of_external_agents_carries_the_same_environment(tmp_path: Path) -> None:
    spec = launch(tmp_path)
    written = json.loads(spec.write_mcp_config(tmp_path / "mcp.json").read_text())
    assert written["mcpServers"]["copilot"]["env"] == spec.env
    assert written["mcpServers"]["copilot"]["env"]["SSL_CERT_FILE"] == "/etc/corp/ca.pem"


def test_credentials_reach_the_copilot_only_when_a_server_opts_in(tmp_path: Path) -> None:
    machine = {**MACHINE, "HTTPS_PROXY": "http://alice:s3cret@proxy.corp:3128", "NPM_TOKEN": "npm-secret"}
    common = dict(servers_file=tmp_path / "s.json", task_id="t", question="q", log_file=tmp_path / "t.jsonl",
                  copilot_home=None, cwd=tmp_path, environ=machine)
    plain = copilot_launch(**common).env
    assert plain["HTTPS_PROXY"] == "http://proxy.corp:3128" and "NPM_TOKEN" not in plain
    opted = copilot_launch(**common, inherit=["HTTPS_PROXY", "NPM_TOKEN"]).env
    assert opted["HTTPS_PROXY"] == machine["HTTPS_PROXY"] and opted["NPM_TOKEN"] == "npm-secret"


def test_each_tasks_first_routes_wait_for_the_model_unless_the_runner_says_otherwise(tmp_path: Path) -> None:
    # A fresh copilot per task: without the wait its first routes are keyword-only for as long as the
    # model takes to load, so a run's retrieval would depend on the machine's load.
    assert launch(tmp_path).env["COPILOT_ROUTE_MODEL_WAIT"] == "120"
    assert launch(tmp_path, COPILOT_ROUTE_MODEL_WAIT="5").env["COPILOT_ROUTE_MODEL_WAIT"] == "5"


def test_a_run_ranks_without_a_usage_prior_unless_the_runner_asks_for_one(tmp_path: Path) -> None:
    # A prior learned from earlier runs on this machine would change a task's rankings.
    assert launch(tmp_path).env["COPILOT_USAGE_PRIOR_WEIGHT"] == "0"
    assert launch(tmp_path, COPILOT_USAGE_PRIOR_WEIGHT="1.5").env["COPILOT_USAGE_PRIOR_WEIGHT"] == "1.5"


def test_the_written_config_keeps_tokens_and_proxy_passwords_out_and_the_agents_copy_has_them(tmp_path: Path) -> None:
    machine = {**MACHINE, "HF_TOKEN": "hf_SECRET_token", "COPILOT_HTTP_TOKEN": "copilot-http-SECRET-1234",
               "COPILOT_HTTP_PORT": "9999", "HTTPS_PROXY": "http://alice:proxy-SECRET-pw@proxy:3128",
               "https_proxy": "alice:bare-SECRET-pw@proxy:3128"}
    spec = copilot_launch(servers_file=tmp_path / "s.json", task_id="t", question="q", log_file=tmp_path / "t.jsonl",
                          copilot_home=None, cwd=tmp_path, environ=machine, inherit=["HTTPS_PROXY", "https_proxy"])
    # The HTTP server's settings are no use to a stdio copilot: not passed at all.
    assert "COPILOT_HTTP_TOKEN" not in spec.env and "COPILOT_HTTP_PORT" not in spec.env
    written = spec.write_mcp_config(tmp_path / "run" / "mcp_config.json")
    shown = json.loads(written.read_text())["mcpServers"]["copilot"]["env"]
    assert "SECRET" not in written.read_text()
    assert shown["HF_TOKEN"] == "***" and shown["HTTPS_PROXY"] == "http://alice:***@proxy:3128"
    assert shown["https_proxy"] == "proxy:3128"
    with spec.agent_mcp_config(written) as given:
        assert tmp_path not in given.parents
        assert given.stat().st_mode & 0o777 == 0o600 and given.parent.stat().st_mode & 0o777 == 0o700
        assert json.loads(given.read_text())["mcpServers"]["copilot"]["env"] == spec.env
    assert not given.exists() and not given.parent.exists()


def test_a_config_without_secrets_is_given_to_the_agent_as_written(tmp_path: Path) -> None:
    spec = launch(tmp_path)
    written = spec.write_mcp_config(tmp_path / "mcp.json")
    with spec.agent_mcp_config(written) as given:
        assert given == written


def _never_a_pid() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_private_configs_of_killed_runners_are_swept_and_live_ones_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a SIGKILLed runner's private config (the agent's real one, secrets in it) stayed in
    # the temp directory for good; nothing ever removed it.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    dead = tmp_path / f"mcp-copilot-task-{_never_a_pid()}-abc"
    dead.mkdir(mode=0o700)
    (dead / "mcp_config.json").write_text('{"token": "secret"}')
    alive = tmp_path / f"mcp-copilot-task-{os.getpid()}-def"
    alive.mkdir()
    (tmp_path / f"mcp-copilot-task-{_never_a_pid()}-file").write_text("not a directory")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / f"mcp-copilot-task-{_never_a_pid()}-link").symlink_to(target)
    spec = copilot_launch(servers_file=tmp_path / "s.json", task_id="t", question="q", log_file=tmp_path / "t.jsonl",
                          copilot_home=None, cwd=tmp_path, environ={**MACHINE, "HF_TOKEN": "hf_SECRET_token"})
    with spec.agent_mcp_config(tmp_path / "mcp_config.json") as given:
        assert given.parent.parent == tmp_path
        assert sweep_stale_agent_configs() == 1
        assert given.exists()  # this runner's own, in use
    assert not dead.exists() and alive.exists() and target.exists()
    assert (tmp_path / f"mcp-copilot-task-{_never_a_pid()}-file").exists()
    assert sweep_stale_agent_configs() == 0
