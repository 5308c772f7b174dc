"""OpenTelemetry traces with the real SDK and an in-memory exporter: the host's trace context in
``_meta`` is continued through route/execute into the child (which reports the ``traceparent``
it received), child start/stop spans, outcomes; and OTLP/HTTP export from a real ``python -m
server`` process to a collector on 127.0.0.1 (server.telemetry.tracing)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from index.catalog.servers import load_servers
from server.app import build_app
from server.telemetry.tracing import configure_from_environment, tracing_requested
from tests.server.support.copilot_harness import (
    EXECUTE_ONLY,
    RunningClient,
    built_index,  # noqa: F401 -- session fixture
    copilot_env,
    copilot_settings,
    copy_home,
    fixture_entry,
    shapeshifter_entry,
    stdio_client_for,
    text_of,
    write_servers,
)


pytestmark = pytest.mark.timeout(180)

_EXPORTER = InMemorySpanExporter(max_spans=10_000)  # bounded: later tests of this process still emit spans


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider, installed once, exporting to memory."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _named(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    matches = [span for span in spans if span.name == name]
    assert matches, sorted(span.name for span in spans)
    return matches[-1]


def _servers(tmp_path: Path) -> Path:
    notes = shapeshifter_entry(tmp_path / "starts", "none", "--echo-meta")
    return write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha"), "notes": notes})


async def test_a_host_trace_continues_through_execute_into_the_child(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
    spans: InMemorySpanExporter,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    settings = copilot_settings(home, tmp_path, auto_index=False, warm_index=False)
    app = build_app(settings, load_servers(_servers(tmp_path)), start_now=True)
    host = trace.get_tracer("host-under-test")
    with anyio.fail_after(120):
        async with Client(app) as client:
            with host.start_as_current_span("host turn") as turn:
                routed = await client.call_tool("route", {"query": "echo the given text back", "top_k": 3})
                shown = await client.call_tool("execute", {"server_name": "notes", "tool_name": "show_meta"})
                missing = await client.call_tool("execute", {"server_name": "alpha", "tool_name": "no_such_tool"})
    assert not routed.is_error and not shown.is_error and missing.is_error
    trace_id = turn.get_span_context().trace_id
    finished = spans.get_finished_spans()

    route = _named(finished, "copilot.route")
    assert route.context.trace_id == trace_id  # continued from the host's _meta by the SDK's middleware
    assert route.attributes["copilot.outcome"] == "ok" and 1 <= route.attributes["copilot.route.results"] <= 3  # route may trim clearly irrelevant hits
    assert _named(finished, "tools/call route").kind == SpanKind.SERVER

    execute = _named(finished, "copilot.execute notes/show_meta")
    assert execute.context.trace_id == trace_id
    assert execute.attributes["copilot.server"] == "notes" and execute.attributes["copilot.tool"] == "show_meta"
    assert execute.attributes["copilot.outcome"] == "ok" and execute.attributes["copilot.latency_ms"] > 0
    to_child = _named(finished, "MCP send tools/call show_meta")
    assert to_child.kind == SpanKind.CLIENT and to_child.parent.span_id == execute.context.span_id

    received = json.loads(text_of(shown))["traceparent"]  # what the child got in its request's _meta
    _, child_trace, parent_span, _ = received.split("-")
    assert int(child_trace, 16) == trace_id and int(parent_span, 16) == to_child.context.span_id

    started = _named(finished, "copilot.child.start notes")
    assert started.attributes["copilot.outcome"] == "ok" and started.context.trace_id == trace_id
    failed = _named(finished, "copilot.execute alpha/no_such_tool")
    assert failed.status.status_code == StatusCode.ERROR and failed.attributes["copilot.error.kind"] == "unknown_tool"
    stopped = _named(finished, "copilot.child.stop notes")  # the pool stopped it when the copilot exited
    assert stopped.attributes["copilot.child.stop_reason"] == "shutdown"


def test_traces_are_requested_only_by_the_standard_variables() -> None:
    assert not tracing_requested({})
    assert tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracing_requested({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing_requested({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"})
    assert not tracing_requested({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"})
    assert configure_from_environment({}) is None


class _Collector(ThreadingHTTPServer):
    """A minimal OTLP/HTTP trace receiver on 127.0.0.1: stores every export request."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.received = threading.Event()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 -- http.server's naming
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.requests.append(request)
                collector.received.set()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


async def test_a_copilot_process_exports_spans_over_otlp(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    collector = _Collector()
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    try:
        home = copy_home(built_index, tmp_path / "home")
        env = copilot_env(
            home,
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.server_address[1]}",
            OTEL_SERVICE_NAME="copilot-under-test",
            **EXECUTE_ONLY,
        )
        running = RunningClient(stdio_client_for(_servers(tmp_path), env, tmp_path / "copilot.err"))
        client = await running.start()
        try:
            result = await client.call_tool("execute", {"server_name": "alpha", "tool_name": "echo", "params": {"text": "x"}})
            assert not result.is_error
        finally:
            await running.stop()  # the copilot flushes its batched spans before it exits
        assert await anyio.to_thread.run_sync(lambda: collector.received.wait(30))
    finally:
        collector.shutdown()
    exported = [
        (resource.resource, span)
        for request in collector.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    names = {span.name for _, span in exported}
    assert {"copilot.execute alpha/echo", "copilot.child.start alpha", "tools/call execute"} <= names
    service = {
        attribute.value.string_value
        for resource, _ in exported
        for attribute in resource.attributes
        if attribute.key == "service.name"
    }
    assert service == {"copilot-under-test"}
