"""OpenTelemetry traces: spans for ``route``/``execute`` and child start/stop, on top of the SDK's.

The installed ``mcp`` SDK already traces the protocol: its ``OpenTelemetryMiddleware`` opens a
SERVER span per request, continuing the trace context a host puts in ``_meta``
(``traceparent``), and its client opens a CLIENT span per request to a child and injects the
current context into that request's ``_meta``. The copilot's spans sit between the two -- a
``copilot.execute`` span is the current span while the child is called -- so one trace runs
from the host through the copilot into the child. Without an SDK every call here is a no-op.

:func:`configure_from_environment` installs the SDK (the ``otel`` extra: ``pip install
'.[otel]'``) when the standard variables ask for traces: ``OTEL_TRACES_EXPORTER`` (``otlp``,
``console`` -- to stderr, never stdout -- or ``none``) or an ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`` picks
``http/protobuf`` (default) or ``grpc``; ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``
name the service (default ``mcp-copilot``); ``OTEL_SDK_DISABLED=true`` turns it all off. A
tracer provider someone else installed (``opentelemetry-instrument``, an embedding app) is left
alone.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

logger = logging.getLogger(__name__)

TRACER_NAME = "mcp-copilot"
SERVICE_NAME = "mcp-copilot"


@functools.cache
def tracer() -> trace.Tracer:
    # Kept: until a provider is installed this is a proxy that switches to the provider's tracer
    # once one is, and trace.get_tracer() reads os.environ on every call (twice per tool call).
    return trace.get_tracer(TRACER_NAME)


@functools.cache
def _provider_named_in_environment() -> bool:
    return trace.OTEL_PYTHON_TRACER_PROVIDER in os.environ


def sdk_tracing_on() -> bool:
    """Whether a tracer provider is installed, so the SDK's protocol spans are recorded.

    The copilot's paths beside the SDK (``server.stdio.fast``, ``index.children.direct``) would skip
    those spans, so they step aside then. Asked on every tool call: the installed provider is read
    first, without the environment lookup ``trace.get_tracer_provider()`` makes until one is.
    """
    if getattr(trace, "_TRACER_PROVIDER", None) is not None:
        return True
    if hasattr(trace, "_TRACER_PROVIDER") and not _provider_named_in_environment():
        return False
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def tracing_requested(environ: Mapping[str, str]) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def _exporters(environ: Mapping[str, str]) -> list[Any]:
    names = [n.strip().lower() for n in (environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(",") if n.strip()]
    exporters: list[Any] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter(out=sys.stderr))  # stdout carries the protocol in stdio mode
        elif name == "otlp":
            protocol = (
                environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
            ).strip().lower()
            if protocol == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            else:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            exporters.append(OTLPSpanExporter())  # endpoint, headers, timeout: the standard OTEL_* variables
        else:
            logger.warning("OTEL_TRACES_EXPORTER=%s is not supported here (use otlp, console or none)", name)
    return exporters


def configure_from_environment(environ: Mapping[str, str] | None = None) -> Callable[[], None] | None:
    """Install an SDK tracer provider when ``OTEL_*`` asks for traces; returns its shutdown (flush)."""
    environ = os.environ if environ is None else environ
    if not tracing_requested(environ):
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "OTEL_* variables ask for traces, but the OpenTelemetry SDK is not installed: pip install 'mcp-copilot[otel]'"
        )
        return None
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        logger.info("an OpenTelemetry tracer provider is already installed; using it")
        return None
    try:
        exporters = _exporters(environ)
    except ImportError as error:
        logger.warning("OpenTelemetry exporter not available (%s): pip install 'mcp-copilot[otel]'", error)
        return None
    attributes = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
    provider = TracerProvider(resource=Resource.create(attributes))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    logger.info("OpenTelemetry tracing on (%s)", ", ".join(type(e).__name__ for e in exporters) or "no exporter")

    def shutdown() -> None:
        try:
            provider.shutdown()  # flushes what is still batched
        except Exception:  # noqa: BLE001 -- an unreachable collector must not fail the shutdown
            logger.warning("could not flush OpenTelemetry spans", exc_info=True)

    return shutdown


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span]:
    """An INTERNAL span that is current inside the block (so the SDK's client spans nest under it).

    With no tracer provider installed the span would record nothing: none is opened (on every
    tool call, the proxy tracer's context switch cost about as much as the rest of this telemetry).
    """
    if not sdk_tracing_on():
        yield trace.INVALID_SPAN
        return
    with tracer().start_as_current_span(
        name, kind=SpanKind.INTERNAL, attributes=dict(attributes or {}), record_exception=True
    ) as current:
        yield current


def mark_outcome(current: Span, outcome: str, error: str | None = None) -> None:
    current.set_attribute("copilot.outcome", outcome)
    if error is not None:
        current.set_status(Status(StatusCode.ERROR, error[:500]))


def record_interval(
    name: str, start_ns: int, end_ns: int, attributes: Mapping[str, Any], error: str | None = None
) -> None:
    """A span for something that already happened (a child's start, its life until it stopped)."""
    current = tracer().start_span(name, kind=SpanKind.INTERNAL, attributes=dict(attributes), start_time=start_ns)
    if error is not None:
        current.set_status(Status(StatusCode.ERROR, error[:500]))
    current.end(end_time=end_ns)
