"""Arguments of the copilot's own tools that their schema does not name.

The SDK reads ``route``/``execute`` arguments with a model that ignores names it does not know, so
a misspelled ``qeury`` read as "the query is empty", and an ``execute`` with the tool's arguments
beside ``params`` instead of inside it read as "missing required parameter" -- both misleading
the model about what it sent. The copilot checks its children's params the same way
(:mod:`server.execute.validation`): an unknown name is an error that says which, and what was meant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from server.bounded import shown_name
from server.execute.validation import suggest

#: Unknown names listed in one message (a model may send dozens).
_LISTED = 5
#: Names models give the tool's arguments (what ``params`` holds), as other agent frameworks call
#: them. Fuzzy matching gets some of them wrong (``tool_input`` is closest to ``tool_name``, a
#: string), so these always point to ``params``.
_PARAMS_ALIASES = frozenset(
    {
        "arg", "args", "argument", "arguments", "input", "inputs", "kwargs", "param", "parameter",
        "parameters", "payload", "tool_arg", "tool_args", "tool_arguments", "tool_input", "tool_inputs",
        "tool_param", "tool_params", "tool_parameters",
    }
)


def _meant(name: str, known: list[str]) -> list[str]:
    """The argument ``name`` most likely stands for (none when no known name is close)."""
    if "params" in known and name.casefold().replace("-", "_") in _PARAMS_ALIASES:
        return ["params"]
    return suggest(name, known, limit=1)


def unknown_arguments(request_params: Mapping[str, Any] | None, schema: Mapping[str, Any]) -> list[str]:
    """Names in a ``tools/call`` request's ``arguments`` that ``schema`` does not declare, in the order sent."""
    arguments = request_params.get("arguments") if isinstance(request_params, Mapping) else None
    if not isinstance(arguments, Mapping):
        return []
    known = schema.get("properties", {})
    return [str(name) for name in arguments if name not in known]


def unknown_arguments_message(tool: str, unknown: Sequence[str], schema: Mapping[str, Any]) -> str:
    """What to tell the model about ``unknown`` argument names of the copilot's ``tool``."""
    known = list(schema.get("properties", {}))
    required = set(schema.get("required", ()))
    listed = unknown[:_LISTED]
    meant = {name: _meant(name, known) for name in listed}
    parts = [f"'{shown_name(n)}'" + (f" (did you mean '{meant[n][0]}'?)" if meant[n] else "") for n in listed]
    more = f" and {len(unknown) - _LISTED} more" if len(unknown) > _LISTED else ""
    takes = ", ".join(f"{name} (required)" if name in required else name for name in known)
    message = f"{tool} has no argument {', '.join(parts)}{more}. {tool} takes: {takes}."
    # A name close to none of execute's own is most likely one of the tool's arguments.
    if "params" in known and any(not close for close in meant.values()):
        message += " The tool's own arguments go inside params, e.g. params={\"name\": \"value\"}."
    return message


__all__ = ["unknown_arguments", "unknown_arguments_message"]
