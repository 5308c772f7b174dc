"""A daemon that double-forks, calls ``setsid`` and ``exec``s with an empty environment (no tag, not
in the child's group, orphaned at once) is still found and killed when its child is closed, when
it is started as the child is being stopped, and when the child crashes right after starting it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from index.children.connect import ChildExitedError, ChildStartError, InitializeTimeoutError, open_session
from index.children.containment.guard import TAG_VARIABLE
from index.catalog.servers import ServerConfig
from tests.support.processes import as_processes, kill_leftovers, wait_gone

pytestmark = [pytest.mark.timeout(60), pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

ESCAPING_SERVER = Path(__file__).resolve().parents[3] / "fixtures" / "hostile" / "escaping_server.py"


def _escaping(*flags: str) -> ServerConfig:
    return ServerConfig(name="escaping", command=sys.executable, args=[str(ESCAPING_SERVER), *flags])


async def _serve_once_then_stop(
    config: ServerConfig, tmp_path: Path, leftovers: list[psutil.Process], **options: Any
) -> None:
    """Open a session, call ``ping_tool`` once and close it; the child's process goes to ``leftovers``."""
    async with open_session(config, workdir=tmp_path / "work", **options) as connection:
        leftovers.append(psutil.Process(connection.pid))
        assert (await connection.session.call_tool("ping_tool", {})).is_error is not True


async def test_an_untagged_double_forked_daemon_stays_in_the_childs_tree_and_dies_with_it(tmp_path: Path) -> None:
    leftovers: list[psutil.Process] = []
    try:
        with anyio.fail_after(40):
            async with open_session(_escaping(), workdir=tmp_path / "work") as connection:
                child = psutil.Process(connection.pid)
                leftovers.append(child)
                result = await connection.session.call_tool("vanish", {})
                daemon = psutil.Process(int(result.content[0].text))  # type: ignore[union-attr]
                leftovers.append(daemon)
                assert TAG_VARIABLE not in daemon.environ()  # nothing tags it
                parent = daemon.ppid()
        assert await wait_gone(leftovers, 20) == []
        assert parent == child.pid  # orphaned, but re-parented to the child's guardian (a subreaper), not to init
    finally:
        kill_leftovers(leftovers)


async def test_a_daemon_started_while_the_child_is_being_stopped_dies_with_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    leftovers: list[psutil.Process] = []
    try:
        with anyio.fail_after(40):
            await _serve_once_then_stop(_escaping("--vanish-at-exit", str(pid_file)), tmp_path, leftovers)
            # Closing the session closed the child's stdin; it started the daemon and exited (the
            # daemon's pid written first), leaving nothing for closing to find in its tree.
            leftovers += as_processes([int(pid_file.read_text(encoding="ascii"))])
        assert await wait_gone(leftovers, 20) == []
    finally:
        kill_leftovers(leftovers)


async def test_a_daemon_started_just_before_the_child_crashed_dies_with_it(tmp_path: Path) -> None:
    leftovers: list[psutil.Process] = []
    try:
        with anyio.fail_after(40):
            async with open_session(_escaping(), workdir=tmp_path / "work") as connection:
                child = psutil.Process(connection.pid)
                leftovers.append(child)
                await connection.session.list_tools()  # else the SDK lists them after the call, from a child gone
                result = await connection.session.call_tool("vanish_and_exit", {})
                leftovers += as_processes([int(result.content[0].text)])  # type: ignore[union-attr]
                # Gone while the session is still open: nothing of the copilot's stopped anything yet.
                assert await wait_gone(leftovers, 20) == []
                assert await connection.wait_exit(10) == 3  # the server's own exit code, through its guardian
    finally:
        kill_leftovers(leftovers)


async def test_an_answer_to_initialize_without_its_newline_is_named_in_the_timeout(tmp_path: Path) -> None:
    config = ServerConfig(name="escaping", command=sys.executable, args=[str(ESCAPING_SERVER), "--no-newline"])
    with anyio.fail_after(30), pytest.raises(InitializeTimeoutError) as caught:
        # 6 s: the partial answer must be written and read first, which a loaded machine may take seconds to do.
        async with open_session(config, workdir=tmp_path / "work", init_timeout=6):
            pass
    message = str(caught.value)
    assert "did not answer initialize within 6s" in message
    assert "bytes to stdout without ending the line ('{\"jsonrpc\": \"2.0\", \"id\": " in message
    assert "must end every message with a newline" in message


async def test_a_child_that_exits_in_the_middle_of_a_line_says_so(tmp_path: Path) -> None:
    args = [str(ESCAPING_SERVER), "--no-newline", "--then-exit", "3"]
    config = ServerConfig(name="escaping", command=sys.executable, args=args)
    with anyio.fail_after(30), pytest.raises(ChildExitedError) as caught:
        async with open_session(config, workdir=tmp_path / "work", init_timeout=20):
            pass
    assert "exited with exit code 3 before answering initialize. It wrote " in str(caught.value)
    assert "without ending the line" in str(caught.value)


async def _start_error_of_a_script_without_shebang(folder: Path, name: str) -> tuple[Path, ChildStartError]:
    """(the script, the error) of starting an executable file the kernel cannot run, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "no-shebang.sh"
    script.write_text("echo hello\n")
    script.chmod(0o755)
    config = ServerConfig(name=name, command=str(script))
    with anyio.fail_after(30), pytest.raises(ChildStartError) as caught:
        async with open_session(config, workdir=folder.parent / "work", init_timeout=20):
            pass
    return script, caught.value


async def test_a_program_that_cannot_be_executed_is_a_start_error_not_an_exit(tmp_path: Path) -> None:
    script, error = await _start_error_of_a_script_without_shebang(tmp_path / "bin", "noshebang")
    assert type(error) is ChildStartError
    assert str(error) == f"server 'noshebang': cannot start '{script}': Exec format error."


async def test_the_reason_a_program_cannot_start_survives_a_long_path(tmp_path: Path) -> None:
    # The guardian's line was "cannot start PATH: REASON", read back cut at 300 characters: a path
    # of ~250 characters gave the reason "Exec…", a longer one part of the path.
    script, error = await _start_error_of_a_script_without_shebang(tmp_path / ("d" * 200) / ("e" * 200), "longpath")
    assert str(error) == f"server 'longpath': cannot start '{script}': Exec format error."


async def test_a_server_killed_before_initialize_reads_as_killed(tmp_path: Path) -> None:
    args = ["-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]
    config = ServerConfig(name="killed", command=sys.executable, args=args)
    with anyio.fail_after(30), pytest.raises(ChildExitedError) as caught:
        async with open_session(config, workdir=tmp_path / "work", init_timeout=20):
            pass
    assert "was killed by signal 15 (SIGTERM) before answering initialize" in str(caught.value)


async def test_what_a_server_forks_while_it_is_being_killed_dies_with_it(tmp_path: Path) -> None:
    # The server ignores SIGTERM and starts a worker every 10 ms after its stdin closes: closing
    # escalates to SIGKILL while it forks. Killing its guardian first left 1-2 workers to init.
    pid_file = tmp_path / "workers.txt"
    leftovers: list[psutil.Process] = []
    try:
        with anyio.fail_after(40):
            config = _escaping("--spawn-at-exit", str(pid_file))
            await _serve_once_then_stop(config, tmp_path, leftovers, shutdown_grace=0.5)
        workers = [int(line) for line in pid_file.read_text(encoding="ascii").split()]
        assert len(workers) > 10  # it was forking throughout the stop
        leftovers += as_processes(workers)
        assert await wait_gone(leftovers, 10) == []
    finally:
        kill_leftovers(leftovers)
