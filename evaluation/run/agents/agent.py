"""The built-in agent: LiveMCPBench's MCP Copilot Agent, a ReAct loop over ``route``/``execute``.

Like the paper's agent (``baseline/run_conversation.py``) it talks to the copilot through a real
MCP client session, offers the model exactly the tools the copilot lists (names, descriptions and
schemas as published), answers every tool call with the tool's result cut to a size limit, and
stops at the first reply without tool calls — that reply is the final answer. Any
OpenAI-compatible chat endpoint with tool calling works; each model call logs a ``usage`` event.
"""

from __future__ import annotations

import json
import logging
import math
import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import anyio
from pydantic import BaseModel, Field

from index.catalog.redact import redact_url
from index.json_text import arguments_for_os, environment_for_os, parse_json
from evaluation.run.agents.bounded_log import LogCut
from evaluation.run.task_setup.copilot_launch import CopilotLaunch
from evaluation.llm import (
    BACKOFF_WAIT_CAP,
    UNREADABLE_BODY_ERRORS,
    describe_api_error,
    describe_unreadable_body,
    reply_field,
    request_deadline,
    usage_counts,
)
from evaluation.run.models import ErrorKind, ModelPrice
from index.errors import CopilotError
from server.trajectory.records import Usage

# The SDK and the openai client are imported where they are used: together they take two seconds,
# and neither `--help` nor a wrong argument needs them.
if TYPE_CHECKING:
    import openai
    from mcp import ClientSession
    from mcp.client.session import ElicitationFnT
    from mcp.types import CallToolResult, ListToolsResult

logger = logging.getLogger(__name__)

#: The paper's system prompt, verbatim (first message of every published trajectory).
SYSTEM_PROMPT = """\
You are an agent designed to assist users with daily tasks by using external tools. You have access to two tools: a retrieval tool and an execution tool. The retrieval tool allows you to search a large toolset for relevant tools, and the execution tool lets you invoke the tools you retrieved. Whenever possible, you should use these tools to get accurate, up-to-date information and to perform file operations.

Note that you can only response to user once, so you should try to provide a complete answer in your response.
"""
#: How the built-in agent introduces itself to the copilot (``clientInfo``).
CLIENT_NAME, CLIENT_VERSION = "mcp-copilot-benchmark-agent", "1"

#: Added to a final answer the endpoint ended with ``finish_reason: "length"``.
ANSWER_CUT_NOTE = "[the answer was cut here: the model reached its output limit (finish_reason: length)]"

#: The longest model name a ``usage`` event takes from the endpoint's reply; a longer one (or one
#: with control characters) is replaced by the configured model (a 5 MB name made 5 MB lines).
MAX_MODEL_NAME_CHARS = 200

#: Error codes (or types) that mean the conversation no longer fits the model's context: OpenAI's,
#: and llama.cpp's server's.
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
#: How endpoints word the same (OpenAI and vLLM: "This model's maximum context length is ...";
#: Anthropic-style: "prompt is too long").
_CONTEXT_WORDS = ("context length", "context window", "too many tokens", "prompt is too long")
_TOOL_WORDS = r"(?:tools?|tool[ _-]?(?:calls?|calling|choice|use|messages?)|function[ _-]?(?:calls?|calling)|functions)"
#: An endpoint saying, in so many words, that it does not take tool calling ("tools are not
#: supported", "this model does not support tools", "function calling is not enabled"). Mentioning
#: tools or functions is not enough: OpenAI's context overflow counts tokens "in the functions".
_TOOLS_UNSUPPORTED = re.compile(
    rf"\b{_TOOL_WORDS}\b[^.;\n]{{0,60}}?\b(?:not supported|unsupported|not enabled)\b"
    rf"|\b(?:unsupported|does ?n[o']t support|do ?n[o']t support|no support for)\b[^.;\n]{{0,40}}?\b{_TOOL_WORDS}\b"
)


class AgentConfig(BaseModel):
    model: str
    temperature: float = Field(default=0.7, ge=0, le=2, description="Sampling temperature (OpenAI's range).")
    max_turns: int = Field(default=50, ge=1, description="Model calls per task.")
    max_tool_result_chars: int = Field(default=10_000, ge=100, description="As the paper's max_tool_tokens (characters).")
    tool_timeout: float = Field(default=300.0, gt=0, description="Seconds per route/execute call (the paper's value).")
    startup_timeout: float = Field(default=120.0, gt=0, description="Seconds for the copilot to answer initialize.")
    base_url: str = ""
    #: The copilot tools offered to the model (``execute-tool``, the paper's alias of ``execute``,
    #: stays callable but is not offered twice). When the copilot lists none of them, all it lists.
    tool_names: tuple[str, ...] = ("route", "execute")


class AgentError(CopilotError):
    """The agent could not produce an answer; ``kind`` classifies why (``TaskRecord.error_kind``)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind


class ToolSession(Protocol):
    """What the loop needs from an MCP client session (``ClientSession`` and ``Client`` fit)."""

    async def list_tools(self) -> ListToolsResult: ...

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult: ...


def openai_tools(listing: ListToolsResult, names: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The copilot's tools as OpenAI function tools, unchanged (only ``names``, when it lists them)."""
    offered = [tool for tool in listing.tools if tool.name in names] or list(listing.tools)
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.input_schema or {"type": "object", "properties": {}},
            },
        }
        for tool in offered
    ]


def render_tool_result(result: CallToolResult, limit: int) -> str:
    """What the model sees of a tool result: its text (structured content when there is none)."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)  # type: ignore[union-attr]
        elif kind in ("image", "audio"):
            mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", "")
            parts.append(f"[{kind} content, {mime}, {len(getattr(block, 'data', '') or '')} base64 characters]")
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource {getattr(resource, 'uri', '')}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {getattr(block, 'uri', '')}]")
        else:
            parts.append(json.dumps(block.model_dump(mode="json", exclude_none=True), ensure_ascii=False))
    if not any(p.strip() for p in parts) and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    text = "\n".join(parts)
    if result.is_error:
        text = "Error: " + text
    return truncate(text, limit)


class ModelCall(BaseModel):
    """One tool call of the model, read defensively: ``problem`` says what made it uncallable."""

    id: str
    name: str
    arguments: str
    problem: str | None = None


def _text_of(content: Any, turn: int) -> str | None:
    """A message's text: a string, or a list of text parts (as some endpoints send it)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(reply_field(part, "text") or "") for part in content if reply_field(part, "type") in (None, "text"))
    raise AgentError("llm_error", f"the model's message content is of type {type(content).__name__}, not text (turn {turn})")


def _calls_of(message: Any, turn: int) -> list[ModelCall]:
    """The message's tool calls; one that cannot be called carries its ``problem`` for the model."""
    raw = reply_field(message, "tool_calls")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise AgentError("llm_error", f"the model's tool_calls is of type {type(raw).__name__}, not a list (turn {turn})")
    calls = []
    for number, call in enumerate(raw, 1):
        call_id = reply_field(call, "id")
        call_id = call_id if isinstance(call_id, str) and call_id else f"call_{uuid.uuid4().hex[:12]}"
        function = reply_field(call, "function")
        name = reply_field(function, "name") if function is not None else None
        arguments = reply_field(function, "arguments") if function is not None else None
        problem = None
        if not isinstance(name, str) or not name:
            problem, name = f"tool call {number} of this message names no function (give 'function.name')", str(name or "")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)  # an object where the API wants its JSON text
        elif arguments is not None and not isinstance(arguments, str):
            problem = problem or f"the arguments of {name} must be a JSON object written as text, got {type(arguments).__name__}"
            arguments = json.dumps(arguments) if isinstance(arguments, int | float | bool | list) else str(arguments)
        calls.append(ModelCall(id=call_id, name=name, arguments=arguments or "{}", problem=problem))
    return calls


def _request_limits(client: Any) -> tuple[float, int] | None:
    """The client's timeout for each wait (its read timeout) and its retries; ``None`` when it
    has no timeout."""
    timeout = getattr(client, "timeout", None)
    seconds = getattr(timeout, "read", timeout)
    retries = getattr(client, "max_retries", 0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        return None
    return float(seconds), retries if isinstance(retries, int) and retries >= 0 else 0


def _endpoint_said(error: openai.APIStatusError) -> str:
    """The endpoint's own words of an error (its message, code and type, or its text body),
    lower-cased, without the URL (a host named ``tools.example`` says nothing about tools)."""
    body = error.body
    if isinstance(body, dict):
        parts = [body.get(key) for key in ("message", "detail", "error", "code", "type")]
    else:
        parts = [body]
    return " ".join(part for part in parts if isinstance(part, str))[:4000].lower()


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n…[truncated: showing {limit} of {len(text)} characters]"


class CopilotAgent:
    """One task's conversation. Counters stay readable after a failure (for the run summary)."""

    def __init__(
        self,
        llm: openai.AsyncOpenAI,
        config: AgentConfig,
        on_usage: Callable[[Usage], None] | None = None,
        price: ModelPrice | None = None,
    ) -> None:
        self.llm = llm
        self.config = config
        self.on_usage = on_usage
        self.price = price
        self.turns = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost: float | None = 0.0 if price else None
        self.messages: list[dict[str, Any]] = []
        #: The last reply's ``finish_reason`` (``length``: cut at the output limit).
        self._finish_reason: str | None = None

    async def run(self, session: ToolSession, question: str) -> str:
        """The final answer; raises :class:`AgentError`."""
        from mcp.shared.exceptions import MCPError

        try:
            with anyio.fail_after(self.config.tool_timeout):
                listing = await session.list_tools()
        except (MCPError, TimeoutError, anyio.ClosedResourceError, anyio.BrokenResourceError) as error:
            raise AgentError("copilot_failed", f"listing the copilot's tools failed: {error or type(error).__name__}") from None
        tools = openai_tools(listing, self.config.tool_names)
        if not tools:
            raise AgentError("copilot_failed", "the copilot lists no tools")
        self.messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]
        while self.turns < self.config.max_turns:
            message = await self._complete(tools)
            text = _text_of(reply_field(message, "content"), self.turns)
            calls = _calls_of(message, self.turns)
            if not calls:
                answer = (text or "").strip()
                self.messages.append({"role": "assistant", "content": text or ""})
                if not answer:
                    refusal = reply_field(message, "refusal")
                    if isinstance(refusal, str) and refusal.strip():
                        raise AgentError("no_answer", f"the model refused (turn {self.turns}): {truncate(refusal.strip(), 500)}")
                    raise AgentError("no_answer", f"the model replied with neither text nor a tool call (turn {self.turns})")
                if self._finish_reason == "length":
                    # Cut at the model's output limit: the judge (and whoever reads the log) must
                    # know the answer does not end where the model meant it to.
                    logger.warning("the model's final answer was cut at its output limit (turn %d)", self.turns)
                    answer += f"\n{ANSWER_CUT_NOTE}"
                return answer
            self.messages.append(
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                        for call in calls
                    ],
                }
            )
            for call in calls:
                if call.problem is not None:
                    content = f"Error: {call.problem}"
                else:
                    content = await self._call_tool(session, call.name, call.arguments)
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        raise AgentError("max_turns", f"no final answer after {self.config.max_turns} model calls (--max-turns)")

    async def _complete(self, tools: list[dict[str, Any]]) -> Any:
        import openai

        first = self.turns == 0
        self.turns += 1
        limits = _request_limits(self.llm)
        deadline = request_deadline(*limits, longest_wait=BACKOFF_WAIT_CAP) if limits else None
        try:
            # The client's timeout bounds each read, not the request: an endpoint that sends a
            # byte now and then (a proxy keeping a dead upstream alive) held the task until
            # --task-timeout. The bound is the judge's per attempt, with the client's own backoff.
            with anyio.fail_after(deadline):
                response = await self.llm.chat.completions.create(
                    model=self.config.model,
                    messages=self.messages,  # type: ignore[arg-type]
                    tools=tools,  # type: ignore[arg-type]
                    temperature=self.config.temperature,
                )
        except TimeoutError as error:
            if limits is None or deadline is None:  # not this bound's: none was set
                raise AgentError("llm_error", f"the request to {redact_url(self.config.base_url)} timed out ({error})") from None
            raise AgentError(
                "llm_error",
                f"{redact_url(self.config.base_url)} did not finish its answer within {deadline:g} s "
                f"(--llm-timeout {limits[0]:g} s for each wait, {limits[1]} retries; turn {self.turns}): "
                "the endpoint kept the request open without completing its reply",
            ) from None
        except (openai.BadRequestError, openai.UnprocessableEntityError) as error:
            raise self._refused(error, first) from None
        except openai.OpenAIError as error:
            raise AgentError("llm_error", describe_api_error(error, self.config.base_url)) from None
        except UNREADABLE_BODY_ERRORS as error:
            raise AgentError("llm_error", describe_unreadable_body(error, self.config.base_url)) from None
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            shown = " ".join(str(response).split())[:120]
            raise AgentError(
                "llm_error",
                f"{redact_url(self.config.base_url)} answered something that is not a chat completion ({type(response).__name__}: "
                f"{shown!r}); check --base-url (an OpenAI-compatible API usually ends in /v1)",
            )
        if not choices:
            raise AgentError("llm_error", f"{redact_url(self.config.base_url)} answered a chat completion with no choices (turn {self.turns})")
        self._log_usage(response)
        finish = reply_field(choices[0], "finish_reason")
        self._finish_reason = finish if isinstance(finish, str) else None
        message = reply_field(choices[0], "message")
        if message is None:
            raise AgentError("llm_error", f"{redact_url(self.config.base_url)} answered a choice without a message (turn {self.turns})")
        if isinstance(message, str | int | float | bool | list):
            # No message object ("message": "hello"): read as one with no text, it failed as no_answer.
            raise AgentError(
                "llm_error",
                f"{redact_url(self.config.base_url)} answered a choice whose message is a {type(message).__name__}, "
                f"not an object with content or tool_calls (turn {self.turns})",
            )
        return message

    def _refused(self, error: openai.APIStatusError, first: bool) -> AgentError:
        """What a 400/422 means: a conversation grown past the model's context, an endpoint without
        tool calling (the first request, which offers the tools, or one saying so), or this request."""
        text = describe_api_error(error, self.config.base_url)
        said = _endpoint_said(error)
        if str(error.code).lower() in _CONTEXT_CODES or str(error.type).lower() in _CONTEXT_CODES or any(
            words in said for words in _CONTEXT_WORDS
        ):
            return AgentError(
                "llm_error",
                f"{text} (turn {self.turns}): the conversation outgrew the model's context window; "
                "lower --max-turns or --max-tool-chars, or use a model with a longer context",
            )
        if first or _TOOLS_UNSUPPORTED.search(said):
            return AgentError(
                "tools_refused",
                f"the model endpoint refused a tool-calling request ({text}); "
                "the built-in agent needs a model/endpoint with OpenAI-style tool calling",
            )
        return AgentError("llm_error", f"{text} (turn {self.turns})")

    def _log_usage(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        counts = usage_counts(usage)
        if counts is None:
            # Counts no report can add up (negative, absurd, not numbers): this reply's usage is
            # left out, not the task (it failed as "copilot_failed", and its answer was lost).
            logger.warning("the model's usage counts are not usable (%r); this reply's usage is not counted", usage)
            return
        input_tokens, output_tokens = counts
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        cost = self.price.cost(input_tokens, output_tokens) if self.price else None
        if cost is not None and self.cost is not None:
            self.cost += cost
        if self.on_usage is not None:
            model = getattr(response, "model", None)
            usable = isinstance(model, str) and 0 < len(model) <= MAX_MODEL_NAME_CHARS and model.isprintable()
            self.on_usage(
                Usage(
                    model=model if usable else self.config.model,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    cost=cost,
                    turn=self.turns,
                    llm_calls=1,  # the judge's efficiency report sums these into turns
                )
            )

    async def _call_tool(self, session: ToolSession, name: str, raw_arguments: str | None) -> str:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        try:
            arguments = parse_json(raw_arguments or "{}")
        except json.JSONDecodeError as error:
            return f"Error: the arguments of {name} are not valid JSON ({error.msg}): {truncate(raw_arguments or '', 500)}"
        if not isinstance(arguments, dict):
            return f"Error: the arguments of {name} must be a JSON object, got {type(arguments).__name__}"
        try:
            with anyio.fail_after(self.config.tool_timeout):
                result = await session.call_tool(name, arguments)
        except TimeoutError:
            return f"Error: the call to {name} timed out after {self.config.tool_timeout:g} s"
        except MCPError as error:
            if error.code == CONNECTION_CLOSED:
                raise AgentError("copilot_failed", f"the copilot process closed the connection during {name}") from None
            # Cut like any tool result: the copilot's message may quote what the model sent (a
            # 2,000,000-character tool name came back whole).
            return truncate(f"Error: {error.message}", self.config.max_tool_result_chars)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            raise AgentError("copilot_failed", f"the copilot process exited during {name}") from None
        return render_tool_result(result, self.config.max_tool_result_chars)


@asynccontextmanager
async def copilot_session(
    launch: CopilotLaunch,
    stderr: TextIO,
    startup_timeout: float,
    elicitation_callback: ElicitationFnT | None = None,
) -> AsyncIterator[ClientSession]:
    """Start the copilot over stdio and yield an initialized session; stops it on exit.

    With ``elicitation_callback`` the session declares elicitation support and the callback
    answers the copilot's confirmation questions (see :mod:`evaluation.run.agents.confirm`).
    """
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.shared.exceptions import MCPError
    from mcp.types import Implementation

    command, *args = arguments_for_os([launch.command, *launch.args])
    params = StdioServerParameters(command=command, args=args, env=environment_for_os(launch.env), cwd=launch.cwd)
    try:
        async with stdio_client(params, errlog=stderr) as (read, write):
            async with ClientSession(
                read, write, client_info=Implementation(name=CLIENT_NAME, version=CLIENT_VERSION), elicitation_callback=elicitation_callback
            ) as session:
                try:
                    with anyio.fail_after(startup_timeout):
                        await session.initialize()
                except TimeoutError:
                    raise AgentError(
                        "copilot_failed", f"the copilot did not answer initialize within {startup_timeout:g} s"
                    ) from None
                except (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as error:
                    raise AgentError("copilot_failed", f"the copilot exited during startup ({error or 'closed'})") from None
                yield session
    except OSError as error:
        raise AgentError("copilot_failed", f"cannot start the copilot ({launch.command}): {error}") from None


def stderr_tail(path: Path, lines: int = 5, chars: int | None = None, cut: LogCut | None = None) -> str:
    """The last non-blank lines of a stderr file (at most ``chars`` characters), for error
    messages that point at the cause.

    A capped log (``cut``) is read from its kept tail only: the runner's note of what was cut, and
    the head before it, are not the end of what the process wrote.
    """
    try:
        with path.open("rb") as handle:
            if cut is not None:
                handle.seek(max(0, handle.seek(0, 2) - cut.tail))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    tail = " | ".join([line.strip() for line in text.splitlines() if line.strip()][-lines:])
    return tail if chars is None else tail[-chars:]
