"""Judge prompts: LiveMCPEval's (the paper's) and our evidence variant.

The key-point and evaluation prompts are LiveMCPBench's, from
``icip-cas/LiveMCPBench/evaluator/llm_as_judge_baseline.py`` (``identify_key_points`` and
``livemcp_eval``), kept word for word so ``--prompt livemcpeval`` reproduces the paper's judge.
Two deliberate differences in the inputs: tool descriptions are listed once per tool (the
paper concatenated one per call without separators), and copilot logs add the files the task
created or changed, since "some tasks require to create files" and the paper's judge could
only guess that from the calls.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Literal

from evaluation.judge.tool_descriptions import ToolDescriptions
from evaluation.trajectories import ToolCall, Trajectory
from server.trajectory.records import WorkspaceFile

PromptKind = Literal["livemcpeval", "evidence"]
PROMPT_KINDS: tuple[PromptKind, ...] = ("livemcpeval", "evidence")
Messages = list[dict[str, str]]

#: Bump a prompt's version when its text changes: it is part of the resume key.
PROMPT_VERSIONS: dict[PromptKind, int] = {
    "livemcpeval": 1,
    # 2: text the trajectory wrote is fenced off (names quoted, every line of answers and outputs indented).
    "evidence": 2,
}

KEY_POINTS_SYSTEM = """You are an expert tasked with analyzing a given task to identify the key points explicitly stated in the task description.

**Objective**: Carefully analyze the task description and extract the critical elements explicitly mentioned in the task for achieving its goal.

**Instructions**:
1. Read the task description carefully.
2. Identify and extract **key points** directly stated in the task description.
   - A **key point** is a critical element, condition, or step explicitly mentioned in the task description.
   - Do not infer or add any unstated elements.

**Respond with**:
- **Key Points**: A numbered list of the explicit key points for completing this task, one per line, without explanations or additional details."""

LIVEMCPEVAL_SYSTEM = """You are an expert in evaluating the performance of a tool-use agent. The agent is designed to help a human user use multi-tools to complete a task. Given the user's task, the agent's final response, key points for task completion, and tool call history, your goal is to determine whether the agent has completed the task and achieved all requirements.

Your response must strictly follow the following evaluation criteria!
*Important Evaluation Criteria*:
1. You must carefully check whether the information (e.g. the coordinates of the addresses) comes from the tool call, if the agent get it from the internal knowledge, it should be considered failed.
2: Some tasks require to create files to be considered successful.

*IMPORTANT*
Format your response into two lines as shown below:

Thoughts: <your thoughts and reasoning process based on double-checking each key points and the evaluation criteria>
Status: "success" or "failure"
"""

EVIDENCE_SYSTEM = """You are an expert in evaluating the performance of a tool-use agent. The agent helps a human user by finding and calling tools to complete a task. You are given the user's task, the key points for completing it, the agent's final response, every tool call the agent made together with what the tool returned, descriptions of the tools used, and the files the task created or changed. Decide whether the agent completed the task and achieved all requirements.

*Evaluation Criteria*:
1. A fact in the final response counts only if a tool output in the history supports it. Facts that appear in no tool output came from the agent's internal knowledge, and a task that depends on them has failed.
2. A tool call whose output is an error, a timeout or an empty result did not accomplish its step, whatever the agent claims afterwards.
3. Tasks that ask to create or change a file succeed only if a tool call (or the list of workspace changes) shows the file was actually written with the requested content.
4. The task succeeds only if every key point is met.

*Response format* -- one line per key point, then your reasoning, then the verdict:

Key point 1: met | not met -- evidence: #<call numbers that support your judgement, or "none">
Key point 2: ...
Thoughts: <your reasoning, citing call numbers like #3>
Status: "success" or "failure"
"""

LIVEMCPEVAL_USER = """\
User Task: 
{task}

Key Points: 
{key_points}

Final Response: 
{response}

Tool Call History:
{tool_calls}

Tool Descriptions:
{tool_descriptions}
"""

RETRY_MESSAGE = (
    "Your reply did not end with a verdict I can read. Reply again in exactly the requested format, "
    'ending with one line that is either `Status: "success"` or `Status: "failure"`.'
)
KEY_POINTS_RETRY_MESSAGE = "Reply again with **Key Points**: followed by a numbered list, one key point per line."

#: Per-call and total character budgets for tool outputs shown by the evidence prompt.
OUTPUT_CHARS_PER_CALL = 2000
OUTPUT_CHARS_TOTAL = 40000
MIN_OUTPUT_CHARS_PER_CALL = 300
DESCRIPTION_CHARS = 1000
WORKSPACE_PREVIEW_CHARS = 600


#: A name or path shown as written: one line of ordinary characters. Anything else (a line break,
#: a control or format character) is shown as a JSON string, so it cannot start a line of its own.
_PLAIN_NAME = re.compile(r"[\w.\-/:@+ ()\[\],~#]*")


def shown_name(text: str) -> str:
    """``text`` (a server, tool or file name from the trajectory) as one line of the prompt."""
    return text if _PLAIN_NAME.fullmatch(text) and text.isprintable() else json.dumps(text)


def indented(text: str, prefix: str = "  ") -> str:
    """Every line of ``text`` after the first indented: no line (split at ``\r``, U+2028 and the
    rest, as a model may read them) starts at column 0, where the prompt's own lines are."""
    return f"\n{prefix}".join(text.splitlines()) if text else text


def truncate_middle(text: str, limit: int) -> str:
    """Head and tail of ``text`` with a marker saying how much was cut from the middle."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted:,} characters omitted ...]\n{text[-tail:]}"


def prompt_hash(messages: Messages) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def key_point_messages(question: str) -> Messages:
    return [{"role": "system", "content": KEY_POINTS_SYSTEM}, {"role": "user", "content": f"Task: {question}"}]


def _numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{number}. {item}" for number, item in enumerate(items, 1))


def described_tools(calls: Sequence[ToolCall], descriptions: ToolDescriptions) -> str:
    """The descriptions of the tools ``calls`` executed, as the judge is shown them."""
    blocks: list[str] = []
    seen: set[tuple[str, str]] = set()
    for call in calls:
        key = (call.server or "not_given", call.tool or "not_given")
        if call.kind != "execute" or key in seen:
            continue
        seen.add(key)
        if key in descriptions:
            description = truncate_middle(descriptions[key].strip(), DESCRIPTION_CHARS)
            blocks.append(f"Server: {shown_name(key[0])}\nTool: {shown_name(key[1])}\nDescription: {description}")
        else:
            blocks.append(f"Tool {shown_name(key[1])} not found in server {shown_name(key[0])}.")
    return "\n\n".join(blocks)


def _workspace(files: Sequence[WorkspaceFile]) -> str:
    lines = []
    for changed in files:
        size = f", {changed.size:,} bytes" if changed.size is not None else ""
        lines.append(f"- {shown_name(changed.path)} ({changed.change}{size})")
        if changed.preview:
            preview = truncate_middle(changed.preview, WORKSPACE_PREVIEW_CHARS)
            lines.append("  preview: " + indented(preview))
    return "\n".join(lines)


def _evidence_history(calls: Sequence[ToolCall]) -> str:
    executes = sum(1 for call in calls if call.kind == "execute")
    per_call = OUTPUT_CHARS_PER_CALL
    if executes and executes * per_call > OUTPUT_CHARS_TOTAL:
        per_call = max(MIN_OUTPUT_CHARS_PER_CALL, OUTPUT_CHARS_TOTAL // executes)
    lines: list[str] = []
    for call in calls:
        if call.kind == "route":
            found = ", ".join(f"{shown_name(server)}/{shown_name(tool)}" for server, tool in call.hits[:5]) or "nothing"
            lines.append(
                f"#{call.index} route query={json.dumps(call.query or '', ensure_ascii=False)} -> found: {found}"
            )
            continue
        params = json.dumps(call.params if call.params is not None else {}, ensure_ascii=False)
        state = f"ERROR ({call.error_kind})" if call.is_error else "ok"
        server, tool = shown_name(call.server or ""), shown_name(call.tool or "")
        lines.append(f"#{call.index} execute {server}/{tool} params={params} -> {state}")
        output = call.output.strip() or "(empty output)"
        lines.append("  output: " + indented(truncate_middle(output, per_call)))
    return "\n".join(lines)


def judge_messages(
    kind: PromptKind,
    trajectory: Trajectory,
    question: str,
    key_points: Sequence[str],
    descriptions: ToolDescriptions,
) -> Messages:
    response = trajectory.final_answer or "(the agent gave no final response)"
    if kind == "livemcpeval":
        executes = trajectory.execute_calls
        history = "\n".join(f"{number}. {call.arguments}" for number, call in enumerate(executes, 1))
        system = LIVEMCPEVAL_SYSTEM
    else:
        history = _evidence_history(trajectory.calls)
        system = EVIDENCE_SYSTEM
        # The paper's prompt pastes the answer as written (kept, to reproduce its judge); here no
        # line of it starts at column 0, where a forged "Tool Call History:" or "#1 execute" would.
        response = "  " + indented(response)
    text = LIVEMCPEVAL_USER.format(
        task=question,
        key_points=_numbered(key_points),
        response=response,
        tool_calls=history or "(no tool calls)",
        tool_descriptions=described_tools(trajectory.calls, descriptions),
    )
    if trajectory.workspace:
        text += f"\nFiles Created or Changed by the Task:\n{_workspace(trajectory.workspace)}\n"
    if kind == "evidence" and not trajectory.complete:
        text += "\nNote: the agent's session ended without a proper close (it may have crashed).\n"
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]
