"""Relay benchmark: an ``execute`` from a real MCP host through the stdio copilot vs the same host
calling the child directly, in one run.

``python -m bench relay`` (or ``python -m bench.relay [--iterations N] [--profile FILE]``)

One host process (this one, the mcp SDK ``Client`` over stdio) holds two sessions, both started
here and warmed first:

- *direct*: the fixture child server (``tests/fixtures/relay_server.py``) as its own stdio server;
- *copilot*: ``python -m server`` with that same child in its servers file; each call is
  ``execute(server_name="fixture", tool_name=..., params=...)``.

Calls alternate between the two (which goes first alternates too) so load drift hits both alike;
the copilot's overhead is the median of the paired differences. Two tools are measured, each with
the host asking for progress (a ``progressToken`` on every call, as hosts that show progress do):
``echo`` (no progress from the child) and ``progress`` (the child sends 3 progress notifications,
all relayed to the host). Target: the copilot adds <= 1.5 ms p50 over the direct call.

``--profile FILE`` runs the copilot under cProfile and writes its stats to FILE (for finding
what the hot path spends; the copilot exits cleanly when the host closes stdin, which flushes it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "relay_server.py"
TARGET_OVERHEAD_MS = 1.5
TOOLS: dict[str, dict[str, Any]] = {"echo": {"text": "hello"}, "progress": {"steps": 3}}


#: ``python -m server`` under cProfile; SIGUSR1 writes the stats so far (the host may kill it at exit).
_PROFILED = """
import cProfile, os, signal, time
from server.__main__ import serve
profile = cProfile.Profile(time.process_time)  # CPU time: waiting for the host or the child does not count
def dump(*_):
    profile.disable()
    profile.dump_stats({out!r} + ".tmp")
    os.replace({out!r} + ".tmp", {out!r})
signal.signal(signal.SIGUSR1, dump)
profile.enable()
os._exit(serve(["--servers", {servers!r}]))
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _child_command() -> list[str]:
    return [sys.executable, str(FIXTURE), "--name", "fixture"]


def _copilot_env(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("COPILOT_")}
    env.update(
        {
            "COPILOT_HOME": str(home),
            "COPILOT_AUTO_INDEX": "false",
            "COPILOT_WARM_INDEX": "false",
            "COPILOT_LOG_LEVEL": "WARNING",
        }
    )
    return env


def _processes() -> dict[str, Any]:
    """This process's MCP servers: the copilot, its child, and the child the host calls directly."""
    import psutil

    found: dict[str, Any] = {}
    for process in psutil.Process().children(recursive=True):
        try:
            line = " ".join(process.cmdline())
            parent = process.parent()
        except psutil.Error:
            continue
        if "relay_server.py" in line:
            found["direct child" if parent is not None and parent.pid == os.getpid() else "copilot child"] = process
        elif "server" in line and "--servers" in line:
            found["copilot"] = process
    return found


def _cpu(process: Any) -> float:
    try:
        times = process.cpu_times()
    except Exception:  # noqa: BLE001 -- a process that exited counts as idle
        return 0.0
    return float(times.user + times.system)


async def _dump_profile(path: Path) -> None:
    """Ask the profiled copilot (a child of this process) to write its stats, and wait for them."""
    import signal

    import psutil

    path.unlink(missing_ok=True)
    for process in psutil.Process().children(recursive=True):
        if "from server.__main__ import serve" in " ".join(process.cmdline()):
            process.send_signal(signal.SIGUSR1)
    with anyio.fail_after(60):
        while not path.exists():
            await anyio.sleep(0.1)


async def _timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    result = await call()
    elapsed = time.perf_counter() - start
    if getattr(result, "is_error", False):
        raise RuntimeError(f"call failed: {result.content}")
    return elapsed


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-relay-") as scratch:
        root = Path(scratch)
        command = _child_command()
        servers = root / "servers.json"
        servers.write_text(json.dumps({"mcpServers": {"fixture": {"command": command[0], "args": command[1:]}}}))
        copilot_args = ["-m", "server", "--servers", str(servers)]
        if args.profile:
            copilot_args = ["-c", _PROFILED.format(out=str(Path(args.profile).resolve()), servers=str(servers))]
        progress_seen = {"direct": 0, "copilot": 0}

        def on_progress(kind: str) -> Any:
            async def callback(progress: float, total: float | None, message: str | None) -> None:
                progress_seen[kind] += 1

            return callback

        async with AsyncExitStack() as stack:
            errlog = stack.enter_context((root / "stderr.log").open("w"))
            direct = await stack.enter_async_context(
                Client(stdio_client(StdioServerParameters(command=command[0], args=command[1:]), errlog=errlog))
            )
            copilot = await stack.enter_async_context(
                Client(
                    stdio_client(
                        StdioServerParameters(command=sys.executable, args=copilot_args, env=_copilot_env(root / "home")),
                        errlog=errlog,
                    )
                )
            )
            samples: dict[str, dict[str, list[float]]] = {}
            processes: dict[str, Any] = {}
            cpu: dict[str, dict[str, float]] = {}
            for tool, params in TOOLS.items():
                if args.tools and tool not in args.tools:
                    continue

                def direct_call(tool: str = tool, params: dict[str, Any] = params) -> Awaitable[Any]:
                    return direct.call_tool(tool, params, progress_callback=on_progress("direct"))

                def copilot_call(tool: str = tool, params: dict[str, Any] = params) -> Awaitable[Any]:
                    return copilot.call_tool(
                        "execute",
                        {"server_name": "fixture", "tool_name": tool, "params": params},
                        progress_callback=on_progress("copilot"),
                    )

                for _ in range(args.warmup):
                    await _timed(direct_call)
                    await _timed(copilot_call)
                measured: dict[str, list[float]] = {"direct": [], "copilot": []}
                processes = processes or _processes()  # after the warm-up: the copilot's child runs now
                before = {name: _cpu(process) for name, process in processes.items()}
                for index in range(args.iterations):
                    pair = [("direct", direct_call), ("copilot", copilot_call)]
                    for kind, call in pair if index % 2 == 0 else reversed(pair):
                        measured[kind].append(await _timed(call))
                cpu[tool] = {
                    name: (_cpu(process) - before[name]) / args.iterations for name, process in processes.items()
                }
                samples[tool] = measured
            if args.profile:
                await _dump_profile(Path(args.profile))
        print(f"relay benchmark: {args.iterations} calls per mode and tool (host: mcp SDK Client over stdio)")
        print(f"{'tool':9} {'direct p50':>11} {'copilot p50':>12} {'overhead p50':>13} {'copilot p95':>12} ratio")
        worst = 0.0
        for tool, measured in samples.items():
            overhead = percentile([c - d for c, d in zip(measured["copilot"], measured["direct"], strict=True)], 0.5)
            worst = max(worst, overhead)
            direct_p50, copilot_p50 = percentile(measured["direct"], 0.5), percentile(measured["copilot"], 0.5)
            print(
                f"{tool:9} {direct_p50 * 1000:8.3f} ms {copilot_p50 * 1000:9.3f} ms {overhead * 1000:10.3f} ms "
                f"{percentile(measured['copilot'], 0.95) * 1000:9.3f} ms {copilot_p50 / direct_p50:.2f}x"
            )
        print(f"progress notifications received: direct {progress_seen['direct']}, copilot {progress_seen['copilot']}")
        for tool, used in cpu.items():
            if "copilot" in used:
                print(
                    f"{tool}: CPU per call -- copilot process {used['copilot'] * 1000:.3f} ms, the child behind it "
                    f"{used.get('copilot child', 0) * 1000:.3f} ms, the child called directly "
                    f"{used.get('direct child', 0) * 1000:.3f} ms"
                )
        verdict = "met" if worst * 1000 <= TARGET_OVERHEAD_MS else "NOT met"
        print(f"summary: copilot overhead {worst * 1000:.3f} ms p50 (target <= {TARGET_OVERHEAD_MS} ms: {verdict})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300, help="measured calls per mode and tool")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured calls per mode and tool first")
    parser.add_argument("--profile", metavar="FILE", help="run the copilot under cProfile, stats to FILE")
    parser.add_argument("--tools", nargs="+", choices=sorted(TOOLS), help="measure only these tools")
    args = parser.parse_args(argv)
    return anyio.run(run, args)


if __name__ == "__main__":
    sys.exit(main())
