"""A real MCP host for the relay tests: answers elicitation, sampling and roots, collects logs.

The host is the mcp SDK ``Client`` itself (either era); :class:`Host` holds its callbacks and what
they saw, so one module-scoped client serves many tests. ``relay_entry`` is a servers-file entry
for the relay fixture server (``tests/fixtures/relay_server.py``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

REPO = Path(__file__).resolve().parents[2]
RELAY_SERVER = REPO / "tests" / "fixtures" / "relay_server.py"


def relay_entry(name: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(RELAY_SERVER), "--name", name], **extra}


@dataclass
class Host:
    """The host's side: how it answers, and everything the copilot relayed to it."""

    root: Path
    elicit_answer: str = "accept"
    questions: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    root_requests: int = 0
    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params.message)
        if self.elicit_answer == "accept":
            return types.ElicitResult(action="accept", content={"name": "Ada", "approve": True})
        return types.ElicitResult(action=self.elicit_answer)  # type: ignore[arg-type]

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        message = params.messages[0].content
        self.prompts.append(getattr(message, "text", ""))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="a short summary"), model="host-model"
        )

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.root_requests += 1
        return types.ListRootsResult(roots=[types.Root(uri=self.root.as_uri(), name="project")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    def client_options(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicitation,
            "sampling_callback": self.sampling,
            "list_roots_callback": self.roots,
            "logging_callback": self.log,
        }


class Progress:
    """A progress callback that remembers what arrived and fires ``started`` on a "started …" message."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []
        self.started = anyio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))
        if message and message.startswith("started"):
            self.started.set()


def execute_args(server: str, tool: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"server_name": server, "tool_name": tool, "params": params or {}}
