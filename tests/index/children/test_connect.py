"""``index.children.connect.open_session`` against real fixture MCP servers in subprocesses."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import psutil
import pytest
from mcp.shared.exceptions import MCPError

from index.children.connect import (
    ChildExitedError,
    ChildStartError,
    CommandNotFoundError,
    InitializeFailedError,
    InitializeTimeoutError,
    RemoteConnectError,
    open_session,
)
from index.children.process import HURRIED_GRACE, HURRIED_KILL_GRACE, ChildProcess
from index.errors import CrawlError
from index.catalog.servers import ServerConfig

FIXTURE = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "fixture_server.py"

pytestmark = pytest.mark.timeout(60)


def fixture_config(name: str = "fixture", mode: str = "healthy", **extra: object) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=[str(FIXTURE), "--name", name, "--mode", mode], **extra)


def text_of(result: object) -> str:
    return result.content[0].text  # type: ignore[attr-defined]


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def fixture_processes(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if marker in " ".join(process.cmdline()) and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


async def test_healthy_server_initializes_and_lists_tools(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with open_session(fixture_config("alpha"), workdir=tmp_path / "work") as connection:
            assert connection.initialize_result.server_info.name == "alpha"
            assert connection.pid is not None and psutil.pid_exists(connection.pid)
            tools = {tool.name for tool in (await connection.session.list_tools()).tools}
            assert {"echo", "counter", "crash", "get_env"} <= tools
            assert text_of(await connection.session.call_tool("echo", {"text": "hi"})) == "hi"
            pid = connection.pid
    assert gone(pid)


async def test_crash_at_start_reports_exit_code_and_stderr(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "crasher.log"
    with anyio.fail_after(30), pytest.raises(ChildExitedError) as caught:
        async with open_session(fixture_config("crasher", "crash-at-start"), workdir=tmp_path, stderr_path=log):
            pytest.fail("a server that crashes at start must not yield a connection")
    message = str(caught.value)
    assert "exit code 3" in message
    assert "fatal: fixture configured to crash at start" in message
    assert caught.value.returncode == 3
    assert isinstance(caught.value, CrawlError)
    assert "fatal: fixture configured to crash at start" in log.read_text()


async def test_an_initialize_answered_with_error_32000_is_the_servers_answer(tmp_path: Path) -> None:
    # The SDK's code for an ended connection too: read alone, it became "closed its stdout".
    erring = FIXTURE.parent / "hostile" / "erring_server.py"
    config = ServerConfig(name="erring", command=sys.executable, args=[str(erring), "--fail", "initialize"])
    with anyio.fail_after(30), pytest.raises(InitializeFailedError) as caught:
        async with open_session(config, workdir=tmp_path):
            pytest.fail("a server that refuses initialize must not yield a connection")
    assert str(caught.value) == "server 'erring' answered initialize with error -32000: Connection closed. It wrote nothing to stderr."


async def test_an_initialize_reply_breaking_the_schema_says_where_not_a_validation_dump(tmp_path: Path) -> None:
    # Before: pydantic's whole dump, "For further information visit https://errors.pydantic.dev/…" included.
    erring = FIXTURE.parent / "hostile" / "erring_server.py"
    config = ServerConfig(name="erring", command=sys.executable, args=[str(erring), "--bad-initialize"])
    with anyio.fail_after(30), pytest.raises(InitializeFailedError) as caught:
        async with open_session(config, workdir=tmp_path):
            pytest.fail("a server whose initialize reply is unreadable must not yield a connection")
    assert str(caught.value) == (
        "server 'erring' answered initialize with a reply that does not follow the MCP schema: capabilities: should "
        "be a valid dictionary or instance of ServerCapabilities (got 7); serverInfo: Field required. It wrote "
        "nothing to stderr."
    )


async def test_a_cancelled_session_stops_its_child_with_the_short_waits(tmp_path: Path) -> None:
    # Before: the copilot stopping mid-crawl waited the full 2 s for a child that ignores SIGTERM,
    # past the 2 s a host gives it before its own SIGTERM.
    hostile = FIXTURE.parent / "hostile" / "hostile_server.py"
    config = ServerConfig(
        name="stubborn", command=sys.executable, args=[str(hostile), "--hang-before-initialize", "--ignore-signals"]
    )
    spawned: list[ChildProcess] = []
    with anyio.fail_after(30):
        with anyio.CancelScope() as scope:

            def give_up(process: ChildProcess) -> None:
                spawned.append(process)
                scope.cancel()

            async with open_session(config, workdir=tmp_path, init_timeout=25, on_spawn=give_up):
                pytest.fail("a server that never answers initialize must not yield a connection")
    [process] = spawned
    assert (process.shutdown_grace, process.kill_grace) == (HURRIED_GRACE, HURRIED_KILL_GRACE)
    assert gone(process.pid)


async def test_hang_at_start_hits_init_timeout_and_leaves_no_process(tmp_path: Path) -> None:
    with anyio.fail_after(15), pytest.raises(InitializeTimeoutError) as caught:
        async with open_session(fixture_config("hanger", "hang-at-start"), workdir=tmp_path, init_timeout=1.0):
            pytest.fail("a hanging server must not yield a connection")
    assert "did not answer initialize within 1s" in str(caught.value)
    assert "--mode hang-at-start" in str(caught.value)
    assert fixture_processes("--name hanger") == []


async def test_junk_on_stdout_is_logged_and_ignored(tmp_path: Path) -> None:
    log = tmp_path / "junk.log"
    with anyio.fail_after(30):
        async with open_session(fixture_config("junk", "junk-stdout"), workdir=tmp_path, stderr_path=log) as connection:
            assert text_of(await connection.session.call_tool("add", {"a": 2, "b": 3})) == "5"
            assert connection.process is not None and connection.process.junk_lines == 1
    assert "this line is not JSON-RPC" in log.read_text()


async def test_flood_on_stdout_at_start_still_serves(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with open_session(fixture_config("flood", "flood-stdout"), workdir=tmp_path) as connection:
            assert text_of(await connection.session.call_tool("echo", {"text": "after flood"})) == "after flood"
            assert connection.process is not None and connection.process.junk_lines == 1000


async def test_overlong_stdout_line_is_dropped_with_bounded_memory(tmp_path: Path) -> None:
    limit = 1024 * 1024
    junk = 64 * 1024 * 1024
    with anyio.fail_after(40):
        async with open_session(fixture_config("longline"), workdir=tmp_path, max_message_bytes=limit) as connection:
            before = psutil.Process().memory_info().rss
            assert text_of(await connection.session.call_tool("write_stdout", {"size": junk})) == "written"
            growth = psutil.Process().memory_info().rss - before
            # Buffering the line would cost at least its 64 MiB; the reader keeps at most the limit.
            assert growth < 24 * 1024 * 1024, f"memory grew by {growth} bytes"
            assert connection.process is not None and connection.process.oversized_lines == 1
            assert text_of(await connection.session.call_tool("echo", {"text": "still fine"})) == "still fine"


async def test_response_over_the_message_limit_fails_that_call_clearly(tmp_path: Path) -> None:
    limit = 256 * 1024
    with anyio.fail_after(30):
        async with open_session(fixture_config("big"), workdir=tmp_path, max_message_bytes=limit) as connection:
            with pytest.raises(MCPError, match="over the 262144-byte message limit"):
                await connection.session.call_tool("huge", {"size": 2 * limit})
            assert text_of(await connection.session.call_tool("huge", {"size": 1000})) == "x" * 1000


async def test_crash_mid_call_closes_the_connection_with_exit_code(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with open_session(fixture_config("midcrash"), workdir=tmp_path) as connection:
            with pytest.raises(MCPError, match="Connection closed"):
                await connection.session.call_tool("crash", {})
            await connection.closed.wait()
            assert await connection.wait_exit(5) == 7


@pytest.mark.parametrize("ignore_sigterm", [False, True], ids=["polite", "ignores-sigterm"])
async def test_closing_kills_the_whole_process_group(tmp_path: Path, ignore_sigterm: bool) -> None:
    with anyio.fail_after(30):
        async with open_session(fixture_config("tree"), workdir=tmp_path) as connection:
            result = await connection.session.call_tool("spawn_child", {"ignore_sigterm": ignore_sigterm})
            grandchild = int(text_of(result))
            leader = connection.pid
            assert leader is not None and not gone(grandchild)
    assert gone(leader)
    assert gone(grandchild)


async def test_copilot_secrets_do_not_reach_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_TEST_SECRET", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    config = fixture_config("env", env={"GIVEN_TO_CHILD": "yes"})
    with anyio.fail_after(30):
        async with open_session(config, workdir=tmp_path) as connection:
            call = connection.session.call_tool
            assert text_of(await call("get_env", {"name": "COPILOT_TEST_SECRET"})) == "<unset>"
            assert text_of(await call("get_env", {"name": "OPENAI_API_KEY"})) == "<unset>"
            assert text_of(await call("get_env", {"name": "GIVEN_TO_CHILD"})) == "yes"
            assert text_of(await call("get_env", {"name": "PATH"})) == config.child_environment()["PATH"]


async def test_child_runs_in_workdir_with_its_own_temp_dir(tmp_path: Path) -> None:
    workdir = tmp_path / "work" / "fixture"
    with anyio.fail_after(30):
        async with open_session(fixture_config(), workdir=workdir) as connection:
            call = connection.session.call_tool
            for name in ("TMPDIR", "TEMP", "TMP"):
                assert text_of(await call("get_env", {"name": name})) == str(workdir / "tmp")
            written = text_of(await call("write_file", {"path": "out/note.txt", "text": "hello"}))
    assert Path(written) == (workdir / "out" / "note.txt").resolve()
    assert (workdir / "tmp").is_dir()


async def test_without_workdir_a_temporary_one_is_removed_afterwards() -> None:
    with anyio.fail_after(30):
        async with open_session(fixture_config()) as connection:
            tmpdir = Path(text_of(await connection.session.call_tool("get_env", {"name": "TMPDIR"})))
            assert tmpdir.is_dir()
    assert not tmpdir.parent.exists()


async def test_missing_command_names_it_and_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    with pytest.raises(CommandNotFoundError) as caught:
        async with open_session(ServerConfig(name="mem", command="npx", args=["-y", "x"]), workdir=tmp_path):
            pytest.fail("unreachable")
    assert "'npx' not found" in str(caught.value)
    assert "Node.js" in str(caught.value)


async def test_disabled_server_is_refused_with_its_reason(tmp_path: Path) -> None:
    config = fixture_config(enabled=False, reason="needs an API key")
    with pytest.raises(ChildStartError, match="disabled: needs an API key"):
        async with open_session(config, workdir=tmp_path):
            pytest.fail("unreachable")


async def test_errors_from_the_body_propagate_unwrapped(tmp_path: Path) -> None:
    class BodyError(CrawlError):
        pass

    with anyio.fail_after(30), pytest.raises(BodyError):
        async with open_session(fixture_config(), workdir=tmp_path):
            raise BodyError("raised by the caller")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_remote_streamable_http_server(tmp_path: Path) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, str(FIXTURE), "--name", "remote", "--transport", "streamable-http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(30):
            while True:  # wait for the port to accept connections
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    assert server.poll() is None, "the HTTP fixture server exited"
                    await anyio.sleep(0.05)
                    continue
                await stream.aclose()
                break
            config = ServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp", headers={"X-Test": "1"})
            async with open_session(config) as connection:
                assert connection.pid is None
                assert text_of(await connection.session.call_tool("counter", {})) == "1"
                assert text_of(await connection.session.call_tool("counter", {})) == "2"
            missing = ServerConfig(name="remote404", url=f"http://127.0.0.1:{port}/nowhere")
            with pytest.raises(RemoteConnectError, match="404"):
                async with open_session(missing, init_timeout=10):
                    pytest.fail("unreachable")
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


async def test_unreachable_remote_server_is_a_clear_error() -> None:
    config = ServerConfig(name="nowhere", url=f"http://127.0.0.1:{_free_port()}/mcp")
    with anyio.fail_after(30), pytest.raises(RemoteConnectError, match="cannot reach"):
        async with open_session(config, init_timeout=10):
            pytest.fail("unreachable")


async def test_a_childs_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """Under umask 000 its temp dir was 0777 without the sticky bit (another user could plant files
    there) and its stderr log, which may print the keys its entry hands it, 0666."""
    previous = os.umask(0)
    try:
        with anyio.fail_after(30):
            async with open_session(
                fixture_config("alpha"), workdir=tmp_path / "work" / "alpha", stderr_path=tmp_path / "children" / "alpha.log"
            ):
                pass
    finally:
        os.umask(previous)
    modes = {
        path.relative_to(tmp_path).as_posix(): stat.S_IMODE(path.stat().st_mode)
        for path in (tmp_path / "work" / "alpha", tmp_path / "work" / "alpha" / "tmp", tmp_path / "children", tmp_path / "children" / "alpha.log")
    }
    assert modes == {"work/alpha": 0o700, "work/alpha/tmp": 0o700, "children": 0o700, "children/alpha.log": 0o600}


_OUT_OF_DESCRIPTORS = """
import os, resource, sys, anyio
from pathlib import Path
from tests.index.children.test_connect import fixture_config
from index.children.connect import open_session
from index.children.errors import ChildStartError

async def main():
    work = Path(sys.argv[1])
    used = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    try:
        with anyio.fail_after(30):
            async with open_session(fixture_config("alpha"), workdir=work / "w", stderr_path=work / "l" / "alpha.log"):
                print("started")
    except ChildStartError as error:
        print(error)
anyio.run(main)
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files through /proc (Linux)")
def test_out_of_file_descriptors_is_said_to_be_the_copilots_limit(tmp_path: Path) -> None:
    """It read "cannot start 'python': Too many open files", as if the child were at fault."""
    ran = subprocess.run(
        [sys.executable, "-c", _OUT_OF_DESCRIPTORS, str(tmp_path)],
        capture_output=True, text=True, timeout=60, cwd=FIXTURE.parents[2], check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "Too many open files: the copilot's limit of open files is reached (ulimit -n: " in ran.stdout, ran.stdout
    assert "raise it, or lower COPILOT_MAX_LIVE_CHILDREN." in ran.stdout
