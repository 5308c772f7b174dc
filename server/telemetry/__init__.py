"""Operations: OpenTelemetry traces, Prometheus metrics, the status file and ``python -m server status``.

``hub.Telemetry`` is what the copilot feeds; ``tracing`` builds on the ``mcp`` SDK's own
OpenTelemetry spans and trace-context propagation; ``metrics`` is the ``/metrics`` registry;
``status`` the per-process status file; ``endpoints`` the HTTP routes; ``status_cli`` the command.
"""

from server.telemetry.hub import Telemetry, instrumented

__all__ = ["Telemetry", "instrumented"]
