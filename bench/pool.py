"""Child pool benchmark: warm pool vs a direct client call vs spawn-per-call, and concurrency.

``python -m bench pool`` (or ``python -m bench.pool [--iterations N] [--spawn-iterations M] [--no-real]``)

Per server (the fixture server, plus the real ``time`` via uvx and ``memory`` via npx when they
start) one run measures, interleaved so machine noise hits all alike:

- *direct*: ``session.call_tool`` on the pool's own already-open client session (the floor);
- *pool*: ``ChildPool.call_tool`` on a warm child (pool overhead = pool - direct, target <= 1 ms p50);
- *spawn*: what the paper's copilot does per call -- new process, initialize, call, close -- under
  one global lock (target: pool >= 500x faster).

Then 8 calls to ``sleep`` on 8 fixture servers: concurrently through the pool vs one after another
(the global lock's behaviour) vs a single call (target: 8 concurrent ~ 1 call).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from bench.args import non_negative_float, positive_int
from index.children.connect import open_session
from index.cli.console import HelpFormatter
from index.errors import CopilotError
from index.catalog.servers import ServerConfig
from server.pool.sessions import ChildPool, PoolSettings

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fixture_server.py"


@dataclass
class Target:
    name: str
    config: ServerConfig
    tool: str
    arguments: dict[str, Any]


def targets(include_real: bool) -> list[Target]:
    fixture = ServerConfig(name="fixture", command=sys.executable, args=[str(FIXTURE), "--name", "fixture"])
    chosen = [Target("fixture", fixture, "echo", {"text": "hello"})]
    if include_real:
        chosen.append(
            Target(
                "time",
                ServerConfig(name="time", command="uvx", args=["mcp-server-time"]),
                "get_current_time",
                {"timezone": "UTC"},
            )
        )
        chosen.append(
            Target(
                "memory",
                ServerConfig(name="memory", command="npx", args=["-y", "@modelcontextprotocol/server-memory"]),
                "read_graph",
                {},
            )
        )
    return chosen


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.3f} ms"


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def measure_target(
    target: Target, pool: ChildPool, work: Path, iterations: int, spawn_iterations: int
) -> dict[str, list[float]] | str:
    """Latencies per mode, or the reason the server could not be measured."""
    samples: dict[str, list[float]] = {"direct": [], "pool": [], "spawn": []}
    try:
        await pool.call_tool(target.name, target.tool, target.arguments, timeout=180)  # starts the child
    except CopilotError as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    connection = pool.connection(target.name)
    assert connection is not None
    # Direct calls go to the very session the pool uses, so the difference is the pool's own work,
    # not the noise between two child processes.
    session = connection.session
    for _ in range(5):
        await session.call_tool(target.tool, target.arguments)
        await pool.call_tool(target.name, target.tool, target.arguments)
    for index in range(iterations):
        direct_call = lambda: session.call_tool(target.tool, target.arguments)  # noqa: E731
        pool_call = lambda: pool.call_tool(target.name, target.tool, target.arguments)  # noqa: E731
        # Alternate which goes first: the second call of a pair tends to run on warmer caches.
        if index % 2:
            samples["pool"].append(await timed(pool_call))
            samples["direct"].append(await timed(direct_call))
        else:
            samples["direct"].append(await timed(direct_call))
            samples["pool"].append(await timed(pool_call))

    global_lock = anyio.Lock()  # the paper's copilot serializes every execute behind one lock
    phases: dict[str, list[float]] = {"spawn:start": [], "spawn:call": [], "spawn:close": []}

    async def spawn_call() -> None:
        async with global_lock:
            begin = time.perf_counter()
            async with open_session(target.config, workdir=work / f"spawn-{target.name}", init_timeout=180) as fresh:
                started = time.perf_counter()
                await fresh.session.call_tool(target.tool, target.arguments)
                called = time.perf_counter()
            phases["spawn:start"].append(started - begin)
            phases["spawn:call"].append(called - started)
            phases["spawn:close"].append(time.perf_counter() - called)

    try:
        for _ in range(spawn_iterations):
            samples["spawn"].append(await timed(spawn_call))
    except CopilotError as error:
        return f"spawn-per-call failed: {type(error).__name__}: {str(error).splitlines()[0]}"
    return samples | phases


async def measure_concurrency(settings: PoolSettings, servers: int, seconds: float) -> dict[str, float]:
    configs = {
        f"sleepy{i}": ServerConfig(
            name=f"sleepy{i}", command=sys.executable, args=[str(FIXTURE), "--name", f"sleepy{i}"]
        )
        for i in range(servers)
    }
    async with ChildPool(configs, settings) as pool:
        async with anyio.create_task_group() as group:  # start all children first
            for name in configs:
                group.start_soon(pool.list_tools, name)
        arguments = {"seconds": seconds}
        single = await timed(lambda: pool.call_tool("sleepy0", "sleep", arguments))

        async def sequential() -> None:
            for name in configs:
                await pool.call_tool(name, "sleep", arguments)

        async def concurrent() -> None:
            async with anyio.create_task_group() as group:
                for name in configs:
                    group.start_soon(pool.call_tool, name, "sleep", arguments)

        return {"single": single, "sequential": await timed(sequential), "concurrent": await timed(concurrent)}


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as scratch:
        work = Path(scratch)
        settings = PoolSettings(home=work / "home", max_live_children=32)
        chosen = targets(not args.no_real)
        print(f"pool benchmark: {args.iterations} warm calls per mode, {args.spawn_iterations} spawn-per-call calls")
        print(f"{'server':8} {'mode':12} {'p50':>12} {'p95':>12}")
        overheads: list[float] = []
        speedups: list[float] = []
        async with ChildPool({t.name: t.config for t in chosen}, settings) as pool:
            for target in chosen:
                result = await measure_target(target, pool, work, args.iterations, args.spawn_iterations)
                if isinstance(result, str):
                    print(f"{target.name:8} skipped: {result}")
                    continue
                for mode, values in result.items():
                    print(f"{target.name:8} {mode:12} {ms(percentile(values, 0.5))} {ms(percentile(values, 0.95))}")
                pooled, spawned = percentile(result["pool"], 0.5), percentile(result["spawn"], 0.5)
                # Calls alternate direct/pool, so per-pair differences cancel most of the load drift.
                overhead = percentile([p - d for p, d in zip(result["pool"], result["direct"], strict=True)], 0.5)
                overheads.append(overhead)
                speedups.append(spawned / pooled)
                print(
                    f"{target.name:8} pool overhead over direct (median of paired differences): "
                    f"{overhead * 1000:.3f} ms (target <= 1 ms); spawn-per-call / pool (p50): "
                    f"{spawned / pooled:,.0f}x (target >= 500x)"
                )
        concurrency = await measure_concurrency(settings, args.servers, args.sleep)
        print(
            f"\n{args.servers} calls of sleep({args.sleep:g}s) on {args.servers} servers: one call "
            f"{concurrency['single']:.2f}s, concurrent {concurrency['concurrent']:.2f}s "
            f"({concurrency['concurrent'] / concurrency['single']:.2f}x one call), one after another "
            f"{concurrency['sequential']:.2f}s ({concurrency['sequential'] / concurrency['concurrent']:.1f}x slower "
            "than concurrent)"
        )
        if overheads:
            print(
                f"summary: worst pool overhead {max(overheads) * 1000:.3f} ms p50; "
                f"smallest speed-up over spawn-per-call {min(speedups):,.0f}x"
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pool", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=HelpFormatter)
    parser.add_argument("--iterations", type=positive_int, default=300, help="warm calls per mode and server")
    parser.add_argument("--spawn-iterations", type=positive_int, default=5, help="spawn-per-call calls per server")
    parser.add_argument("--servers", type=positive_int, default=8, help="servers in the concurrency test")
    parser.add_argument("--sleep", type=non_negative_float, default=0.5, help="seconds each concurrent call sleeps")
    parser.add_argument("--no-real", action="store_true", help="only the fixture server (no uvx/npx servers)")
    args = parser.parse_args(argv)
    return anyio.run(run, args)


if __name__ == "__main__":
    sys.exit(main())
