"""Prometheus metrics of one copilot process, served at ``/metrics`` on the HTTP transport.

A private registry (not the process-global one), so several copilots in one process -- tests,
an embedding app -- never collide. Label values are bounded: ``server`` is a configured server
name or ``(unknown)`` (a client sending random names must not grow the metric set), ``kind``
is an ``ExecuteError`` kind, ``reason`` a pool stop reason.

| metric | type | labels |
|---|---|---|
| ``copilot_route_calls_total`` | counter | outcome |
| ``copilot_route_duration_seconds`` | histogram | |
| ``copilot_execute_calls_total`` | counter | server, outcome (ok, tool_error, error) |
| ``copilot_execute_errors_total`` | counter | server, kind |
| ``copilot_execute_duration_seconds`` | histogram | server |
| ``copilot_results_flagged_total`` | counter | server |
| ``copilot_child_starts_total`` | counter | server, outcome (ok, failed) |
| ``copilot_child_restarts_total`` | counter | server (starts after a crash or timeout, not after an idle stop) |
| ``copilot_child_stops_total`` | counter | server, reason |
| ``copilot_child_evictions_total`` | counter | server, reason (lru, idle) |
| ``copilot_live_children`` | gauge | |
| ``copilot_index_tools`` | gauge | |
| ``copilot_tools_held_back`` | gauge | |
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

UNKNOWN = "(unknown)"
#: Seconds: tool calls range from a millisecond (warm local child) to minutes (a slow remote one).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class _Gauges(Collector):
    """Values read when scraped (children alive now, index size, held-back tools)."""

    def __init__(self, readers: dict[str, tuple[str, Callable[[], float | None]]]) -> None:
        self._readers = readers

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, (documentation, read) in self._readers.items():
            try:
                value = read()
            except Exception:  # noqa: BLE001 -- a scrape must never fail because one reader did
                value = None
            if value is not None:
                yield GaugeMetricFamily(name, documentation, value=float(value))


class CopilotMetrics:
    """Counters and histograms the copilot updates, gauges it reads at scrape time."""

    def __init__(self, known_servers: Callable[[], Iterable[str]] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._known_servers = known_servers or (lambda: ())
        r = self.registry
        self.route_calls = Counter("copilot_route_calls", "route calls", ["outcome"], registry=r)
        self.route_duration = Histogram(
            "copilot_route_duration_seconds", "route latency", buckets=LATENCY_BUCKETS, registry=r
        )
        self.execute_calls = Counter("copilot_execute_calls", "execute calls", ["server", "outcome"], registry=r)
        self.execute_errors = Counter("copilot_execute_errors", "execute errors by kind", ["server", "kind"], registry=r)
        self.execute_duration = Histogram(
            "copilot_execute_duration_seconds", "execute latency per server", ["server"], buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.results_flagged = Counter(
            "copilot_results_flagged", "tool results, rendered prompts and read resources carrying injection markers", ["server"], registry=r
        )
        self.child_starts = Counter("copilot_child_starts", "child server starts", ["server", "outcome"], registry=r)
        self.child_restarts = Counter(
            "copilot_child_restarts", "child starts after the server's previous process crashed or timed out", ["server"],
            registry=r,
        )
        self.child_stops = Counter("copilot_child_stops", "child server stops by reason", ["server", "reason"], registry=r)
        self.child_evictions = Counter(
            "copilot_child_evictions", "children stopped to make room (lru) or for idling", ["server", "reason"], registry=r
        )
        self._readers: dict[str, tuple[str, Callable[[], float | None]]] = {}
        self.registry.register(_Gauges(self._readers))

    def bind_servers(self, known_servers: Callable[[], Iterable[str]]) -> None:
        """Where the configured server names come from (label values are limited to them)."""
        self._known_servers = known_servers

    def gauge(self, name: str, documentation: str, read: Callable[[], float | None]) -> None:
        self._readers[name] = (documentation, read)

    def server_label(self, server: str) -> str:
        return server if server in set(self._known_servers()) else UNKNOWN

    # -- events -----------------------------------------------------------------------------
    def route(self, seconds: float, error: bool) -> None:
        self.route_calls.labels("error" if error else "ok").inc()
        self.route_duration.observe(seconds)

    def execute(self, server: str, seconds: float, kind: str | None, tool_error: bool) -> None:
        label = self.server_label(server)
        outcome = "error" if kind else ("tool_error" if tool_error else "ok")
        self.execute_calls.labels(label, outcome).inc()
        if kind:
            self.execute_errors.labels(label, kind).inc()
        self.execute_duration.labels(label).observe(seconds)

    def flagged(self, server: str) -> None:
        self.results_flagged.labels(self.server_label(server)).inc()

    def child_started(self, server: str, ok: bool, restart: bool = False) -> None:
        """``restart``: the pool's verdict, the start brought the server back after its process failed."""
        label = self.server_label(server)
        self.child_starts.labels(label, "ok" if ok else "failed").inc()
        if ok and restart:
            self.child_restarts.labels(label).inc()

    def child_stopped(self, server: str, reason: str) -> None:
        label = self.server_label(server)
        self.child_stops.labels(label, reason).inc()
        if reason in ("evicted", "idle"):
            self.child_evictions.labels(label, "lru" if reason == "evicted" else "idle").inc()

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
