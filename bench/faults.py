"""Fault matrix: what escapes the copilot when a child is hostile and the host is rough.

``python -m bench faults`` (or ``python -m bench.faults [--sessions N] [--settle S]``)

Every row runs a real copilot (``python -m server``, stdio or HTTP) whose servers are the hostile
fixture (``tests/fixtures/hostile/hostile_server.py``): one that ignores SIGTERM and starts grandchildren
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
the same secrets. Siblings: a second server holds a key its entry hands it; the hostile child, isolated
(the default), counts the processes whose ``environ`` shows it (target 0); the baseline is the same
hostile server with ``"isolated": false``. Descriptors: open files of an HTTP copilot after 1 and after ``--sessions``
sessions that never send DELETE (target: no growth; the baseline is the count after one).

However the benchmark ends -- finished, failed, Ctrl-C, SIGTERM or SIGHUP -- it stops every process
it started (the hostile ones ignore SIGTERM and leave their sessions) and removes its temporary
directory. Each process carries ``BENCH_FAULTS_RUN`` in its environment, inherited by whatever it
starts; set the variable beforehand to find them from outside. A line ``<scenario>: N processes up``
says when a scenario's processes are running.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
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
from index.children.containment.guardian import landlock_abi
from index.children.containment.watchdog import tagged
from index.cli.console import HelpFormatter

REPO = Path(__file__).resolve().parents[1]
HOSTILE = REPO / "tests" / "fixtures" / "hostile" / "hostile_server.py"
SECRETS = {
    "OPENAI_API_KEY": "sk-bench-openai-key-0123456789",
    "COPILOT_HTTP_TOKEN": "bench-http-token-0123456789abcdef",
    "GITHUB_TOKEN": "ghp-bench-github-token-0123456789",
}
#: What an entry hands its own server ("keeper"), which another server must not find.
KEEPER_KEY = "sk-bench-keeper-key-0123456789"
_POLL = 0.05
#: In the environment of every process the benchmark starts (and so of what those start), so any
#: exit path can find them again, also the ones that left their process group and tree.
RUN_TAG_VARIABLE = "BENCH_FAULTS_RUN"
#: Ends the line that says a scenario's processes are running (see :func:`_report_up`).
UP_MARKER = "processes up"
#: Seconds the final clean-up may spend killing what the run started.
_CLEANUP_DEADLINE = 15.0


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


def _report_up(scenario: str, count: int) -> None:
    """Progress for people, and for a test the moment a run has hostile processes to leave behind."""
    print(f"  {scenario}: {count} {UP_MARKER}", flush=True)


# -- every exit path: stop what the run started, remove its files ----------------------------------
def run_tag() -> str:
    """This run's ``BENCH_FAULTS_RUN`` value (the caller's, if set), exported for every child."""
    tag = os.environ.get(RUN_TAG_VARIABLE) or f"faults-{os.getpid()}-{secrets.token_hex(6)}"
    os.environ[RUN_TAG_VARIABLE] = tag
    return tag


def _leftovers(tag: str, scratch: Path) -> list[psutil.Process]:
    """What this run started that still runs: tagged processes anywhere, this process's
    descendants that work in ``scratch`` (a copilot hides its environment from others), and
    everything below both."""
    roots: dict[int, psutil.Process] = {p.pid: p for p in tagged(tag, variable=RUN_TAG_VARIABLE)}
    with suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            with suppress(psutil.Error):
                if any(str(scratch) in part for part in child.cmdline()):
                    roots[child.pid] = child
    found = dict(roots)
    for root in roots.values():
        with suppress(psutil.Error):
            found.update((p.pid, p) for p in root.children(recursive=True))
    return [p for p in found.values() if _running(p)]


def _kill_with_group(process: psutil.Process) -> None:
    """SIGKILL ``process``, and its whole process group when it leads one (never ours)."""
    with suppress(OSError, psutil.Error):
        if os.getpgid(process.pid) == process.pid != os.getpgrp():
            os.killpg(process.pid, signal.SIGKILL)
    with suppress(psutil.Error):
        process.kill()


def stop_everything(tag: str, scratch: Path, deadline: float = _CLEANUP_DEADLINE) -> list[psutil.Process]:
    """SIGKILL every process this run started until none is left (or ``deadline`` seconds passed,
    rescanning: a dying copilot's watchdog may still be sweeping); what survived."""
    end = time.monotonic() + deadline
    while (left := _leftovers(tag, scratch)) and time.monotonic() < end:
        for process in left:
            _kill_with_group(process)
        while any(_running(p) for p in left) and time.monotonic() < end:
            time.sleep(_POLL)  # zombies count as gone: a container's init may never reap orphans
    return _leftovers(tag, scratch)


def _clean_up(tag: str, scratch: Path) -> None:
    """The end of every run: no process of it left, no temporary file. Synchronous, so it runs to
    the end even while the run is being cancelled; a second Ctrl-C meanwhile is ignored rather
    than abandon hostile processes halfway (it is bounded by ``_CLEANUP_DEADLINE``). SIGTERM and
    SIGHUP are still held by :func:`run`'s receiver here, so they cannot cut it short either."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        survivors = stop_everything(tag, scratch)
        if survivors:
            pids = ", ".join(str(p.pid) for p in survivors)
            print(f"warning: {len(survivors)} process(es) of this run survived SIGKILL: {pids}", file=sys.stderr)
        try:
            shutil.rmtree(scratch)
        except FileNotFoundError:
            pass
        except OSError as error:
            print(f"warning: could not remove {scratch}: {error}; delete it by hand", file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, before if before is not None else signal.SIG_DFL)


def _handled_signals() -> list[signal.Signals]:
    """SIGTERM, and SIGHUP unless it was ignored when we started (``nohup``: keep running)."""
    handled = [signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        handled.append(signal.SIGHUP)
    return handled


async def _stop_on_signal(received: AsyncIterator[int], scope: anyio.CancelScope, stopped_by: list[str]) -> None:
    """SIGTERM/SIGHUP (a CI timeout, a closed terminal) stop the run as Ctrl-C does: cancelled,
    so every scenario's own clean-up runs, then :func:`_clean_up`."""
    async for signum in received:
        stopped_by.append(signal.Signals(signum).name)
        scope.cancel()
        return


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- a copilot with hostile servers ----------------------------------------------------------------
def _hostile(*flags: str, env: dict[str, str] | None = None, **entry: Any) -> dict[str, Any]:
    # The copilot passes its children an allowlisted environment: the run's tag goes in explicitly.
    tag = {RUN_TAG_VARIABLE: os.environ[RUN_TAG_VARIABLE]} if RUN_TAG_VARIABLE in os.environ else {}
    return {"command": sys.executable, "args": [str(HOSTILE), *flags], "env": {**tag, **(env or {})}, **entry}


def _setup(root: Path) -> tuple[Path, dict[str, str]]:
    look_for = [flag for value in [*SECRETS.values(), KEEPER_KEY] for flag in ("--look-for", value)]
    servers = {
        "evil": _hostile("--ignore-signals", *look_for),
        "hung": _hostile("--hang-before-initialize", "--ignore-signals", "--detach-at-start", str(root / "hung.pid")),
        # Started only by the secrets scenario: a server an entry hands a key, and the same hostile
        # server as "evil" with the isolation its entry may turn off.
        "keeper": _hostile(env={"KEEPER_KEY": KEEPER_KEY}),
        "nosy": _hostile(*look_for, isolated=False),
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
            _report_up("stdio copilot" if how == "SIGKILL" else "stdio copilot (SIGTERM twice)", len(tracked) + 1)
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
                _report_up(f"HTTP copilot ({signum.name})", len(tracked) + 1)
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
        _report_up("stdio copilot (host's stop)", len(tracked))
        closing = time.perf_counter()
    exited = time.perf_counter() - closing
    left = await _survivors(tracked, settle)
    signalled = "received SIGTERM" in (root / "stderr.log").read_text(encoding="utf-8")
    when = "SIGTERMed by the host" if signalled else "before the host SIGTERMed it"
    note = f"copilot exited {exited:.2f}s after its stdin closed ({when})"
    return Row("host's stop escalation, stdio", len(left), len(tracked), note)


# -- the baseline: the SDK's stdio_client in a plain process ---------------------------------------
_PLAIN_CLIENT = """
import anyio, json, os, sys
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

async def main():
    env = get_default_environment()  # what the SDK gives a server, plus the run's tag (no secret)
    if sys.argv[2] in os.environ:
        env[sys.argv[2]] = os.environ[sys.argv[2]]
    params = StdioServerParameters(command=sys.executable, args=sys.argv[3:], env=env)
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
        [sys.executable, "-c", _PLAIN_CLIENT, str(report), RUN_TAG_VARIABLE, str(HOSTILE), "--ignore-signals", *look_for],
        env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        data = json.loads(await _file(report))
        tracked = [*psutil.Process(owner.pid).children(recursive=True), *_processes(data["pids"])]
        _report_up("baseline (plain MCP SDK client)", len(tracked) + 1)
        owner.kill()
        owner.wait()
        left = await _survivors(tracked, settle)
    finally:
        owner.kill()
    in_owner = next((a for a in data["found"]["ancestors"] if a["pid"] == owner.pid), {"found": []})
    return Row("baseline: SIGKILL of a plain MCP SDK client", len(left), len(tracked)), len(in_owner["found"])


# -- secrets and descriptors -----------------------------------------------------------------------
async def secrets_scenario(root: Path) -> tuple[int, int, int]:
    """Secret values the hostile child found in the copilot's environ, and the processes in which it
    found another server's key: isolated, and with ``"isolated": false`` (the baseline)."""
    async with _stdio_copilot(root) as (client, copilot):
        await _execute(client, "keeper", "echo", text="started")
        report = json.loads(await _execute(client, "evil", "steal"))
        unisolated = json.loads(await _execute(client, "nosy", "steal"))
    in_copilot = sum(len(a["found"]) for a in report["ancestors"] if a["pid"] == copilot.pid)
    return in_copilot, len(report["elsewhere"]), len(unisolated["elsewhere"])


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
                    # The first session starts the copilot's start-up work (the index opened, its
                    # threads), which holds files of its own for good: count once it is done.
                    with anyio.fail_after(120):
                        while "start-up work done" not in (root / "stderr.log").read_text(encoding="utf-8"):
                            await anyio.sleep(_POLL)
                    counts.append(len(os.listdir(f"/proc/{process.pid}/fd")))
            counts.append(len(os.listdir(f"/proc/{process.pid}/fd")))
        return counts[0], counts[1]
    finally:
        process.terminate()
        process.wait(30)


async def run(args: argparse.Namespace) -> int:
    """The whole matrix; whatever ends it, :func:`_clean_up` runs last. SIGTERM and SIGHUP end it
    as ``KeyboardInterrupt`` (the signal's name as its argument), as Ctrl-C does."""
    tag = run_tag()
    stopped_by: list[str] = []
    status = 1
    # Held from before the first file to after the clean-up: SIGTERM/SIGHUP never kill the run
    # outright, which would skip every clean-up.
    with anyio.open_signal_receiver(*_handled_signals()) as received:
        scratch = Path(tempfile.mkdtemp(prefix="bench-faults-"))
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_stop_on_signal, received, group.cancel_scope, stopped_by)
                status = await _matrix(args, scratch)
                group.cancel_scope.cancel()
        finally:
            _clean_up(tag, scratch)
    if stopped_by:
        raise KeyboardInterrupt(stopped_by[0])
    return status


async def _matrix(args: argparse.Namespace, base: Path) -> int:
    rows: list[Row] = []

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
    found, sibling, sibling_unisolated = await secrets_scenario(fresh("secrets"))
    print(
        f"\nsecrets: the hostile child found {found} of {len(SECRETS)} secret values in the copilot's "
        f"/proc/<pid>/environ (target 0); baseline, same run: {leaked} of {len(SECRETS)} in a plain MCP SDK "
        "client's environ"
    )
    print(
        f"siblings: the hostile child found another server's key in {sibling} processes' /proc/<pid>/environ "
        f"(target 0; {'isolated' if landlock_abi() else 'this kernel has no Landlock, so nothing is isolated'}); "
        f"baseline, same run, \"isolated\": false: {sibling_unisolated}"
    )
    if Path("/proc/self/fd").is_dir():
        after_one, after_all = await descriptor_scenario(fresh("fds"), args.sessions)
        print(
            f"descriptors: {after_all} open files after {args.sessions} abandoned HTTP sessions, {after_one} "
            f"after 1 (baseline, same run): {after_all - after_one:+d} (target: no growth)"
        )
    bad = [row for row in rows[1:] if row.survivors != 0]
    return 1 if bad or found or (sibling and landlock_abi()) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.faults", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=HelpFormatter)
    parser.add_argument("--sessions", type=positive_int, default=300, help="abandoned HTTP sessions in the descriptor test")
    parser.add_argument("--settle", type=non_negative_float, default=10.0, help="seconds processes get to die before counting")
    args = parser.parse_args(argv)
    return anyio.run(run, args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as stop:
        by = stop.args[0] if stop.args and isinstance(stop.args[0], str) else "SIGINT"
        print(f"interrupted ({by})", file=sys.stderr)
        sys.exit(130)
