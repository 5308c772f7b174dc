"""``--agent-cmd``: shell-safe templating, missing programs, answers, failures and timeouts."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from evaluation.run.agents.external_agent import (
    PLACEHOLDERS,
    check_template,
    missing_program,
    render_command,
    run_external_agent,
)
from index.errors import ConfigError

pytestmark = pytest.mark.timeout(60)

HOSTILE = "What's in /root/x? $(touch pwned) `touch pwned2`; rm -rf / \"quoted\" {braces}\nsecond line"


def test_placeholders_are_substituted_shell_safely(tmp_path: Path) -> None:
    values = {name: f"<{name}>" for name in PLACEHOLDERS} | {"question": HOSTILE}
    command = render_command("printf '%s' {question} > out.txt; echo {task_id}", values)
    subprocess.run(["/bin/sh", "-c", command], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "out.txt").read_text() == HOSTILE
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_unknown_placeholders_and_malformed_templates_are_rejected() -> None:
    check_template("agent --q {question} --config {mcp_config} --literal '{{json}}'")
    with pytest.raises(ConfigError, match=r"unknown placeholder\(s\) \{prompt\}.*known: \{question\}"):
        check_template("agent {prompt}")
    with pytest.raises(ConfigError, match="malformed template"):
        check_template("agent {question")
    with pytest.raises(ConfigError, match="empty"):
        check_template("   ")


def test_missing_program_is_detected_before_running(tmp_path: Path) -> None:
    assert missing_program("definitely-not-an-agent-xyz {question}") == "agent program 'definitely-not-an-agent-xyz' is not on PATH"
    assert missing_program(f"{tmp_path}/nope.sh {{question}}") == f"agent program '{tmp_path}/nope.sh' does not exist"
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    assert "not executable" in (missing_program(f"{script} {{question}}") or "")
    script.chmod(0o755)
    assert missing_program(f"{script} {{question}}") is None
    assert missing_program("FOO=1 sh -c 'echo {question}'") is None
    assert missing_program("cd {workspace} && agent") is None  # the shell decides


async def run(tmp_path: Path, command: str, timeout: float = 30.0):
    answer_file = tmp_path / "answer.txt"
    result = await run_external_agent(
        command,
        cwd=tmp_path,
        env=dict(os.environ),
        stdout_path=tmp_path / "stdout.log",
        stderr_path=tmp_path / "stderr.log",
        answer_file=answer_file,
        timeout=timeout,
    )
    return result


async def test_answer_file_wins_over_stdout(tmp_path: Path) -> None:
    result = await run(tmp_path, f"echo chatter; printf 'the answer' > {shlex.quote(str(tmp_path / 'answer.txt'))}")
    assert (result.answer, result.answer_source, result.error) == ("the answer", "answer_file", None)
    assert (tmp_path / "stdout.log").read_text() == "chatter\n"


async def test_stdout_is_the_answer_without_an_answer_file(tmp_path: Path) -> None:
    result = await run(tmp_path, "echo 'forty two'; echo 'progress noise' >&2")
    assert (result.answer, result.answer_source, result.exit_code) == ("forty two", "stdout", 0)
    assert (tmp_path / "stderr.log").read_text() == "progress noise\n"


async def test_a_flood_on_stdout_is_read_bounded_keeping_its_end(tmp_path: Path) -> None:
    from evaluation.run.agents.external_agent import MAX_STDOUT_ANSWER_BYTES  # noqa: PLC0415
    from evaluation.run.runner import MAX_ANSWER_CHARS, _bounded_answer  # noqa: PLC0415

    flood = 3 * MAX_STDOUT_ANSWER_BYTES
    result = await run(tmp_path, f"head -c {flood} /dev/zero | tr '\\0' x; echo; echo 'the answer'")
    assert result.answer is not None and result.answer.endswith("the answer")
    assert result.answer.startswith(f"[... the first {flood + 12 - MAX_STDOUT_ANSWER_BYTES:,} bytes of the agent's output omitted")
    assert len(result.answer) < MAX_STDOUT_ANSWER_BYTES + 100
    logged = _bounded_answer(result.answer)  # what the trajectory's final_answer holds
    assert len(logged) < MAX_ANSWER_CHARS + 100 and logged.endswith("characters cut]")


async def test_headless_json_output_gives_answer_usage_and_cost(tmp_path: Path) -> None:
    payload = {
        "type": "result", "subtype": "success", "is_error": False, "result": "Paris",
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 100, "cache_read_input_tokens": 50, "output_tokens": 7},
        "modelUsage": {"claude-sonnet-4": {}},
    }
    result = await run(tmp_path, f"printf '%s' {shlex.quote(json.dumps(payload))}")
    assert result.answer == "Paris"
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.cost) == (150, 7, 0.0123)
    assert result.usage.model == "claude-sonnet-4"


@pytest.mark.parametrize("usage", [{"total_cost_usd": -1.0}, {"total_cost_usd": 1e300}, {"usage": {"input_tokens": "many"}}])
async def test_an_unusable_usage_report_loses_the_usage_not_the_answer(tmp_path: Path, usage: dict[str, Any]) -> None:
    # A NaN-free but absurd cost raised inside the runner (Usage refuses it); the answer was lost.
    payload = {"type": "result", "is_error": False, "result": "Paris", "usage": {"output_tokens": 7}, **usage}
    result = await run(tmp_path, f"printf '%s' {shlex.quote(json.dumps(payload))}")
    assert result.answer == "Paris" and result.usage is None and result.error is None


async def test_failing_agent_is_a_failed_task_with_its_stderr(tmp_path: Path) -> None:
    result = await run(tmp_path, "echo partial; echo 'boom: bad flag' >&2; exit 3")
    assert result.error_kind == "agent_failed" and result.exit_code == 3
    assert "status 3" in (result.error or "") and "boom: bad flag" in (result.error or "")
    assert result.answer is None  # partial stdout of a crashed agent is not an answer


async def test_command_unknown_to_the_shell(tmp_path: Path) -> None:
    result = await run(tmp_path, "no-such-agent-program-xyz --flag")
    assert result.error_kind == "agent_not_found" and "exit 127" in (result.error or "")


async def test_agent_without_answer(tmp_path: Path) -> None:
    result = await run(tmp_path, "true")
    assert result.error_kind == "no_answer" and result.answer is None


async def test_timeout_kills_the_agent_and_everything_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # The agent starts a long-lived grandchild in its own session (as MCP hosts start servers),
    # then never finishes on its own.
    command = f"setsid sleep 300 & echo $! > {shlex.quote(str(pid_file))}; wait"
    # 5 s: the shell must have written the grandchild's pid, which a loaded machine may take seconds to do.
    result = await run(tmp_path, command, timeout=5.0)
    assert result.timed_out and result.error_kind == "timeout"
    assert "within 5 s" in (result.error or "")
    child = int(pid_file.read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


async def test_a_process_that_left_the_agents_session_and_tree_is_stopped_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "escaped.pid"
    # Started in its own session, then orphaned when the agent exits at once: neither in the agent's
    # process group nor in its tree any more, only its inherited environment tells where it came from.
    command = (
        f"setsid sh -c 'echo $$ > {shlex.quote(str(pid_file))}; exec sleep 300' & "
        f"while [ ! -s {shlex.quote(str(pid_file))} ]; do :; done; echo answer"
    )
    result = await run(tmp_path, command, timeout=30.0)
    assert (result.answer, result.error) == ("answer", None)
    escaped = int(pid_file.read_text())
    assert not psutil.pid_exists(escaped) or psutil.Process(escaped).status() == psutil.STATUS_ZOMBIE


async def test_a_flooding_agents_logs_keep_their_head_and_tail_within_the_cap(tmp_path: Path) -> None:
    # A real process writing 20 MB to each stream, far past the default cap, then failing: the
    # runner's disk holds the head and the tail of each, and the error still quotes the last stderr line.
    from evaluation.run.agents.bounded_log import DEFAULT_MAX_AGENT_LOG_BYTES  # noqa: PLC0415

    flood = 20_000_000
    command = (
        f"echo out-start; head -c {flood} /dev/zero | tr '\\0' x; echo; echo out-end; "
        f"echo err-start >&2; head -c {flood} /dev/zero | tr '\\0' y >&2; echo >&2; echo 'fatal: gave up' >&2; exit 4"
    )
    result = await run(tmp_path, command)
    assert (result.exit_code, result.error_kind) == (4, "agent_failed")
    assert "fatal: gave up" in (result.error or "")
    for name, first, last in (("stdout.log", b"out-start\n", b"x\nout-end\n"), ("stderr.log", b"err-start\n", b"y\nfatal: gave up\n")):
        data = (tmp_path / name).read_bytes()
        assert len(data) <= DEFAULT_MAX_AGENT_LOG_BYTES + 300, name
        assert data.startswith(first) and data.endswith(last), name
        cut = result.logs_cut[name]
        assert cut.head + cut.tail == DEFAULT_MAX_AGENT_LOG_BYTES and cut.cut == cut.written - DEFAULT_MAX_AGENT_LOG_BYTES
        assert f"{cut.cut:,} of the {cut.written:,} bytes the agent wrote" in data.decode()


async def test_an_answer_on_stdout_is_read_from_a_capped_logs_tail(tmp_path: Path) -> None:
    flood = 3_000_000
    answer_file = tmp_path / "answer.txt"
    result = await run_external_agent(
        f"head -c {flood} /dev/zero | tr '\\0' x; echo; echo 'the answer'",
        cwd=tmp_path, env=dict(os.environ), stdout_path=tmp_path / "stdout.log", stderr_path=tmp_path / "stderr.log",
        answer_file=answer_file, timeout=30.0, max_log_bytes=4096,
    )  # fmt: skip
    cut = result.logs_cut["stdout.log"]
    assert (cut.written, cut.tail) == (flood + 12, 2048)
    # Only the agent's own bytes (the tail), never the runner's note or the head before it.
    assert result.answer == f"[... the first {flood + 12 - 2048:,} bytes of the agent's output omitted ...]\n" + "x" * 2036 + "\nthe answer"
    assert result.error is None and result.logs_cut.keys() == {"stdout.log"}


async def test_output_under_the_cap_is_logged_whole_and_nothing_is_recorded_as_cut(tmp_path: Path) -> None:
    result = await run(tmp_path, "printf 'abc'; printf 'def' >&2")
    assert (tmp_path / "stdout.log").read_bytes() == b"abc" and (tmp_path / "stderr.log").read_bytes() == b"def"
    assert result.logs_cut == {} and result.answer == "abc"


@pytest.mark.parametrize(
    "command",
    [
        "set -e; echo 4", "ulimit -t 600; echo 4", ". /dev/null && echo 4", "(cd {workspace} && echo 4)",
        "trap 'echo bye >&2' EXIT; echo 4", "umask 022; echo 4", "{{ echo 4; }}", "eval echo 4", ": ; echo 4",
        "export A=1; echo 4", "f() {{ echo 4; }}; f", "true;echo 4",
    ],
)  # fmt: skip
def test_commands_starting_with_shell_builtins_or_syntax_are_left_to_the_shell(tmp_path: Path, command: str) -> None:
    # Each was refused before any task ran ("agent program 'set' is not on PATH"), though /bin/sh runs it.
    assert missing_program(command) is None
    rendered = render_command(command, {name: str(tmp_path) for name in PLACEHOLDERS})
    assert subprocess.run(["/bin/sh", "-c", rendered], capture_output=True, text=True, timeout=30).stdout.strip() == "4"


def test_a_missing_program_after_shell_syntax_is_still_named() -> None:
    assert missing_program("no-such-agent-xyz;echo 4") == "agent program 'no-such-agent-xyz' is not on PATH"


@pytest.mark.timeout(30)  # before the fix the runner blocked for good opening the pipe: this bounds that
async def test_a_named_pipe_left_at_the_answer_file_is_not_read(tmp_path: Path, caplog) -> None:
    answer_file = shlex.quote(str(tmp_path / "answer.txt"))
    result = await run(tmp_path, f"mkfifo {answer_file}; echo 4")
    assert (result.answer, result.answer_source, result.error) == ("4", "stdout", None)
    assert "is a named pipe, not a regular file, so it was not read" in caplog.text
    (tmp_path / "answer.txt").unlink()
    result = await run(tmp_path, f"mkfifo {answer_file}")
    assert result.error_kind == "no_answer"
    assert result.error == (
        "the agent exited without an answer (its answer file is a named pipe, not a regular file, so it was not "
        "read; empty stdout)"
    )


async def test_a_symbolic_link_at_the_answer_file_is_not_followed(tmp_path: Path) -> None:
    # Followed, it would copy whatever it names, read with the runner's rights, into the trajectory.
    (tmp_path / "secret.txt").write_text("the runner's secret")
    answer_file = shlex.quote(str(tmp_path / "answer.txt"))
    result = await run(tmp_path, f"ln -s secret.txt {answer_file}; echo 4")
    assert (result.answer, result.answer_source, result.error) == ("4", "stdout", None)


async def test_a_huge_answer_file_is_read_bounded_keeping_its_start(tmp_path: Path) -> None:
    from evaluation.run.agents.external_agent import MAX_STDOUT_ANSWER_BYTES  # noqa: PLC0415

    # Before, all of it was read: a 400 MB answer file took the runner to about 1 GB.
    size = 3 * MAX_STDOUT_ANSWER_BYTES
    answer_file = shlex.quote(str(tmp_path / "answer.txt"))
    result = await run(tmp_path, f"{{ printf 'é'; head -c {size - 2} /dev/zero | tr '\\0' x; }} > {answer_file}")
    assert result.answer_source == "answer_file" and result.answer is not None
    kept, note = result.answer.split("\n")
    assert kept == "é" + "x" * (MAX_STDOUT_ANSWER_BYTES - 2)
    assert note == f"[... the last {size - MAX_STDOUT_ANSWER_BYTES:,} bytes of the answer file omitted ...]"


async def test_a_multibyte_character_cut_at_the_bound_is_dropped_not_garbled(tmp_path: Path) -> None:
    from evaluation.run.agents.external_agent import MAX_STDOUT_ANSWER_BYTES  # noqa: PLC0415

    answer_file = shlex.quote(str(tmp_path / "answer.txt"))
    # 'é' is two bytes: its first one is the last byte within the bound.
    result = await run(tmp_path, f"{{ head -c {MAX_STDOUT_ANSWER_BYTES - 1} /dev/zero | tr '\\0' x; printf 'éé'; }} > {answer_file}")
    kept, note = (result.answer or "").split("\n")
    assert kept == "x" * (MAX_STDOUT_ANSWER_BYTES - 1) and "\ufffd" not in kept
    assert note == "[... the last 4 bytes of the answer file omitted ...]"


async def test_a_command_line_over_the_systems_limit_names_question_file(tmp_path: Path) -> None:
    # A question over 128 KiB given as {question}: execve refuses it (E2BIG), which was reported as
    # agent_not_found ("the --agent-cmd program does not exist").
    command = render_command("echo {question}", {name: "x" for name in PLACEHOLDERS} | {"question": "word " * 30_000})
    result = await run(tmp_path, command)
    assert result.error_kind == "agent_failed" and result.answer is None
    assert result.error == (
        f"cannot start the agent command: the command line is too long ({len(command):,} bytes; the system allows "
        "at most 131,072 in one argument); pass {question_file} instead of {question} in --agent-cmd"
    )


ESCAPED_HOLDER = """
import sys
from pathlib import Path
import anyio
from evaluation.run.agents import external_agent

# The drain is a bound, not a wait for anything: the holder never closes the pipe. Shortened so the test is quick.
external_agent.PIPE_DRAIN_SECONDS = 0.2
tmp = Path(sys.argv[1])
result = anyio.run(lambda: external_agent.run_external_agent(
    sys.argv[2], cwd=tmp, env={"PATH": "/usr/bin:/bin"}, stdout_path=tmp / "stdout.log",
    stderr_path=tmp / "stderr.log", answer_file=tmp / "answer.txt", timeout=60.0,
))
print(result.answer)
"""


def test_a_leftover_holding_the_agents_stdout_leaves_no_error_at_exit(tmp_path: Path) -> None:
    # A process that left the agent's session and dropped the runner's tag keeps the stdout pipe
    # open past the run: its transport was closed by the garbage collector after the event loop,
    # printing "Exception ignored in: BaseSubprocessTransport.__del__ … Event loop is closed".
    from index.children.containment.watchdog import TAG_VARIABLE  # noqa: PLC0415
    from tests.support.cli import PROJECT, cli_env  # noqa: PLC0415

    pid_file = shlex.quote(str(tmp_path / "holder.pid"))
    command = (
        f"env -u {TAG_VARIABLE} setsid sh -c 'echo $$ > {pid_file}; exec sleep 120' & "
        f"while [ ! -s {pid_file} ]; do :; done; echo 4"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", ESCAPED_HOLDER, str(tmp_path), command],
            capture_output=True, text=True, cwd=PROJECT, env=cli_env(PYTHONPATH=str(PROJECT)), timeout=60,
        )  # fmt: skip
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((tmp_path / "holder.pid").read_text()), signal.SIGKILL)
    assert (done.returncode, done.stdout) == (0, "4\n"), done.stderr
    assert "Exception ignored" not in done.stderr and "Event loop is closed" not in done.stderr, done.stderr


async def test_an_agent_does_not_outlive_a_runner_that_is_killed(tmp_path: Path) -> None:
    # Before: a SIGKILLed runner left its agent (and the agent's copilot) running: it spent tokens
    # and wrote into the rerun's trajectory and workspace, which reuse the same paths.
    from tests.support.cli import PROJECT, cli_env  # noqa: PLC0415
    from tests.support.processes import as_processes, kill_leftovers, wait_for_file, wait_gone  # noqa: PLC0415

    agent_pid, escaped_pid = tmp_path / "agent.pid", tmp_path / "escaped.pid"
    command = (
        f"echo $$ > {shlex.quote(str(agent_pid))}; "
        f"setsid sh -c 'echo $$ > {shlex.quote(str(escaped_pid))}; exec sleep 300' & exec sleep 300"
    )
    runner = subprocess.Popen(
        [sys.executable, "-c", ESCAPED_HOLDER, str(tmp_path), command],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=PROJECT, env=cli_env(PYTHONPATH=str(PROJECT)),
    )  # fmt: skip
    agent: list[psutil.Process] = []
    try:
        agent = as_processes([int(await wait_for_file(agent_pid)), int(await wait_for_file(escaped_pid))])
        assert len(agent) == 2
        runner.kill()
        runner.wait(30)
        assert await wait_gone(agent) == []
    finally:
        kill_leftovers(agent)
        with contextlib.suppress(OSError):
            runner.kill()
