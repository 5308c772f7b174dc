"""Who answers the copilot's confirmation questions in a benchmark run (``--confirm``).

The copilot gates destructive and untrusted tools behind the user's OK: through MCP elicitation
when the client supports it, else with a confirm token the agent is told to redeem only after
asking the user. A benchmark has no user, and LiveMCPBench's setting had no confirmation at all,
so the built-in agent's MCP client answers for one:

- ``approve`` (default): elicits are answered "yes", as a user who approves everything would;
- ``deny``: answered "no" (the copilot tells the agent the user declined);
- ``ask``: the client offers no elicitation, so the copilot answers with the confirm-token
  message and the agent decides itself (the setting of a host without elicitation).

Every question and answer is logged as a ``confirmation`` event; the report counts them per task.
With ``--agent-cmd`` the agent's own MCP host answers (policy ``host``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from server.trajectory.records import ConfirmationEvent

if TYPE_CHECKING:
    from mcp.client.session import ElicitationFnT

logger = logging.getLogger(__name__)

ConfirmPolicy = Literal["approve", "deny", "ask", "host"]
#: Policies the built-in agent's client can apply (``host``: an external agent's host decides).
CLIENT_POLICIES: tuple[ConfirmPolicy, ...] = ("approve", "deny", "ask")
DEFAULT_POLICY: ConfirmPolicy = "approve"

#: The copilot's confirmation question names the call: "… wants to run SERVER/TOOL: reason".
_CALL = re.compile(r"wants to run (?P<server>[^\s/]+)/(?P<tool>\S+?):")
#: The field of the copilot's confirmation form (``server.app.ConfirmCall``).
APPROVE_FIELD = "approve"


def _is_confirmation_form(params: Any) -> bool:
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    field = properties.get(APPROVE_FIELD) if isinstance(properties, dict) else None
    return isinstance(field, dict) and field.get("type") == "boolean"


def elicitation_answerer(policy: ConfirmPolicy, record: Callable[[ConfirmationEvent], None]) -> ElicitationFnT | None:
    """The client's elicitation callback for ``policy`` (``None`` for ``ask``: no elicitation).

    Only the copilot's own confirmation form is answered by policy; any other question (a child
    server's own elicitation relayed by the copilot) cannot be answered by a runner and is
    declined, and logged the same way.
    """
    if policy not in ("approve", "deny"):
        return None
    from mcp import types  # here: importing the SDK takes a second, and `--help` needs none of it

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        message = getattr(params, "message", "") or ""
        call = _CALL.search(message)
        approve = policy == "approve" and _is_confirmation_form(params) and getattr(params, "mode", "form") == "form"
        record(
            ConfirmationEvent(
                message=message[:2000],
                answer="approved" if approve else "declined",
                policy=policy,
                server=call.group("server") if call else None,
                tool=call.group("tool") if call else None,
            )
        )
        if approve:
            return types.ElicitResult(action="accept", content={APPROVE_FIELD: True})
        return types.ElicitResult(action="decline")

    return answer
