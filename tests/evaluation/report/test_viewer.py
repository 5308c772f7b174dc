"""The trajectory viewer in ``report.html``, checked in a real headless browser: the task table
links to each task's section, which shows everything the log and the verdict hold, offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.judge.cli import main as judge_main
from server.trajectory.records import ConfirmationEvent, WorkspaceFile
from tests.evaluation.judge_helpers import status_by_question, task_entry, write_copilot_log, write_tasks
from tests.support.browser import browser_page
from tests.support.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.timeout(240)

FAIL_REPLY = (
    "Key point 1: not met -- evidence: #2\n"
    "Thoughts: the call to #2 failed with invalid params, so nothing was added.\n"
    'Status: "failure"'
)
OK_REPLY = "Key point 1: met -- evidence: #2\nThoughts: #2 returned 5.\nStatus: success"


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("viewer")
    logs = root / "run"
    logs.mkdir()
    write_copilot_log(
        logs / "t-ok.jsonl", "t-ok", "Add 2 and 3.", routes=[("adding numbers", [("fx", "add")])],
        executes=[{"server": "fx", "tool": "add", "params": {"a": 2, "b": 3}, "text": "5", "latency_ms": 12.0}],
        answer="The sum is 5.", agent="copilot", model="m-1",
    )
    write_copilot_log(
        logs / "t-fail.jsonl", "t-fail", "Add two and 3.",
        routes=[("<tool_assistant>\nserver: math\ntool: add integers\n</tool_assistant>", [("fx", "echo"), ("fx", "add")])],
        executes=[{"server": "fx", "tool": "add", "params": {"a": "two", "b": 3}, "is_error": True,
                   "text": "params.a: 'two' is not of type 'integer'", "error": "params.a: 'two' is not of type 'integer'",
                   "error_kind": "invalid_params", "latency_ms": 3.0}],
        confirmations=[ConfirmationEvent(message="An assistant wants to run fx/add", answer="approved", policy="approve",
                                         server="fx", tool="add")],
        workspace=[WorkspaceFile(path="/root/notes/sum.txt", change="created", size=1, preview="?")],
        answer="I could not add them.", agent="copilot", model="m-1", confirm="approve",
    )
    tasks = write_tasks(root / "tasks.json", [
        task_entry("t-ok", "Add 2 and 3.", "work", steps="1. add the numbers", tools="1. add"),
        task_entry("t-fail", "Add two and 3.", "work", steps="1. add the numbers", tools="1. add"),
        task_entry("t-missing", "Never run.", "travel", tools="1. add"),
    ])
    handler = status_by_question({"Add two and 3.": FAIL_REPLY, "Add 2 and 3.": OK_REPLY})
    with ScriptedOpenAI(handler=handler) as llm:
        code = judge_main([
            str(logs), "--tasks", str(tasks), "--base-url", llm.base_url, "--api-key", "k", "--model", "judge-m",
            "--prompt", "evidence", "--no-progress", "--cache-dir", str(root / "cache"), "--out", str(root / "judge"),
        ])
    assert code == 0
    return root / "judge" / "report.html"


def test_report_is_one_self_contained_file(judged: Path) -> None:
    page = judged.read_text(encoding="utf-8")
    for external in ("src='http", 'src="http', "href='http", 'href="http', "@import", "url(http"):
        assert external not in page
    # And the browser is told so: no script but the page's own (by its hash), nothing loaded from elsewhere.
    assert "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src data:; " in page
    assert "script-src 'sha256-" in page


def test_the_task_table_opens_each_trajectory_in_a_real_browser(judged: Path, tmp_path: Path) -> None:
    requests: list[str] = []
    with browser_page() as page:
        def refuse_network(route) -> None:  # noqa: ANN001 -- playwright's Route
            if not route.request.url.startswith(("file:", "data:")):
                requests.append(route.request.url)
                route.abort()
            else:
                route.continue_()

        page.route("**/*", refuse_network)
        page.goto(judged.as_uri())
        section = page.locator("details.task", has_text="t-fail").first
        assert not section.evaluate("el => el.open")
        assert not section.locator("pre", has_text="is not of type 'integer'").first.is_visible()

        page.locator("table a", has_text="t-fail").first.click()
        # The section opens on the page's hashchange handler, after the click returns: wait for it.
        page.wait_for_function("el => el.open", arg=section.element_handle(), timeout=30_000)
        text = section.inner_text()
        for expected in (
            "Add two and 3.",                    # the question
            "add the numbers",                    # the key point ...
            "not met",                            # ... with the judge's per-key-point verdict
            "tool: add integers",                 # the route query
            "#2 execute fx/add",                  # the execute call
            "ERROR (invalid_params)",             # its error
            "\"a\": \"two\"",                     # its params
            "3 ms",                               # its latency
            "fx/add: approved",                   # the confirmation
            "I could not add them.",              # the final answer
            "/root/notes/sum.txt (created",       # the workspace files
            "the call to #2 failed",              # the judge's thoughts
            "Tool error",                         # the error class with its evidence
        ):
            assert expected in text, expected
        # Annotated tools are highlighted in what route returned.
        assert section.locator("mark.gold", has_text="fx/add").count() >= 1
        assert section.locator("mark.gold", has_text="fx/echo").count() == 0
        # A task without trajectory still has its section.
        page.locator("table a", has_text="t-missing").first.click()
        missing = page.locator("details.task", has_text="t-missing").first
        page.wait_for_function("el => el.open", arg=missing.element_handle(), timeout=30_000)
        assert "no trajectory" in missing.inner_text()

        shot = tmp_path / "viewer.png"
        page.locator("table a", has_text="t-fail").first.click()
        section.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5_000
    assert requests == []
