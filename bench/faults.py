"""Fault matrix: what escapes the copilot when a child is hostile and the host is rough.

``python -m bench faults`` (or ``python -m bench.faults [--sessions N] [--settle S]``)

Every row runs a real copilot (``python -m server``, stdio or HTTP) whose servers are the hostile
fixture (``tests/fixtures/hostile_server.py``): one that ignores SIGTERM and starts grandchildren
that leave its process group (``setsid``, and a double-forked daemon), with a call in flight, and
one that hangs before ``initialize`` after detaching a grandchild of its own. Then the copilot is
stopped the hard way and the processes it started that are still alive ``--settle`` seconds later
are counted (target 0):

- SIGKILL (stdio and HTTP), SIGHUP (HTTP), a second SIGTERM during the shutdown (stdio), and a
  host's stop escalation (close stdin, 2 s, SIGTERM, 2 s, SIGKILL; the MCP SDK's ``stdio_client``),
  with the time the copilot took to exit (target < 2 s, before the host's SIGTERM);
- *baseline, same run*: the same hostile server under the MCP SDK's own ``stdio_client`` in a
  plain Python process (what a client without the copilot's guard leaves behind), SIGKILLed.

Secrets: the hostile child reads ``/proc/<pid>/environ`` of every ancestor and counts the secret
values it finds in the copilot's (target 0); the baseline is the plain client process holding
the same secrets. Descriptors: open files of an HTTP copilot after 1 and after ``--sessions``
sessions that never send DELETE (target: no growth; the baseline is the count after one).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.args import non_negative_float, positive_int
from index.console import HelpFormatter

REPO = Path(__file__).resolve().parents[1]
HOSTILE = REPO / "tests" / "fixtures" / "hostile_server.py"
SECRETS = {
    "OPENAI_API_KEY": "sk-bench-openai-key-0123456789",
    "COPILOT_HTTP_TOKEN": "bench-http-token-0123456789abcdef",
    "GITHUB_TOKEN": "ghp-bench-github-token-0123456789",
}
_POLL = 0.05


@dataclass
class Row:
    scenario: str
    survivors: int
    tracked: int
    note: str = ""


# -- processes ------------------------------------------------------------------------------------
def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _processes(pids: list[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        with suppress(psutil.Error):
            found.append(psutil.Process(pid))
    return found


async def _survivors(processes: list[psutil.Process], settle: float) -> list[psutil.Process]:
    with anyio.move_on_after(settle):
        while any(_running(p) for p in processes):
            await anyio.sleep(_POLL)
    left = [p for p in processes if _running(p)]
    for process in left:  # never leave them behind
        with suppress(psutil.Error):
            process.kill()
    return left


async def _exited(process: psutil.Process, timeout: float = 30.0) -> None:
    """Wait for ``process`` to exit without reaping it (its spawner's event loop does that)."""
    with anyio.fail_after(timeout):
        while _running(process):
            await anyio.sleep(_POLL)


async def _file(path: Path, timeout: float = 60.0) -> str:
    with anyio.fail_after(timeout):
        while not (path.exists() and path.stat().st_size):
            await anyio.sleep(_POLL)
    return path.read_text(encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- a copilot with hostile servers ----------------------------------------------------------------
def _hostile(*flags: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(HOSTILE), *flags]}


def _setup(root: Path) -> tuple[Path, dict[str, str]]:
    look_for = [flag for value in SECRETS.values() for flag in ("--look-for", value)]
    servers = {
        "evil": _hostile("--ignore-signals", *look_for),
        "hung": _hostile("--hang-before-initialize", "--ignore-signals", "--detach-at-start", str(root / "hung.pid")),
    }
    path = root / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPILOT_")}
    env.update(SECRETS)
    env.update(
        {
            "COPILOT_HOME": str(root / "home"),
            "COPILOT_CATALOG": str(root / "no-catalog.json"),
            "COPILOT_LOG_DIR": str(root / "logs"),
            "COPILOT_WARM_INDEX": "false",
            "COPILOT_AUTO_INDEX": "false",
        }
    )
    return path, env


async def _execute(client: Client, server: str, tool: str, **params: Any) -> str:
    result = await client.call_tool("execute", {"server_name": server, "tool_name": tool, "params": params})
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def _quietly(call: Callable[[], Awaitable[Any]]) -> None:
    with suppress(Exception):
        await call()


async def _provoke(client: Client, root: Path, group: anyio.abc.TaskGroup) -> list[int]:
    escaped = [
        int(await _execute(client, "evil", "detach", how=how, ignore_sigterm=True)) for how in ("setsid", "daemon")
    ]
    started = root / "in-flight"
    group.start_soon(_quietly, lambda: _execute(client, "evil", "sleep", seconds=600, started_file=str(started)))
    group.start_soon(_quietly, lambda: _execute(client, "hung", "echo", text="never"))
    await _file(started)
    escaped.append(int(await _file(root / "hung.pid")))
    return escaped


def _copilot_of(marker: str) -> psutil.Process:
    for child in psutil.Process().children(recursive=True):
        with suppress(psutil.Error):
            if "server" in child.cmdline() and any(marker in part for part in child.cmdline()):
                return child
    raise RuntimeError("copilot process not found")


@asynccontextmanager
async def _stdio_copilot(root: Path) -> AsyncIterator[tuple[Client, psutil.Process]]:
    servers, env = _setup(root)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "server", "--servers", str(servers)], env=env, cwd=str(root)
    )
    with (root / "stderr.log").open("w", encoding="utf-8") as errors:
        async with Client(stdio_client(params, errlog=errors)) as client:
            yield client, _copilot_of(str(servers))


async def stdio_scenario(root: Path, settle: float, how: str) -> Row:
    tracked: list[psutil.Process] = []
    note = ""
    with suppress(Exception):  # the connection breaks under the copilot on purpose
        async with _stdio_copilot(root) as (client, copilot), anyio.create_task_group() as group:
            escaped = await _provoke(client, root, group)
            tracked = [*copilot.children(recursive=True), *_processes(escaped)]
            if how == "SIGKILL":
                os.kill(copilot.pid, signal.SIGKILL)
            else:  # a second SIGTERM once the shutdown has begun
                os.kill(copilot.pid, signal.SIGTERM)
                with anyio.fail_after(30):
                    while "received SIGTERM" not in (root / "stderr.log").read_text(encoding="utf-8"):
                        await anyio.sleep(0.02)
                with suppress(ProcessLookupError):
                    os.kill(copilot.pid, signal.SIGTERM)
            await _exited(copilot)
            left = await _survivors(tracked, settle)
            group.cancel_scope.cancel()
    name = "SIGKILL, stdio" if how == "SIGKILL" else "SIGTERM twice, stdio"
    return Row(name, len(left) if tracked else -1, len(tracked), note)


async def http_scenario(root: Path, settle: float, signum: signal.Signals) -> Row:
    servers, env = _setup(root)
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "--servers", str(servers), "--http", "--port", str(port)],
        env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=(root / "stderr.log").open("w"),
    )  # fmt: skip
    tracked: list[psutil.Process] = []
    left: list[psutil.Process] = []
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(60):
            while "serving MCP over streamable HTTP on" not in (root / "stderr.log").read_text(encoding="utf-8"):
                await anyio.sleep(_POLL)
        headers = {"Authorization": f"Bearer {SECRETS['COPILOT_HTTP_TOKEN']}"}
        with suppress(Exception):
            async with (
                create_mcp_http_client(headers=headers) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
                anyio.create_task_group() as group,
            ):
                escaped = await _provoke(client, root, group)
                tracked = [*psutil.Process(process.pid).children(recursive=True), *_processes(escaped)]
                os.kill(process.pid, signum)
                await anyio.to_thread.run_sync(process.wait, 60)
                left = await _survivors(tracked, settle)
                group.cancel_scope.cancel()
    finally:
        process.kill()
        process.wait()
    return Row(f"{signum.name}, HTTP", len(left) if tracked else -1, len(tracked))


async def host_close_scenario(root: Path, settle: float) -> Row:
    """The SDK host's stop: close stdin, 2 s, SIGTERM, 2 s, SIGKILL; two SIGTERM-ignoring children."""
    tracked: list[psutil.Process] = []
    async with _stdio_copilot(root) as (client, copilot):
        await _execute(client, "evil", "echo", text="start")
        await _execute(client, "evil", "detach", how="setsid", ignore_sigterm=True)
        tracked = [copilot, *copilot.children(recursive=True)]
        closing = time.perf_counter()
    exited = time.perf_counter() - closing
    left = await _survivors(tracked, settle)
    signalled = "received SIGTERM" in (root / "stderr.log").read_text(encoding="utf-8")
    when = "SIGTERMed by the host" if signalled else "before the host SIGTERMed it"
    note = f"copilot exited {exited:.2f}s after its stdin closed ({when})"
    return Row("host's stop escalation, stdio", len(left), len(tracked), note)


# -- the baseline: the SDK's stdio_client in a plain process ---------------------------------------
_PLAIN_CLIENT = """
import anyio, json, sys
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

async def main():
    params = StdioServerParameters(command=sys.executable, args=sys.argv[2:])
    async with Client(stdio_client(params)) as client:
        found = json.loads((await client.call_tool("steal", {})).content[0].text)
        pids = [int((await client.call_tool("detach", {"how": how, "ignore_sigterm": True})).content[0].text)
                for how in ("setsid", "daemon")]
        open(sys.argv[1], "w").write(json.dumps({"found": found, "pids": pids}))
        await anyio.sleep_forever()

anyio.run(main)
"""


async def baseline_scenario(root: Path, settle: float) -> tuple[Row, int]:
    look_for = [flag for value in SECRETS.values() for flag in ("--look-for", value)]
    report = root / "plain.json"
    env = {**os.environ, **SECRETS}
    owner = subprocess.Popen(
        [sys.executable, "-c", _PLAIN_CLIENT, str(report), str(HOSTILE), "--ignore-signals", *look_for],
        env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        data = json.loads(await _file(report))
        tracked = [*psutil.Process(owner.pid).children(recursive=True), *_processes(data["pids"])]
        owner.kill()
        owner.wait()
        left = await _survivors(tracked, settle)
    finally:
        owner.kill()
    in_owner = next((a for a in data["found"]["ancestors"] if a["pid"] == owner.pid), {"found": []})
    return Row("baseline: SIGKILL of a plain MCP SDK client", len(left), len(tracked)), len(in_owner["found"])


# -- secrets and descriptors -----------------------------------------------------------------------
async def secrets_scenario(root: Path) -> int:
    async with _stdio_copilot(root) as (client, copilot):
        report = json.loads(await _execute(client, "evil", "steal"))
    return sum(len(a["found"]) for a in report["ancestors"] if a["pid"] == copilot.pid)


async def descriptor_scenario(root: Path, sessions: int) -> tuple[int, int]:
    servers, env = _setup(root)
    env["COPILOT_PROTECT_PROCESS"] = "false"  # other processes may not list a non-dumpable process's fds
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "--servers", str(servers), "--http", "--port", str(port)],
        env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=(root / "stderr.log").open("w"),
    )  # fmt: skip
    try:
        with anyio.fail_after(60):
            while "serving MCP over streamable HTTP on" not in (root / "stderr.log").read_text(encoding="utf-8"):
                await anyio.sleep(_POLL)
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {SECRETS['COPILOT_HTTP_TOKEN']}",
        }
        initialize = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"},
            },
        }  # fmt: skip
        counts = []
        async with httpx2.AsyncClient(timeout=30) as http:
            for index in range(sessions):
                response = await http.post(url, json=initialize, headers=headers)
                session = {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await http.post(url, json=initialized, headers={**headers, **session})
                if index == 0:
                    counts.append(len(os.listdir(f"/proc/{process.pid}/fd")))
            counts.append(len(os.listdir(f"/proc/{process.pid}/fd")))
        return counts[0], counts[1]
    finally:
        process.terminate()
        process.wait(30)


async def run(args: argparse.Namespace) -> int:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as scratch:
        base = Path(scratch)

        def fresh(name: str) -> Path:
            path = base / name
            path.mkdir()
            return path

        print("fault matrix: processes still alive after the copilot stopped (target 0)", flush=True)
        baseline, leaked = await baseline_scenario(fresh("baseline"), args.settle)
        rows.append(baseline)
        rows.append(await stdio_scenario(fresh("stdio-kill"), args.settle, "SIGKILL"))
        rows.append(await http_scenario(fresh("http-kill"), args.settle, signal.SIGKILL))
        rows.append(await http_scenario(fresh("http-hup"), args.settle, signal.SIGHUP))
        rows.append(await stdio_scenario(fresh("stdio-twice"), args.settle, "SIGTERM twice"))
        rows.append(await host_close_scenario(fresh("host-close"), args.settle))
        print(f"{'scenario':46} {'survivors':>9} {'of':>4}")
        for row in rows:
            survivors = "error" if row.survivors < 0 else str(row.survivors)
            print(f"{row.scenario:46} {survivors:>9} {row.tracked:>4}  {row.note}")
        found = await secrets_scenario(fresh("secrets"))
        print(
            f"\nsecrets: the hostile child found {found} of {len(SECRETS)} secret values in the copilot's "
            f"/proc/<pid>/environ (target 0); baseline, same run: {leaked} of {len(SECRETS)} in a plain MCP SDK "
            "client's environ"
        )
        if Path("/proc/self/fd").is_dir():
            after_one, after_all = await descriptor_scenario(fresh("fds"), args.sessions)
            print(
                f"descriptors: {after_all} open files after {args.sessions} abandoned HTTP sessions, {after_one} "
                f"after 1 (baseline, same run): {after_all - after_one:+d} (target: no growth)"
            )
    bad = [row for row in rows[1:] if row.survivors != 0]
    return 1 if bad or found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.faults", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=HelpFormatter)
    parser.add_argument("--sessions", type=positive_int, default=300, help="abandoned HTTP sessions in the descriptor test")
    parser.add_argument("--settle", type=non_negative_float, default=10.0, help="seconds processes get to die before counting")
    args = parser.parse_args(argv)
    return anyio.run(run, args)


if __name__ == "__main__":
    sys.exit(main())
