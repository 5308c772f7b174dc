"""Relay benchmark: an ``execute`` from a real MCP host through the stdio copilot vs the same host
calling the child directly, in one run.

``python -m bench relay`` (or ``python -m bench.proxy.relay [--iterations N] [--baseline DIR] [--profile FILE]``)

One host process (this one, the mcp SDK ``Client`` over stdio) holds these sessions, all started
here and warmed first:

- *direct*: the child server (``tests/fixtures/relay_server.py``) as its own stdio server;
- *copilot*: ``python -m server`` with that same child in its servers file; each call is
  ``execute(server_name="fixture", tool_name=..., params=...)``;
- *raw-hop*: ``bench/proxy/raw_hop.py`` between the host and the same child, copying bytes unparsed,
  and called as the child is directly: the price of one more process on the way alone (two more
  pipe crossings), which any proxy pays before doing anything;
- *sdk-proxy*: ``bench/proxy/bare_proxy.py``, the thinnest proxy the SDK allows (an SDK server whose
  ``execute`` calls the child through an SDK client and relays progress; nothing else): the floor
  any SDK-based proxy pays for the extra hop, against which the copilot's own cost is read;
- *baseline* (with ``--baseline DIR``): the same, but the copilot runs from another checkout
  (e.g. ``/path/to/main``), to compare two versions under the very same load.

Each round calls every mode once, in an order that rotates from round to round, so load drift
hits all alike; a copilot's overhead is the median of its per-round differences to *direct*. Two
tools are measured, each with the host asking for progress (a ``progressToken`` on every call, as
hosts that show progress do): ``echo`` (no progress from the child) and ``progress`` (the child
sends 3 progress notifications, all relayed to the host). Target: the copilot adds <= 1.5 ms p50
over the direct call; the summary gives the verdict for each call, the copilot's cost against
the bare SDK proxy's in the same run, how much of it the hop alone costs, and what it would add
at the speed of the issue's machine (scaled by this run's plain direct call against the issue's
1.4 ms). The CPU each process spent per call is printed too: unlike latency, it barely moves when
other jobs load the machine.

``--profile FILE`` runs the copilot under cProfile (CPU time) and writes its stats to FILE.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.args import checkout, positive_int
from index.cli.console import HelpFormatter

PROJECT_DIR = Path(__file__).resolve().parents[2]
FIXTURE = PROJECT_DIR / "tests" / "fixtures" / "relay_server.py"
TARGET_OVERHEAD_MS = 1.5
#: The plain call's direct p50 on the machine where the issue set the target (its 5.0 ms vs 1.4 ms).
ISSUE_DIRECT_MS = 1.4


@dataclass(frozen=True)
class MeasuredCall:
    arguments: dict[str, Any]
    stands_for: str  # in the summary


TOOLS: dict[str, MeasuredCall] = {
    "echo": MeasuredCall({"text": "hello"}, "a plain call, progress relaying on (the host's token reaches the child)"),
    "progress": MeasuredCall({"steps": 3}, "a call relaying 3 progress notifications"),
}

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


def _copilot_env(home: Path, source: Path | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("COPILOT_")}
    env.update(
        {
            "COPILOT_HOME": str(home),
            "COPILOT_AUTO_INDEX": "false",
            "COPILOT_WARM_INDEX": "false",
            "COPILOT_LOG_LEVEL": "WARNING",
        }
    )
    if source is not None:  # the other checkout's packages win over this one's
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _processes(pids: dict[str, int]) -> dict[str, Any]:
    """The processes to account CPU to: each copilot, the child behind it, the child called directly."""
    import psutil

    found: dict[str, Any] = {}
    for name, pid in pids.items():
        process = psutil.Process(pid)
        found[name] = process
        for child in process.children(recursive=True):
            if "relay_server.py" in " ".join(child.cmdline()):
                found[f"{name}'s child"] = child
    return found


def _server_pids() -> dict[str, int]:
    """Pids of the MCP servers this process started, by mode (from their command lines)."""
    import psutil

    pids: dict[str, int] = {}
    for process in psutil.Process().children():
        line = " ".join(process.cmdline())
        if "bench.proxy.raw_hop" in line:  # first: the hop's command line names the child's script too
            pids["raw-hop"] = process.pid
        elif "relay_server.py" in line:
            pids["direct"] = process.pid
        elif "bench.proxy.bare_proxy" in line:
            pids["sdk-proxy"] = process.pid
        elif "--servers" in line:
            pids["baseline" if "baseline" in line else "copilot"] = process.pid
    return pids


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
        child = [sys.executable, str(FIXTURE), "--name", "fixture"]
        servers = root / "servers.json"
        servers.write_text(json.dumps({"mcpServers": {"fixture": {"command": child[0], "args": child[1:]}}}))
        launches: dict[str, StdioServerParameters] = {
            "direct": StdioServerParameters(command=child[0], args=child[1:]),
            # The extra process alone: bytes copied, nothing read (the host calls it as the child).
            "raw-hop": StdioServerParameters(
                command=sys.executable, args=["-m", "bench.proxy.raw_hop", *child], cwd=str(PROJECT_DIR)
            ),
            # The same hop with nothing of the copilot's in it: what any SDK-based proxy pays.
            "sdk-proxy": StdioServerParameters(
                command=sys.executable, args=["-m", "bench.proxy.bare_proxy", "--servers", str(servers)], cwd=str(PROJECT_DIR)
            ),
            "copilot": StdioServerParameters(
                command=sys.executable,
                args=(
                    ["-c", _PROFILED.format(out=str(Path(args.profile).resolve()), servers=str(servers))]
                    if args.profile
                    else ["-m", "server", "--servers", str(servers)]
                ),
                env=_copilot_env(root / "home", None),
            ),
        }
        if args.baseline:
            source = Path(args.baseline).resolve()
            baseline_servers = root / "baseline" / "servers.json"
            baseline_servers.parent.mkdir()
            baseline_servers.write_text(servers.read_text())
            launches["baseline"] = StdioServerParameters(
                command=sys.executable,
                args=["-m", "server", "--servers", str(baseline_servers)],
                env=_copilot_env(root / "baseline-home", source),
                cwd=str(source),
            )
        progress_seen = dict.fromkeys(launches, 0)
        samples: dict[str, dict[str, list[float]]] = {}
        cpu: dict[str, dict[str, float]] = {}
        async with AsyncExitStack() as stack:
            errlog = stack.enter_context((root / "stderr.log").open("w"))
            clients = {
                mode: await stack.enter_async_context(Client(stdio_client(params, errlog=errlog)))
                for mode, params in launches.items()
            }
            processes: dict[str, Any] = {}
            for tool, measured_call in TOOLS.items():
                if args.tools and tool not in args.tools:
                    continue
                calls = {mode: _call(client, mode, tool, measured_call.arguments, progress_seen) for mode, client in clients.items()}
                for _ in range(args.warmup):
                    for call in calls.values():
                        await _timed(call)
                processes = processes or _processes(_server_pids())  # after the warm-up: all children run
                before = {name: _cpu(process) for name, process in processes.items()}
                measured: dict[str, list[float]] = {mode: [] for mode in calls}
                order = list(calls)
                for index in range(args.iterations):
                    shift = index % len(order)
                    for mode in order[shift:] + order[:shift]:
                        measured[mode].append(await _timed(calls[mode]))
                cpu[tool] = {name: (_cpu(p) - before[name]) / args.iterations for name, p in processes.items()}
                samples[tool] = measured
            if args.profile:
                await _dump_profile(Path(args.profile))
    return _report(args, samples, cpu, progress_seen)


def _call(client: Client, mode: str, tool: str, params: dict[str, Any], seen: dict[str, int]) -> Any:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen[mode] += 1

    if mode in ("direct", "raw-hop"):
        return lambda: client.call_tool(tool, params, progress_callback=on_progress)
    arguments = {"server_name": "fixture", "tool_name": tool, "params": params}
    return lambda: client.call_tool("execute", arguments, progress_callback=on_progress)


def _report(
    args: argparse.Namespace, samples: dict[str, dict[str, list[float]]], cpu: dict[str, dict[str, float]], seen: dict[str, int]
) -> int:
    print(f"relay benchmark: {args.iterations} calls per mode and tool (host: mcp SDK Client over stdio)")
    print(f"{'tool':9} {'mode':10} {'p50':>10} {'p95':>10} {'overhead p50':>13} {'CPU/call':>9}  (child behind it)")
    added: dict[str, dict[str, float]] = {}  # tool -> mode -> median per-round difference to direct
    for tool, measured in samples.items():
        direct = measured["direct"]
        added[tool] = {
            mode: percentile([v - d for v, d in zip(values, direct, strict=True)], 0.5)
            for mode, values in measured.items()
            if mode != "direct"
        }
        for mode, values in measured.items():
            overhead = f"{added[tool][mode] * 1000:10.3f} ms" if mode in added[tool] else ""
            used = cpu[tool]
            own = used.get(mode, 0.0)
            behind = used.get(f"{mode}'s child")
            print(
                f"{tool:9} {mode:10} {percentile(values, 0.5) * 1000:7.3f} ms {percentile(values, 0.95) * 1000:7.3f} ms "
                f"{overhead:>13} {own * 1000:6.3f} ms" + (f"  ({behind * 1000:.3f} ms)" if behind is not None else "")
            )
    print("progress notifications received: " + ", ".join(f"{mode} {count}" for mode, count in seen.items()))
    plain_direct = percentile(samples["echo"]["direct"], 0.5) if "echo" in samples else None
    missed = 0
    for tool, overheads in added.items():
        copilot, floor, hop = overheads["copilot"], overheads["sdk-proxy"], overheads["raw-hop"]
        verdict = "met" if copilot * 1000 <= TARGET_OVERHEAD_MS else "NOT met"
        missed += verdict != "met"
        print(
            f"summary: {TOOLS[tool].stands_for}: the copilot adds {copilot * 1000:.3f} ms p50 (target <= {TARGET_OVERHEAD_MS} ms: "
            f"{verdict}); {hop_share(copilot, hop)}; a bare SDK proxy (bench/proxy/bare_proxy.py: no checks, logs or limits) "
            f"adds {floor * 1000:.3f} ms in the same run: the copilot costs "
            f"{copilot / floor if floor > 0 else float('nan'):.2f}x that floor"
            + (f"; {at_issue_speed(copilot, plain_direct)}" if plain_direct else "")
        )
    # Like the other benchmarks with a target (judge, faults, trust, conformance): a miss is exit 1.
    return 1 if missed else 0


def hop_share(added: float, hop: float) -> str:
    """How much of the copilot's ``added`` time (seconds) the extra process alone costs, in words."""
    return (
        f"the extra process alone (bench/proxy/raw_hop.py: bytes copied, nothing read) adds {hop * 1000:.3f} ms of it, "
        f"the copilot's own work {(added - hop) * 1000:.3f} ms"
    )


def at_issue_speed(added: float, plain_direct: float) -> str:
    """``added`` (seconds) read at the speed of the machine the issue measured on, in words.

    The target is absolute, but this shared VM's speed drifts: within one session the same direct
    call took 1.6 ms and 2.4 ms. Scaling by the plain call's direct time, measured in the same run,
    says what the copilot would add where that call takes the issue's 1.4 ms.
    """
    scaled = added * ISSUE_DIRECT_MS / (plain_direct * 1000)
    return (
        f"this run's plain direct call took {plain_direct * 1000:.3f} ms (the issue's: {ISSUE_DIRECT_MS} ms), "
        f"so at the issue's speed the copilot would add {scaled * 1000:.3f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.proxy.relay", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=HelpFormatter)
    parser.add_argument("--iterations", type=positive_int, default=300, help="measured calls per mode and tool")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured calls per mode and tool first")
    parser.add_argument("--baseline", type=checkout, metavar="DIR", help="also measure the copilot of another checkout (e.g. main)")
    parser.add_argument("--profile", metavar="FILE", help="run the copilot under cProfile, stats to FILE")
    parser.add_argument("--tools", nargs="+", choices=sorted(TOOLS), help="measure only these tools")
    args = parser.parse_args(argv)
    return anyio.run(run, args)


if __name__ == "__main__":
    sys.exit(main())
