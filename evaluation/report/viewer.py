"""The trajectory viewer: one expandable section per task inside ``report.html``.

Each task of the report's task table links to its section (``#task-…``), which shows the question
and key points, every ``route`` query with the tools it returned (annotated tools highlighted),
every ``execute`` call with its params, result excerpt, error and latency, the confirmations, the
final answer, the files the task changed, the verdict with the judge's thoughts and per-key-point
evidence, and the error class with its evidence. Everything is inline: the page opens offline.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

from evaluation.judge.verdict_log import VerdictRecord
from evaluation.report.models import Report, TaskRow
from evaluation.report.render import esc
from evaluation.tasks import normalise_tool_name
from evaluation.taxonomy.model import CLASS_NAMES
from evaluation.trajectories import ToolCall, Trajectory

_CALL_NUMBER = re.compile(r"#(\d+)")
RESULT_CHARS = 1500
PARAMS_CHARS = 1000
ANSWER_CHARS = 6000

VIEWER_CSS = """
details.task{border:1px solid #ddd;border-radius:6px;margin:.4rem 0;padding:.2rem .6rem}
details.task[open]{background:#fcfcfd}details.task>summary{cursor:pointer;font-weight:600;padding:.3rem 0}
details.task:target{outline:2px solid #F58518}
.call{border-left:3px solid #d0d7de;margin:.4rem 0;padding:.2rem .6rem}.call.err{border-left-color:#b42318}
.call.route{border-left-color:#4C78A8}pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;padding:.4rem;border-radius:4px;font-size:.8rem;margin:.2rem 0}
mark.gold{background:#fff3b0;font-weight:600}.meta{color:#555;font-size:.8rem}
.kp-met{color:#1a7f37}.kp-unmet{color:#b42318}h3{margin:.8rem 0 .3rem;font-size:1rem}
"""

#: Opens the section a link (or the page's address) points at, so a task link shows its trajectory.
VIEWER_SCRIPT = """
function openTarget(){var id=decodeURIComponent(location.hash.slice(1));if(!id)return;
var el=document.getElementById(id);if(!el)return;var d=el.tagName==='DETAILS'?el:el.closest('details');
if(d)d.open=true;el.scrollIntoView();}
window.addEventListener('hashchange',openTarget);window.addEventListener('DOMContentLoaded',openTarget);
"""


def anchor(task_id: str) -> str:
    """A stable, HTML-safe id for a task's section."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", task_id).strip("-")[:60]
    return f"task-{safe}-{hashlib.sha256(task_id.encode()).hexdigest()[:6]}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit:,} more characters]"


def _tool(server: str | None, tool: str, gold: set[str]) -> str:
    label = esc(f"{server}/{tool}" if server else tool)
    return f"<mark class='gold' title='annotated tool'>{label}</mark>" if normalise_tool_name(tool) in gold else label


def _route(call: ToolCall, gold: set[str], section: str) -> str:
    hits = ", ".join(f"{rank}. {_tool(server, tool, gold)}" for rank, (server, tool) in enumerate(call.hits, 1))
    error = f"<div class='kp-unmet'>error: {esc(call.error)}</div>" if call.error else ""
    latency = f" &middot; {call.latency_ms:.0f} ms" if call.latency_ms is not None else ""
    return (
        f"<div class='call route' id='{section}-call-{call.index}'><div class='meta'>#{call.index} route{latency}"
        f"{' &middot; ' + esc(call.call_id) if call.call_id else ''}</div>"
        f"<pre>{esc(call.query or '')}</pre><div>returned: {hits or 'nothing'}</div>{error}</div>"
    )


def _execute(call: ToolCall, gold: set[str], section: str) -> str:
    params = json.dumps(call.params if call.params is not None else {}, ensure_ascii=False, indent=1, default=str)
    state = f"ERROR ({esc(call.error_kind or 'error')})" if call.is_error else "ok"
    latency = f" &middot; {call.latency_ms:.0f} ms" if call.latency_ms is not None else ""
    return (
        f"<div class='call{' err' if call.is_error else ''}' id='{section}-call-{call.index}'>"
        f"<div class='meta'>#{call.index} execute {_tool(call.server, call.tool or '?', gold)} &middot; {state}{latency}"
        f"{' &middot; ' + esc(call.call_id) if call.call_id else ''}</div>"
        f"<div class='meta'>params</div><pre>{esc(_cut(params, PARAMS_CHARS))}</pre>"
        f"<div class='meta'>result</div><pre>{esc(_cut(call.output or '(empty)', RESULT_CHARS))}</pre></div>"
    )


def _key_points(record: VerdictRecord | None) -> str:
    if record is None or not record.key_points:
        return "<p class='meta'>no key points (not judged)</p>"
    judged = {kp.number: kp for vote in record.judges[:1] for kp in vote.key_point_verdicts}
    items = []
    for number, point in enumerate(record.key_points, 1):
        verdict = judged.get(number)
        if verdict is None:
            items.append(f"<li>{esc(point)}</li>")
            continue
        css = "kp-met" if verdict.met else "kp-unmet"
        cited = ", ".join(f"#{n}" for n in verdict.calls) or "none"
        items.append(
            f"<li>{esc(point)} &mdash; <span class='{css}'>{'met' if verdict.met else 'not met'}</span>"
            f" <span class='meta'>({esc(verdict.note) if verdict.note else 'evidence: ' + esc(cited)})</span></li>"
        )
    return f"<ol>{''.join(items)}</ol><p class='meta'>key points: {esc(record.key_points_source)}</p>"


def _workspace(trajectory: Trajectory) -> str:
    if not trajectory.workspace:
        return "<p class='meta'>no files created or changed</p>"
    items = []
    for changed in trajectory.workspace:
        size = f", {changed.size:,} bytes" if changed.size is not None else ""
        preview = f"<pre>{esc(changed.preview)}</pre>" if changed.preview else ""
        items.append(f"<li>{esc(changed.path)} ({esc(changed.change)}{size}){preview}</li>")
    return f"<ul>{''.join(items)}</ul>"


def _verdict(row: TaskRow, record: VerdictRecord | None) -> str:
    parts = [f"<p>verdict: <span class='{esc(row.verdict)}'>{esc(row.verdict)}</span>"]
    if row.judges and len(row.judges) > 1:
        parts.append(" &middot; " + ", ".join(f"{esc(m)}: {esc(v)}" for m, v in row.judges.items()))
    if row.human is not None:
        parts.append(f" &middot; people: {'success' if row.human else 'failure'}")
    parts.append("</p>")
    if record is not None:
        parts.append(f"<div class='meta'>judge {esc(record.judge_model)}, prompt {esc(record.prompt)}</div>")
        if record.trajectory_question:
            parts.append(f"<div class='meta'>the trajectory's own question differed: {esc(record.trajectory_question)}</div>")
    if row.thoughts:
        parts.append(f"<pre>{esc(row.thoughts)}</pre>")
    return "".join(parts)


def _cited(call: str | None, section: str) -> str:
    """An evidence line's call (``#3 (call_id)``) as a link to that call in the section."""
    if not call:
        return ""
    number = _CALL_NUMBER.match(call)
    if number is None:
        return esc(call) + ": "
    return f"<a href='#{section}-call-{number.group(1)}'>{esc(call)}</a>: "


def _diagnosis(row: TaskRow, section: str) -> str:
    d = row.diagnosis
    if d is None:
        return ""
    evidence = "".join(f"<li>{_cited(e.call, section)}{esc(e.note)}</li>" for e in d.evidence)
    source = " (an LLM's second opinion)" if d.source == "llm" else ""
    return (
        f"<h3>Error class</h3><p><b>{esc(CLASS_NAMES[d.label])}</b>{esc(source)}"
        f"{' &middot; ' + esc(d.cause) if d.cause else ''}: {esc(d.reason)}</p><ul>{evidence}</ul>"
    )


def _confirmations(trajectory: Trajectory) -> str:
    if not trajectory.confirmations:
        return ""
    items = "".join(
        f"<li>{esc(f'{c.server}/{c.tool}' if c.server else 'a call')}: {esc(c.answer)}</li>" for c in trajectory.confirmations
    )
    policy = f" (policy: {esc(trajectory.confirm_policy)})" if trajectory.confirm_policy else ""
    return f"<h3>Confirmations{policy}</h3><ul>{items}</ul>"


def task_section(row: TaskRow, trajectory: Trajectory | None, record: VerdictRecord | None) -> str:
    gold = {normalise_tool_name(name) for name in row.gold_tools}
    section = anchor(row.task_id)
    title = (
        f"{esc(row.task_id)} &middot; {esc(row.category)} &middot; <span class='{esc(row.verdict)}'>{esc(row.verdict)}</span>"
        + (f" &middot; {esc(CLASS_NAMES[row.diagnosis.label])}" if row.diagnosis else "")
    )
    body = [f"<h3>Question</h3><p>{esc(row.question)}</p>"]
    if row.gold_tools:
        body.append("<p class='meta'>annotated tools: " + ", ".join(f"<mark class='gold'>{esc(t)}</mark>" for t in row.gold_tools) + "</p>")
    body.append(f"<h3>Key points</h3>{_key_points(record)}")
    if trajectory is None:
        body.append("<p class='no_trajectory'>no trajectory: the task was not run (counted as a failure)</p>")
    else:
        calls = "".join(_route(c, gold, section) if c.kind == "route" else _execute(c, gold, section) for c in trajectory.calls)
        body.append(f"<h3>Tool calls ({len(trajectory.calls)})</h3>{calls or '<p class=meta>none</p>'}")
        body.append(_confirmations(trajectory))
        body.append(f"<h3>Final answer</h3><pre>{esc(_cut(trajectory.final_answer or '(no final answer)', ANSWER_CHARS))}</pre>")
        body.append(f"<h3>Workspace files</h3>{_workspace(trajectory)}")
        if trajectory.end_reason:
            body.append(f"<p class='meta'>ended: {esc(trajectory.end_reason)}</p>")
    body.append(f"<h3>Verdict</h3>{_verdict(row, record)}")
    body.append(_diagnosis(row, section))
    return f"<details class='task' id='{section}'><summary>{title}</summary>{''.join(body)}</details>"


def viewer_sections(report: Report, trajectories: Mapping[str, Trajectory], verdicts: Mapping[str, VerdictRecord]) -> list[str]:
    return [
        "<h2 id='trajectories'>Trajectories</h2>",
        "<p class='note'>One section per task; the task table links here.</p>",
        *[task_section(row, trajectories.get(row.task_id), verdicts.get(row.task_id)) for row in report.tasks],
    ]
