"""Unknown argument names of the copilot's own tools (server.execute.arguments)."""

from __future__ import annotations

from server.app import EXECUTE_SCHEMA, ROUTE_SCHEMA
from server.execute.arguments import unknown_arguments, unknown_arguments_message


def test_unknown_names_are_those_the_schema_does_not_declare_in_the_order_sent() -> None:
    request = {"name": "execute", "arguments": {"tool": "x", "server_name": "a", "timezone": "UTC"}}
    assert unknown_arguments(request, EXECUTE_SCHEMA) == ["tool", "timezone"]
    assert unknown_arguments({"name": "route", "arguments": {"query": "x", "top_k": 3}}, ROUTE_SCHEMA) == []


def test_requests_without_an_arguments_object_have_no_unknown_names() -> None:
    for request in (None, {}, {"name": "route"}, {"name": "route", "arguments": None}, {"arguments": ["query"]}):
        assert unknown_arguments(request, ROUTE_SCHEMA) == [], request


def test_the_message_suggests_the_meant_name_and_lists_what_the_tool_takes() -> None:
    message = unknown_arguments_message("route", ["qeury"], ROUTE_SCHEMA)
    assert message == "route has no argument 'qeury' (did you mean 'query'?). route takes: query (required), top_k, server, kind."


def test_a_tools_own_arguments_beside_params_are_sent_inside_params() -> None:
    message = unknown_arguments_message("execute", ["timezone"], EXECUTE_SCHEMA)
    assert message.startswith("execute has no argument 'timezone'. execute takes: server_name (required), tool_name (required), params, confirm.")
    assert message.endswith('The tool\'s own arguments go inside params, e.g. params={"name": "value"}.')
    assert "inside params" not in unknown_arguments_message("execute", ["server"], EXECUTE_SCHEMA)


def test_one_name_close_to_none_of_executes_own_points_to_params_beside_a_misspelt_one() -> None:
    # "server" is a misspelt server_name, but "timezone" is still one of the tool's own arguments.
    message = unknown_arguments_message("execute", ["server", "timezone"], EXECUTE_SCHEMA)
    assert message.startswith("execute has no argument 'server' (did you mean 'server_name'?), 'timezone'.")
    assert message.endswith('The tool\'s own arguments go inside params, e.g. params={"name": "value"}.')


def test_many_or_huge_unknown_names_keep_the_message_short() -> None:
    names = [f"extra_{n}" for n in range(40)] + ["x" * 10_000]
    message = unknown_arguments_message("execute-tool", names, EXECUTE_SCHEMA)
    assert "'extra_4'" in message and "'extra_5'" not in message
    assert "and 36 more" in message
    assert len(message) < 600
    assert len(unknown_arguments_message("route", ["y" * 10_000], ROUTE_SCHEMA)) < 400
