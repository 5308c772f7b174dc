"""Asking the user to confirm a risky call through the host's elicitation, in either era.

A legacy host is asked directly before the call; a 2026-07-28 host gets an ``input_required``
result with the question under :data:`CONFIRM_KEY` and answers it by retrying ``execute``.
Hosts without form elicitation get the confirm-token flow instead (``server.policy``).
"""

from __future__ import annotations

from typing import Any, Final

import mcp_types as types

from server.relay.suspended import encode_state

#: The ``inputRequests`` key of the confirmation question.
CONFIRM_KEY: Final = "confirm"

_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve", "description": "Run this tool call?"}},
    "required": ["approve"],
}


def confirmation_request(message: str) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=_SCHEMA))


def confirmation_round(message: str, token: str) -> types.InputRequiredResult:
    """The ``input_required`` answer that asks a 2026-07-28 host to confirm.

    ``requestState`` carries a confirm token (``server.policy.Confirmations``): the host's answer
    redeems it, so one confirmed round runs the call once, within ``COPILOT_CONFIRM_TTL``; the SDK's
    seal alone would let the same retry run it again for ten minutes.
    """
    return types.InputRequiredResult(
        input_requests={CONFIRM_KEY: confirmation_request(message)}, request_state=encode_state(confirm=token)
    )


def approved(answer: Any) -> bool | None:
    """The user's decision in an elicitation answer: ``None`` when there is no usable answer."""
    if not isinstance(answer, types.ElicitResult):
        return None
    if answer.action != "accept":
        return False
    return bool((answer.content or {}).get("approve") is True)
