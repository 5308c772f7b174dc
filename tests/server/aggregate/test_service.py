"""Small decisions of the aggregation service (server.aggregate.service)."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError

from server.aggregate.service import _says_not_found


def test_a_childs_error_reads_as_resource_not_found_only_when_it_says_so() -> None:
    assert _says_not_found(MCPError(-32002, "Resource not found"))
    assert _says_not_found(MCPError(-32602, "Unknown resource: notes://missing"))  # the Python SDK's servers
    # Another invalid-params answer (a template argument the child refused) stays the child's own error.
    assert not _says_not_found(MCPError(-32602, "Invalid value for 'day': must be 1-31"))
    assert not _says_not_found(MCPError(-32603, "Unknown resource: notes://missing"))
