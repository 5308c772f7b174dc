"""The built-in ReAct agent against a small in-process MCP server and a scripted model over HTTP."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from evaluation.run.agents.agent import SYSTEM_PROMPT, AgentConfig, AgentError, CopilotAgent, render_tool_result, truncate
import evaluation.llm
from evaluation.llm import BACKOFF_WAIT_CAP, make_client, request_deadline
from evaluation.run.models import ModelPrice
from server.trajectory.records import Usage
from tests.evaluation.run.support import route_execute_answer, tool_results
from tests.support.scripted_openai import Reply, ScriptedOpenAI, ToolCall

pytestmark = pytest.mark.timeout(60)


def mini_copilot(calls: list[tuple[str, dict[str, Any]]]) -> MCPServer:
    """route/execute with the copilot's names; execute echoes or fails on purpose."""
    server = MCPServer("mini-copilot")

    @server.tool(description="Search the tool pool.")
    def route(query: str, top_k: int = 5) -> str:
        calls.append(("route", {"query": query, "top_k": top_k}))
        return "server_name: fx\ntool_name: echo"

    @server.tool(description="Call a tool on a server.")
    def execute(server_name: str, tool_name: str, params: dict | None = None) -> str:
        calls.append(("execute", {"server_name": server_name, "tool_name": tool_name, "params": params}))
        if tool_name == "fail":
            raise ToolError("the tool failed on purpose")
        if tool_name == "huge":
            return "y" * 50_000
        return f"echo: {(params or {}).get('text', '')}"

    @server.tool(name="execute-tool", description="Alias of execute.")
    def execute_tool(server_name: str, tool_name: str, params: dict | None = None) -> str:
        return execute(server_name, tool_name, params)

    return server


async def run_agent(
    llm: ScriptedOpenAI,
    config: AgentConfig,
    usage: list[Usage],
    price: ModelPrice | None = None,
    base_url: str | None = None,
    timeout: float = 10,
):
    calls: list[tuple[str, dict[str, Any]]] = []
    client = make_client(base_url or llm.base_url, "test", timeout=timeout, max_retries=0)
    agent = CopilotAgent(client, config, on_usage=usage.append, price=price)
    try:
        async with Client(mini_copilot(calls)) as session:
            with anyio.fail_after(30):
                try:
                    answer = await agent.run(session, "Echo hello please")
                except AgentError as error:
                    return agent, calls, error
    finally:
        await client.close()
    return agent, calls, answer


async def test_route_execute_answer_loop() -> None:
    usage: list[Usage] = []
    handler = route_execute_answer("fx", "echo", {"text": "hello"}, answer="The tool said: echo: hello")
    with ScriptedOpenAI(handler=handler) as llm:
        agent, calls, answer = await run_agent(
            llm, AgentConfig(model="m1", base_url=llm.base_url), usage, price=ModelPrice(input=1.0, output=2.0)
        )
        requests = list(llm.requests)
    assert answer == "The tool said: echo: hello"
    assert [name for name, _ in calls] == ["route", "execute"]
    assert calls[1][1] == {"server_name": "fx", "tool_name": "echo", "params": {"text": "hello"}}
    first = requests[0]
    assert first["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert first["messages"][1] == {"role": "user", "content": "Echo hello please"}
    assert first["temperature"] == 0.7 and first["model"] == "m1"
    # The copilot's tools as published, without the duplicate alias.
    offered = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert set(offered) == {"route", "execute"}
    assert offered["route"]["description"] == "Search the tool pool."
    assert offered["execute"]["parameters"]["required"] == ["server_name", "tool_name"]
    # Every tool call is answered with its result, tied to the call id.
    last = requests[-1]["messages"]
    assert tool_results(requests[-1]) == ["server_name: fx\ntool_name: echo", "echo: hello"]
    assert last[2]["tool_calls"][0]["id"] == last[3]["tool_call_id"]
    assert agent.turns == 3
    assert [(u.input_tokens, u.output_tokens) for u in usage] == [(10, 5), (10, 5), (100, 20)]
    assert all(u.model == "m1" for u in usage)
    assert agent.input_tokens == 120 and agent.output_tokens == 30
    assert agent.cost == pytest.approx((120 * 1.0 + 30 * 2.0) / 1e6)


async def test_tool_errors_and_bad_arguments_go_back_to_the_model() -> None:
    replies = [
        Reply(tool_calls=[ToolCall("execute", '{"server_name": "fx", ')]),  # truncated JSON
        Reply(tool_calls=[ToolCall("execute", {"server_name": "fx", "tool_name": "fail", "params": {}})]),
        Reply(tool_calls=[ToolCall("execute", {"server_name": "fx", "tool_name": "huge", "params": {}})]),
        Reply(content="gave up"),
    ]
    with ScriptedOpenAI() as llm:
        llm.push(*replies)
        agent, calls, answer = await run_agent(
            llm, AgentConfig(model="m", max_tool_result_chars=1000, base_url=llm.base_url), []
        )
        results = tool_results(llm.requests[-1])
    assert answer == "gave up"
    assert results[0].startswith("Error: the arguments of execute are not valid JSON")
    assert results[1].startswith("Error:") and "failed on purpose" in results[1]
    assert results[2].startswith("y" * 1000) and "truncated: showing 1000 of 50000 characters" in results[2]
    assert [c[1]["tool_name"] for c in calls] == ["fail", "huge"]


async def test_endpoint_refusing_tools_is_a_clear_error() -> None:
    with ScriptedOpenAI() as llm:
        llm.push(Reply(status=400, body={"error": {"message": "tools are not supported by this model", "code": 400}}))
        agent, calls, error = await run_agent(llm, AgentConfig(model="plain", base_url=llm.base_url), [])
    assert isinstance(error, AgentError) and error.kind == "tools_refused"
    assert "tools are not supported" in str(error) and "tool calling" in str(error)
    assert calls == []


async def test_max_turns_stops_a_model_that_never_answers() -> None:
    looping = Reply(tool_calls=[ToolCall("route", {"query": "again"})])
    with ScriptedOpenAI(handler=lambda request: looping) as llm:
        agent, calls, error = await run_agent(llm, AgentConfig(model="m", max_turns=3, base_url=llm.base_url), [])
    assert isinstance(error, AgentError) and error.kind == "max_turns"
    assert agent.turns == 3 and len(calls) == 3


async def test_empty_reply_is_not_an_answer() -> None:
    with ScriptedOpenAI() as llm:
        llm.push(Reply(content=""))
        _, _, error = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), [])
    assert isinstance(error, AgentError) and error.kind == "no_answer"


async def test_server_error_after_retries_is_an_llm_error() -> None:
    with ScriptedOpenAI() as llm:
        llm.push(Reply(status=503))
        _, _, error = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), [])
    assert isinstance(error, AgentError) and error.kind == "llm_error" and "503" in str(error)


@pytest.mark.parametrize(
    "body", [b'{"choices": [{"mess', b'{"choices": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"], ids=["cut", "nested-too-deep"]
)
async def test_a_reply_that_is_not_valid_json_is_an_llm_error(body: bytes) -> None:
    # Both escaped the agent: the first as a JSONDecodeError, the second as a RecursionError.
    with ScriptedOpenAI() as llm:
        llm.push(Reply(raw=("application/json", body)))
        _, _, error = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), [])
    assert isinstance(error, AgentError) and error.kind == "llm_error"
    assert f"{llm.base_url} answered a body that is not valid JSON" in str(error)


def test_render_tool_result_prefers_text_and_marks_errors() -> None:
    from mcp.types import CallToolResult, ImageContent, TextContent

    result = CallToolResult(
        content=[TextContent(type="text", text="hello"), ImageContent(type="image", data="QUJD", mime_type="image/png")],
        is_error=True,
    )
    assert render_tool_result(result, 1000) == "Error: hello\n[image content, image/png, 4 base64 characters]"
    structured = CallToolResult(content=[], structured_content={"city": "Rome"})
    assert render_tool_result(structured, 1000) == '{"city": "Rome"}'
    assert truncate("abc", 5) == "abc"


def test_the_stderr_tail_of_a_capped_log_is_what_the_copilot_wrote_last(tmp_path) -> None:
    # Before: the whole file was read, so a tail of few lines showed the runner's own note of the
    # cut as the copilot's last words.
    from evaluation.run.agents.agent import stderr_tail  # noqa: PLC0415
    from evaluation.run.agents.bounded_log import BoundedLog  # noqa: PLC0415

    path = tmp_path / "copilot.stderr.log"
    log = BoundedLog(path, "stderr", 1024, writer="the copilot")
    log.write(b"starting\n" + b"x" * 3000 + b"\nTraceback: the real cause\n")
    cut = log.close()
    assert cut is not None and b"evaluation.run:" in path.read_bytes()
    tail = stderr_tail(path, cut=cut)
    assert tail.endswith("Traceback: the real cause") and "evaluation.run" not in tail and "starting" not in tail
    assert stderr_tail(path).startswith("starting")  # uncapped reading: the whole file


async def test_a_web_page_instead_of_a_chat_completion_names_the_url_and_what_to_check() -> None:
    with ScriptedOpenAI() as llm:
        llm.push(Reply(raw=("text/html", b"<html><body>Open WebUI</body></html>")))
        _, _, error = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), [])
        llm.push(Reply(body={"choices": []}))
        _, _, empty = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), [])
    assert isinstance(error, AgentError) and error.kind == "llm_error"
    assert str(error).startswith(f"{llm.base_url} answered something that is not a chat completion (str: '<html>")
    assert "check --base-url (an OpenAI-compatible API usually ends in /v1)" in str(error)
    assert isinstance(empty, AgentError) and str(empty) == f"{llm.base_url} answered a chat completion with no choices (turn 1)"


def _completion(message: Any, usage: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip
    if usage is not None:
        body["usage"] = usage
    return body


async def test_replies_of_odd_shapes_are_read_or_refused_with_what_was_wrong() -> None:
    # Each of these escaped the loop as a Python exception: the task failed as "copilot_failed" with
    # an AttributeError or a pydantic error, and a final answer among them was lost.
    odd_calls = [
        {"id": "c1", "type": "function", "function": {"name": "route", "arguments": {"query": "echo"}}},  # an object
        {"id": "c2", "type": "function", "function": {"arguments": "{}"}},  # no name
        "route",  # not an object
    ]
    replies = [
        Reply(body=_completion({"role": "assistant", "content": None, "tool_calls": odd_calls},
                               usage={"prompt_tokens": 10, "completion_tokens": 5})),  # fmt: skip
        # Text in parts, and usage no report can sum: the answer counts, that usage does not.
        Reply(body=_completion({"role": "assistant", "content": [{"type": "text", "text": "the "}, {"type": "text", "text": "answer"}]},
                               usage={"prompt_tokens": -1, "completion_tokens": 10**30})),  # fmt: skip
    ]
    usage: list[Usage] = []
    with ScriptedOpenAI() as llm:
        llm.push(*replies)
        agent, calls, answer = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), usage)
        results = tool_results(llm.requests[-1])
    assert answer == "the answer"
    assert calls == [("route", {"query": "echo", "top_k": 5})]
    assert results[1:] == [f"Error: tool call {n} of this message names no function (give 'function.name')" for n in (2, 3)]
    assert (agent.input_tokens, agent.output_tokens) == (10, 5) and len(usage) == 1


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (None, "answered a choice without a message (turn 1)"),
        ({"role": "assistant", "content": 7}, "the model's message content is of type int, not text (turn 1)"),
        ({"role": "assistant", "content": None, "tool_calls": {"id": "x"}}, "tool_calls is of type dict, not a list"),
        ({"role": "assistant", "content": None, "refusal": "I cannot help with that."}, "the model refused (turn 1): I cannot help"),
    ],
)
async def test_a_reply_no_loop_can_use_is_an_error_saying_what_was_wrong(message: Any, said: str) -> None:
    with ScriptedOpenAI() as llm:
        llm.push(Reply(body=_completion(message)))
        _, _, error = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), [])
    assert isinstance(error, AgentError) and error.kind in ("llm_error", "no_answer") and said in str(error)


async def test_a_protocol_error_of_the_copilot_is_cut_like_a_tool_result() -> None:
    # An unknown tool named with 200,000 characters came back whole in the copilot's error message.
    with ScriptedOpenAI() as llm:
        llm.push(Reply(tool_calls=[ToolCall("n" * 200_000, {})]), Reply(content="done"))
        _, _, answer = await run_agent(llm, AgentConfig(model="m", max_tool_result_chars=1000, base_url=llm.base_url), [])
        [result] = tool_results(llm.requests[-1])
    assert answer == "done" and result.startswith("Error: ") and len(result) < 1100


def _error_reply(message: str, code: str | None = None, status: int = 400) -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}})


#: OpenAI's wording of a conversation past the model's context: it counts tokens "in the functions".
OPENAI_CONTEXT_OVERFLOW = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens "
    "(8500 in the messages, 500 in the functions). Please reduce the length of the messages or functions."
)


async def test_a_context_overflow_on_a_later_turn_is_an_llm_error_with_a_hint() -> None:
    # Before: "functions" in OpenAI's message made it "tools_refused", advising an endpoint with
    # tool calling to a run whose endpoint had just answered a tool call.
    with ScriptedOpenAI() as llm:
        llm.push(Reply(tool_calls=[ToolCall("route", {"query": "echo"})]), _error_reply(OPENAI_CONTEXT_OVERFLOW, "context_length_exceeded"))
        agent, calls, error = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), [])
    assert isinstance(error, AgentError) and error.kind == "llm_error", error
    assert f"HTTP 400 from {llm.base_url}: Error code: 400 - {OPENAI_CONTEXT_OVERFLOW} (turn 2)" in str(error)
    assert "outgrew the model's context window; lower --max-turns or --max-tool-chars" in str(error)
    assert "tool calling" not in str(error) and agent.turns == 2 and len(calls) == 1


async def test_a_400_is_tools_refused_only_when_it_is_about_tool_calling() -> None:
    # (replies before the refusal, the refusal, the kind, words of the error). Before: any 400/422
    # whose text held "tool" or "function" -- the endpoint's URL included -- was "tools_refused",
    # and so was every 400 on the first turn, a context overflow too.
    route = Reply(tool_calls=[ToolCall("route", {"query": "echo"})])
    cases = [
        ([], _error_reply("prompt is too long: 210000 tokens > 200000 maximum"), "llm_error", "outgrew the model's context"),
        ([route], _error_reply("the request exceeds the available context size", "exceed_context_size_error"),
         "llm_error", "outgrew the model's context"),  # fmt: skip
        ([route], _error_reply("Too many tokens in the messages and tools", status=422), "llm_error", "outgrew the model's context"),
        ([route], _error_reply("Invalid 'messages[3]': the tool call id call_9 has no tool message"), "llm_error",
         "the tool call id call_9 has no tool message (turn 2)"),  # fmt: skip
        ([route], _error_reply("'tool' role messages are not supported by this model"), "tools_refused", "OpenAI-style tool calling"),
        ([route], _error_reply("this model does not support function calling"), "tools_refused", "OpenAI-style tool calling"),
        ([], _error_reply("Invalid value for 'temperature'"), "tools_refused", "OpenAI-style tool calling"),  # the first turn
    ]
    with ScriptedOpenAI() as llm:
        for before, refusal, kind, words in cases:
            llm.push(*before, refusal)
            _, _, error = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), [])
            assert isinstance(error, AgentError) and (error.kind, words in str(error)) == (kind, True), (refusal.body, error)
        # An endpoint whose URL names functions (an Azure Functions gateway, say): its URL is no refusal of tools.
        functions_url = llm.base_url.removesuffix("/v1") + "/functions/v1"
        llm.push(route, _error_reply("Invalid value for 'temperature'"))
        _, _, error = await run_agent(llm, AgentConfig(model="m", base_url=functions_url), [], base_url=functions_url)
    assert isinstance(error, AgentError) and error.kind == "llm_error"
    assert str(error) == f"HTTP 400 from {functions_url}: Error code: 400 - Invalid value for 'temperature' (turn 2)"


async def test_the_model_name_of_a_usage_event_is_bounded() -> None:
    # Before: the reply's model went into every usage event as sent: a 5 MB name, 5 MB lines.
    def reply(model: str, message: dict[str, Any]) -> Reply:
        return Reply(body={**_completion(message, usage={"prompt_tokens": 3, "completion_tokens": 2}), "model": model})

    route = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "route", "arguments": '{"query": "echo"}'}}]}  # fmt: skip
    usage: list[Usage] = []
    with ScriptedOpenAI() as llm:
        llm.push(
            reply("M" * 100_000, route),
            reply('m\n{"event": "forged"}', route),  # a name no log line should carry
            reply("gpt-4o-2024-08-06", {"role": "assistant", "content": "done"}),
        )
        _, _, answer = await run_agent(llm, AgentConfig(model="configured", base_url=llm.base_url), usage)
    assert answer == "done"
    assert [u.model for u in usage] == ["configured", "configured", "gpt-4o-2024-08-06"]
    assert [u.input_tokens for u in usage] == [3, 3, 3]


def test_the_agents_request_bound_is_tied_to_its_timeout() -> None:
    # The judge's bound waits out a Retry-After of 2 minutes between attempts: 605 s for a 10 s
    # timeout. The agent's counts the client's own backoff (at most 8 s a wait).
    assert request_deadline(10, 4) == 605  # the judge's, as its README documents
    assert request_deadline(10, 4, longest_wait=BACKOFF_WAIT_CAP) == (2 * 10 + 5) * 5 + 8 * 4 == 157
    assert request_deadline(300, 4, longest_wait=BACKOFF_WAIT_CAP) == 605 * 5 + 32


async def test_an_answer_that_never_ends_fails_within_the_llm_timeouts_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each trickled byte restarts the client's read timeout: before, the request lasted as long
    # as the endpoint kept sending (the task ran to --task-timeout and was recorded as "timeout").
    # The slack beyond twice the timeout is cut from 5 s to 0.5 s to keep the test short.
    monkeypatch.setattr(evaluation.llm, "_ATTEMPT_SLACK", 0.5)
    with ScriptedOpenAI(handler=lambda request: Reply(trickle=True)) as llm:
        started = time.monotonic()
        agent, _, error = await run_agent(llm, AgentConfig(model="m", base_url=llm.base_url), [], timeout=0.5)
        elapsed = time.monotonic() - started
    assert isinstance(error, AgentError) and error.kind == "llm_error", error
    assert str(error).startswith(
        f"{llm.base_url} did not finish its answer within 1.5 s (--llm-timeout 0.5 s for each wait, 0 retries; turn 1)"
    )
    assert 1.5 <= elapsed < 10 and agent.turns == 1


async def test_a_final_answer_cut_at_the_output_limit_says_so() -> None:
    # Before: a reply ending with finish_reason "length" was taken as the whole answer, and nothing
    # told the judge (or a reader of the log) that it stopped mid-sentence.
    from evaluation.run.agents.agent import ANSWER_CUT_NOTE  # noqa: PLC0415

    cut = {
        "id": "chatcmpl-cut", "object": "chat.completion", "created": 0, "model": "m1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "The answer is fort"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }  # fmt: skip
    with ScriptedOpenAI(handler=lambda request: Reply(body=cut)) as llm:
        _, _, answer = await run_agent(llm, AgentConfig(model="m1", base_url=llm.base_url), [])
    assert answer == f"The answer is fort\n{ANSWER_CUT_NOTE}"


async def test_a_message_that_is_no_object_is_an_llm_error() -> None:
    reply = {
        "id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "m1",
        "choices": [{"index": 0, "message": "hello", "finish_reason": "stop"}],
    }  # fmt: skip
    with ScriptedOpenAI(handler=lambda request: Reply(body=reply)) as llm:
        _, _, error = await run_agent(llm, AgentConfig(model="m1", base_url=llm.base_url), [])
    assert isinstance(error, AgentError) and error.kind == "llm_error"
    assert "answered a choice whose message is a str, not an object with content or tool_calls (turn 1)" in str(error)
