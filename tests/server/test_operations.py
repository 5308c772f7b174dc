"""Operations of a real ``python -m server --http`` process: ``/metrics`` read with Prometheus' own
text parser (behind the same token as ``/mcp``), and ``python -m server status`` reading the
status file the running copilot keeps (server.telemetry)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from server.telemetry.status import ChildStatus, CopilotStatus, process_created, read_statuses, status_path, write_status
from tests.server.support.copilot_harness import (
    HttpCopilot,
    RunningClient,
    built_index,  # noqa: F401 -- session fixture
    copilot_env,
    copy_home,
    fixture_entry,
    free_port,
    http_client_for,
    write_servers,
)
from tests.support.cli import server_status

pytestmark = pytest.mark.timeout(240)

TOKEN = "metrics-token-0123456789"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


async def wait_for(check: Callable[[], object], timeout: float = 30.0) -> object:
    """Bounded polling for state another process reaches on its own schedule."""
    with anyio.fail_after(timeout):
        while not (result := await anyio.to_thread.run_sync(check)):
            await anyio.sleep(0.2)
    return result


async def test_metrics_and_status_of_a_running_http_copilot(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha"), "beta": fixture_entry("beta")})
    port = free_port()
    env = copilot_env(
        home, COPILOT_HTTP_TOKEN=TOKEN, COPILOT_AUTO_INDEX="false", COPILOT_MAX_LIVE_CHILDREN="1",
        COPILOT_RESTART_BACKOFF="0",
    )
    process = HttpCopilot(["--servers", str(servers), "--http", "--port", str(port)], env, tmp_path, tmp_path / "err.log")
    await process.start()
    base = f"http://127.0.0.1:{port}"
    try:
        running = RunningClient(http_client_for(f"{base}/mcp", token=TOKEN))
        client = await running.start()
        try:
            for _ in range(3):
                ok = await client.call_tool("execute", {"server_name": "alpha", "tool_name": "echo", "params": {"text": "x"}})
                assert not ok.is_error
            await client.call_tool("execute", {"server_name": "alpha", "tool_name": "no_such_tool"})
            await client.call_tool("execute", {"server_name": f"random-{os.getpid()}", "tool_name": "x"})
            await client.call_tool("execute", {"server_name": "alpha", "tool_name": "crash"})
            await client.call_tool("execute", {"server_name": "alpha", "tool_name": "echo", "params": {"text": "again"}})
            await client.call_tool("execute", {"server_name": "beta", "tool_name": "echo", "params": {"text": "b"}})

            async with httpx2.AsyncClient(timeout=30) as http:
                assert (await http.get(f"{base}/metrics")).status_code == 401
                assert (await http.get(f"{base}/metrics", headers={"Origin": "https://evil.example"})).status_code == 403

                async def scrape() -> Samples:
                    response = await http.get(f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                    assert response.status_code == 200
                    assert response.headers["content-type"].startswith("text/plain")
                    return parse(response.text)

                samples = await scrape()
                with anyio.fail_after(60):  # the index loads in the background; its size appears when it has
                    while value(samples, "copilot_index_tools") is None:
                        await anyio.sleep(0.2)
                        samples = await scrape()

            assert value(samples, "copilot_route_calls_total", outcome="ok") is None
            assert value(samples, "copilot_execute_calls_total", server="alpha", outcome="ok") == 4
            assert value(samples, "copilot_execute_errors_total", server="alpha", kind="unknown_tool") == 1
            assert value(samples, "copilot_execute_errors_total", server="alpha", kind="child_crashed") == 1
            # A made-up server name is not a label value: clients cannot grow the metric set.
            assert value(samples, "copilot_execute_errors_total", server="(unknown)", kind="unknown_server") == 1
            assert not any(f"random-{os.getpid()}" in str(labels) for _, labels in samples)
            assert value(samples, "copilot_execute_duration_seconds_count", server="alpha") == 6
            assert value(samples, "copilot_execute_duration_seconds_bucket", server="alpha", le="+Inf") == 6
            assert value(samples, "copilot_child_starts_total", server="alpha", outcome="ok") == 2
            assert value(samples, "copilot_child_restarts_total", server="alpha") == 1
            assert value(samples, "copilot_child_stops_total", server="alpha", reason="crashed") == 1
            # Calling beta with room for one child evicted alpha (least recently used).
            assert value(samples, "copilot_child_evictions_total", server="alpha", reason="lru") == 1
            assert value(samples, "copilot_live_children") == 1
            assert (value(samples, "copilot_index_tools") or 0) > 0
            assert value(samples, "copilot_tools_held_back") == 0

            # route last: it starts its best servers in the background, which would blur the child counts.
            assert not (await client.call_tool("route", {"query": "echo text"})).is_error
            async with httpx2.AsyncClient(timeout=30) as http:
                after = parse((await http.get(f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})).text)
            assert value(after, "copilot_route_calls_total", outcome="ok") == 1
            assert value(after, "copilot_route_duration_seconds_count") == 1

            def current() -> CopilotStatus | None:
                statuses, _ = read_statuses(home, remove_stale=False)
                mine = [s for s in statuses if s.pid == process.process.pid]
                ready = mine and mine[0].calls.get("execute") == 8 and mine[0].calls.get("route") == 1
                # The model's warm-up ends on its own schedule; the status file shows it within seconds.
                loaded = mine and mine[0].index.get("model_state") == {"state": "loaded"}
                return mine[0] if ready and loaded and mine[0].index.get("tool_count") else None

            status = await wait_for(current, timeout=240)
            assert status.transport == "http" and status.http_url == f"http://127.0.0.1:{port}/mcp"
            assert {child.server: child.calls for child in status.children} == {"alpha": 5, "beta": 1}  # pool calls: unknown_tool never reached it
            assert [e.kind for e in status.recent_errors] == ["unknown_tool", "unknown_server", "child_crashed"]

            shown = await anyio.to_thread.run_sync(lambda: server_status(home))
            assert shown.returncode == 0, shown.stderr
            assert f"copilot pid {process.process.pid} (http at http://127.0.0.1:{port}/mcp)" in shown.stdout
            assert "calls: 1 route, 8 execute (3 errors)" in shown.stdout
            assert f"tools, model {status.index['model']} (loaded)" in shown.stdout
            assert "beta" in shown.stdout and "child_crashed" in shown.stdout
            listed = json.loads((await anyio.to_thread.run_sync(lambda: server_status(home, "--json"))).stdout)
            assert [item["pid"] for item in listed] == [process.process.pid]
        finally:
            await running.stop()
    finally:
        await process.stop()
    assert not status_path(home, process.process.pid).exists()  # removed when the copilot stopped
    gone = await anyio.to_thread.run_sync(lambda: server_status(home))
    assert gone.returncode == 1 and "no copilot is running" in gone.stdout


def test_status_of_a_killed_copilot_is_reported_stale_and_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    path = status_path(tmp_path, pid)
    write_status(
        path, CopilotStatus(pid=pid, process_created=1.0, transport="stdio", started_at="x", updated_at="y")
    )
    path.with_name("copilot-999999999.json").write_text("{not json", encoding="utf-8")
    statuses, notes = read_statuses(tmp_path)
    assert statuses == []
    assert any("no longer running" in note for note in notes) and any("unreadable" in note for note in notes)
    assert not path.exists()


def test_a_damaged_status_file_is_a_note_and_a_childs_state_is_shown_as_written(tmp_path: Path) -> None:
    # Before: a negative pid ended `status` in a ValueError traceback, a state of "[/]" in rich's MarkupError.
    damaged = {"pid": -5, "transport": "stdio", "started_at": "x", "updated_at": "y"}
    status_path(tmp_path, 424242).parent.mkdir(parents=True, exist_ok=True)
    status_path(tmp_path, 424242).write_text(json.dumps(damaged), encoding="utf-8")
    status = CopilotStatus(
        pid=os.getpid(), process_created=process_created(), transport="stdio", started_at="x", updated_at="y",
        children=[
            ChildStatus(server="s", state="[/]odd [bold]state", isolated=True),
            ChildStatus(server="t", state="running", isolated=False),
        ],
    )
    write_status(status_path(tmp_path), status)
    printed = server_status(tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert "Traceback" not in printed.stderr and "[/]odd [bold]state" in printed.stdout
    rows = [line.split() for line in printed.stdout.splitlines() if line.strip()[:1] in ("│", "|")]
    isolated = {row[1]: row[-4] for row in rows if len(row) > 4 and row[1] in ("s", "t")}
    assert isolated == {"s": "yes", "t": "no"}
    assert "copilot-424242.json" in printed.stdout + printed.stderr


@pytest.mark.parametrize(
    ("model_state", "shown"),
    [
        ({"state": "loading"}, "model m (loading: route answers by keywords until it is loaded)"),
        (
            {"state": "failed", "reason": "cannot load the embedding model from /x", "attempts": 2},
            "model m (failed to load: cannot load the embedding model from /x; route answers by keywords until a "
            "retry loads it)",
        ),
        ({}, "3 tools, model m\n"),  # a copilot that does not say
        (
            {"state": "loaded"},
            "3 tools, model m (loaded); usage prior of 12 trajectories, weight 0.5\n",
        ),
    ],
)
def test_status_says_how_route_ranks_while_the_model_is_not_in(
    tmp_path: Path, model_state: dict[str, object], shown: str
) -> None:
    index: dict[str, object] = {"model": "m", "tool_count": 3, **({"model_state": model_state} if model_state else {})}
    if model_state.get("state") == "loaded":  # and route adds a usage prior
        index["usage_prior"] = {"file": "/home/u/usage-prior.json", "trajectories": 12, "tools": 30, "weight": 0.5}
    status = CopilotStatus(
        pid=os.getpid(), process_created=process_created(), transport="stdio", started_at="x", updated_at="y",
        index=index,
    )
    write_status(status_path(tmp_path), status)
    printed = server_status(tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert shown in printed.stdout
