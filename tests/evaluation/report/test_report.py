"""report.json / report.md / report.html from a judged run, with the expected numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaluation.judge.pipeline import judge_paths
from tests.evaluation.judge_helpers import (
    options,
    status_by_question,
    task_entry,
    write_copilot_log,
    write_tasks,
)
from tests.support.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def judged(llm: ScriptedOpenAI, tmp_path: Path) -> dict:
    """Four tasks in two categories, one without trajectory, with usage, routes and a dead server."""
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(
        logs / "a.jsonl",
        "a",
        "question a",
        routes=[("find", [("fs", "list"), ("fs", "write_file")]), ("again", [("fs", "write_file")])],
        executes=[{"server": "fs", "tool": "write_file"}, {"server": "fs", "tool": "list"}],
        usage=[(1000, 100, 0.01), (500, 50, 0.005)],
    )
    write_copilot_log(
        logs / "b.jsonl",
        "b",
        "question b",
        routes=[("find", [("web", "search"), ("db", "query")])],
        executes=[
            {"server": "db", "tool": "query", "is_error": True, "error": "timed out", "error_kind": "timeout"},
            {
                "server": "db",
                "tool": "query",
                "is_error": True,
                "error": "server db is unavailable",
                "error_kind": "server_unavailable",
            },
        ],
        usage=[(3000, 300, 0.03)],
        answer="I could not reach the database",
    )
    write_copilot_log(logs / "c.jsonl", "c", "question c", routes=[("x", [("web", "search")])], end=False)
    tasks = write_tasks(
        tmp_path / "tasks.json",
        [
            task_entry("a", "question a", "work", tools="1. write_file"),
            task_entry("b", "question b", "work", tools="1. query"),
            task_entry("c", "question c", "shopping", tools="1. buy"),
            task_entry("d", "question d", "shopping"),
        ],
    )
    labels = tmp_path / "labels.json"
    labels.write_text(
        json.dumps(
            [
                {"task_id": t, "task_success": s}
                for t, s in [("a", "success"), ("b", "success"), ("c", "failure"), ("d", "failure")]
            ]
        )
    )
    llm.handler = status_by_question(
        {"question a": "Status: success", "question b": "Status: failure", "question c": "Status: failure"}
    )
    summary = await judge_paths(
        [logs], options(llm, tmp_path, tasks_file=tasks, human_labels=labels, write_reports=True)
    )
    return {"summary": summary, "out": summary.out_dir}


async def test_report_json_numbers(judged: dict) -> None:
    report = json.loads((judged["out"] / "report.json").read_text())
    assert (report["n_tasks"], report["n_with_trajectory"], report["n_judged"], report["success"]) == (4, 3, 3, 1)
    assert report["success_rate"] == pytest.approx(0.25)
    assert report["ci95"] == pytest.approx([0.0456, 0.6994], abs=1e-3)
    assert report["by_category"]["Office"]["success"] == 1 and report["by_category"]["Office"]["n"] == 2
    assert report["by_category"]["Shopping"] == {
        "n": 2,
        "success": 0,
        "rate": 0.0,
        "ci95": [0.0, pytest.approx(0.6576, abs=1e-3)],
    }
    assert report["missing_trajectories"] == ["d"]

    # People say a and b succeeded; the judge says only a: one false failure, kappa by hand = 0.5.
    assert report["human_agreement"] == pytest.approx(0.75) and report["cohen_kappa"] == pytest.approx(0.5)
    assert report["human"]["false_failures"] == ["b"] and report["human"]["false_successes"] == []

    efficiency = report["efficiency"]
    assert efficiency["all"]["n"] == 3
    assert efficiency["success"]["execute_calls"] == 2 and efficiency["success"]["turns"] == 2
    assert efficiency["failure"]["tool_errors"] == 1  # b: 2 errors, c: 0
    assert report["usage"]["input_tokens"] == 4500 and report["usage"]["cost"] == pytest.approx(0.045)

    retrieval = report["retrieval"]
    rows = {row["task_id"]: row for row in report["tasks"]}
    assert (rows["a"]["gold_rank"], rows["b"]["gold_rank"], rows["c"]["gold_rank"]) == (1, 2, None)
    assert rows["c"]["gold_retrieved"] is False and rows["c"]["complete"] is False
    assert (retrieval["tasks_routed"], retrieval["gold_retrieved"]) == (3, 2)
    assert retrieval["recall_at_1"] == pytest.approx(1 / 3) and retrieval["recall_at_5"] == pytest.approx(2 / 3)

    servers = {entry["server"]: entry for entry in report["health"]["servers"]}
    assert (servers["db"]["calls"], servers["db"]["errors"], servers["db"]["timeouts"]) == (2, 2, 1)
    assert servers["db"]["error_kinds"] == {"timeout": 1, "server_unavailable": 1}
    assert servers["fs"]["errors"] == 0
    assert report["health"]["failures_from_unavailable_servers"] == [
        {"task_id": "b", "category": "Office", "servers": ["db"]}
    ]


async def test_markdown_and_html_reports(judged: dict) -> None:
    out: Path = judged["out"]
    markdown = (out / "report.md").read_text()
    assert "1/4 tasks succeeded: 25.0%" in markdown
    assert "| Office | 2 | 1 | 50.0% |" in markdown
    assert "## Tasks without a trajectory (counted as failures)" in markdown and "- d" in markdown
    assert "![by_category](plots/by_category.png)" in markdown
    assert {p.name for p in (out / "plots").iterdir()} == {"by_category.png", "agreement.png", "usage.png"}

    page = (out / "report.html").read_text()
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 3 and all(len(image) > 1000 for image in images)
    assert not re.search(r"(src|href)=['\"]https?:", page)  # self-contained
    assert "<style>" in page and "Cohen&#x27;s kappa" in page
    assert "<td class='success'>success</td>" in page


async def test_page_fixes_counts_legend_all_servers_spellings_and_the_retrieval_split(
    llm: ScriptedOpenAI, tmp_path: Path
) -> None:
    from evaluation.report.files import load_report  # noqa: PLC0415
    from evaluation.report.plots import category_figure, usage_figure  # noqa: PLC0415
    from evaluation.report.tables import health_table, retrieval_split_table  # noqa: PLC0415

    logs = tmp_path / "logs"
    logs.mkdir()
    # 35 servers, two of them spelled three ways; tasks that did and did not see an annotated tool.
    for number in range(35):
        write_copilot_log(
            logs / f"s{number}.jsonl", f"s{number}", f"question s{number}",
            routes=[("find", [("srv", "gold") if number % 2 else ("srv", "other")])],
            executes=[{"server": f"server-{number}", "tool": "t"}], usage=[(100 * (number + 1), 10, None)],
        )
    write_copilot_log(logs / "y1.jsonl", "y1", "question y1", executes=[{"server": "Yahoo Finance", "tool": "t"}])
    write_copilot_log(logs / "y2.jsonl", "y2", "question y2", executes=[{"server": "yahoo_finance", "tool": "t"}])
    write_copilot_log(logs / "y3.jsonl", "y3", "question y3", executes=[{"server": "yahoo-finance", "tool": "t"},
                                                                        {"server": "yahoo-finance", "tool": "t"}])
    ids = [f"s{n}" for n in range(35)] + ["y1", "y2", "y3"]
    tasks = write_tasks(tmp_path / "tasks.json", [task_entry(t, f"question {t}", "work", tools="1. gold") for t in ids])
    # Every task with an annotated tool in its route results succeeds; the others fail.
    llm.handler = lambda request: Reply(content="Status: success" if "srv/gold" in json.dumps(request) else "Status: failure")
    await judge_paths([logs], options(llm, tmp_path, tasks_file=tasks, prompt="evidence"))
    report = load_report(tmp_path / "out")

    health = health_table(report)
    assert len(health.rows) == 36 and "All 36 server(s) called" in health.note  # no silent cut at 30
    yahoo = next(row for row in health.rows if row[0].startswith("yahoo-finance"))
    assert yahoo[0] == "yahoo-finance (also: Yahoo Finance, yahoo_finance)" and yahoo[1] == "4"

    split = report.retrieval_split
    assert (split.returned.success, split.returned.n) == (17, 17)
    assert (split.not_returned.success, split.not_returned.n) == (0, 18)
    assert (split.no_route.n) == 3
    assert retrieval_split_table(report).rows[0][:3] == ["an annotated tool was returned", "17", "17"]

    # 100% success in a category: the count is in the label, never drawn over the error bar.
    figure = category_figure(report.model_copy(update={"by_category": {"Office": type(report.by_category["Office"]).of(17, 17)}}))
    axes = figure.axes[0]
    assert len(axes.texts) == 0
    assert [label.get_text() for label in axes.get_yticklabels()] == ["Office  17/17", "All  17/38"]
    figure = usage_figure(report)
    axes = figure.axes[0]
    assert [text.get_text() for text in axes.get_legend().get_texts()] == ["success (n=17)", "not success (n=18)"]
    highest = max(row.input_tokens + row.output_tokens for row in report.tasks if row.input_tokens)
    assert axes.get_ylim()[1] > highest and axes.get_xlim() == (-0.6, 1.6)


def _built(universe: dict[str, str], trajectories: list[str], verdicts: dict[str, str]):
    """A report built straight from tasks (id -> category), the ids with a trajectory and the verdicts."""
    from evaluation.judge.verdict_log import JudgeVote, VerdictRecord  # noqa: PLC0415
    from evaluation.report.build import build_report  # noqa: PLC0415
    from evaluation.report.models import InputInfo, JudgeInfo, TaskInfo  # noqa: PLC0415
    from evaluation.trajectories import Trajectory  # noqa: PLC0415

    records = {
        task_id: VerdictRecord(
            task_id=task_id, category=universe[task_id], verdict=verdict, judge_model="judge-a", prompt="livemcpeval",
            prompt_hash="p", config_hash="c", trajectory_hash="t", judges=[JudgeVote(model="judge-a", verdict=verdict)],
        )
        for task_id, verdict in verdicts.items()
    }
    return build_report(
        universe=[TaskInfo(task_id=t, question=f"question {t}", category=c) for t, c in universe.items()],
        trajectories={t: Trajectory(task_id=t, format="copilot", question=f"question {t}") for t in trajectories},
        verdicts=records,  # type: ignore[arg-type]
        human=None,
        judge=JudgeInfo(models=["judge-a"], prompt="livemcpeval", key_points="annotated"),
        inputs=InputInfo(),
    )


def test_the_category_plots_overall_bar_is_the_reports_own_rate() -> None:
    # Before: the "All" bar was success over every task, 1/3, counting the task the judge never
    # decided as a failure, while the headline and the table said 1/2.
    from evaluation.report.plots import category_figure, pyplot  # noqa: PLC0415

    report = _built({"ok": "Office", "bad": "Office", "lost": "Office"}, ["ok", "bad", "lost"], {"ok": "success", "bad": "failure"})
    assert (report.success, report.n_with_outcome, report.success_rate, report.not_judged) == (1, 2, 0.5, ["lost"])
    figure = category_figure(report)
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["Office  1/2", "All  1/2"]
    assert [bar.get_width() for bar in axes.patches] == [50.0, 50.0]
    pyplot().close(figure)


def test_tasks_without_a_trajectory_are_failures_even_when_nothing_was_judged() -> None:
    # Before: whether there was a rate hung on the *judged* tasks, so a run whose every task lacks
    # a trajectory read "n/a -- not judged; rerun the judge", though each of those tasks is a failure.
    from evaluation.report.tables import category_table, headline  # noqa: PLC0415

    report = _built({"a": "Office", "b": "Travel"}, [], {})
    assert (report.success_rate, report.success, report.failure, report.n_judged) == (0.0, 0, 2, 0)
    assert report.missing_trajectories == ["a", "b"] and report.ci95[0] == 0.0 and report.ci95[1] > 0.5
    assert {name: (rate.n, rate.rate) for name, rate in report.by_category.items()} == {"Office": (1, 0.0), "Travel": (1, 0.0)}
    assert [(judge.success_rate, judge.failure) for judge in report.judges] == [(0.0, 0)]
    assert headline(report)[0].startswith("0/2 tasks succeeded: 0.0% (95% CI 0.0%-")
    assert category_table(report).rows[-1][:4] == ["**all**", "2", "0", "0.0%"]


def test_labels_from_user_data_are_drawn_literally() -> None:
    # Before: "$$" in a category (or "$^$" in a judge's name) stopped the report with a mathtext
    # parse error from matplotlib, after every verdict was in.
    from matplotlib.cbook import is_math_text  # noqa: PLC0415

    from evaluation.report.plots import agreement_figure, category_figure, figure_png, render_plots  # noqa: PLC0415

    report = _built({"a": "Deals $$", "b": "$^$ and $x$"}, ["a", "b"], {"a": "success", "b": "failure"})
    report.judges = [report.judges[0].model_copy(update={"model": name}) for name in ("gpt$^$x", "m$$")]
    labels = []
    for figure in (category_figure(report), agreement_figure(report)):
        axes = figure.axes[0]
        labels += [label.get_text() for label in axes.get_yticklabels()]
        assert figure_png(figure).startswith(b"\x89PNG")
    assert not any(is_math_text(label) for label in labels)
    assert [label.replace("\\$", "$") for label in labels] == [
        "$^$ and $x$  0/1", "Deals $$  1/1", "All  1/2", "gpt$^$x", "m$$",
    ]
    assert set(render_plots(report)) == {"by_category", "agreement"}


@pytest.mark.parametrize("newline", ["\n", "\r", "\r\n", "\u2028", "\u2029", "\x0b", "\x85"])
def test_a_line_break_of_any_kind_in_a_cell_keeps_the_markdown_row_whole(newline: str) -> None:
    # Before: only "\n" was replaced: a bare CR in a question split the row of report.md.
    from evaluation.report.render import markdown_table  # noqa: PLC0415
    from evaluation.report.tables import Table  # noqa: PLC0415

    lines = markdown_table(Table("Tasks", ["task", "question"], [["t1", f"Question 1:{newline}| find it{newline}"]]))
    assert lines[-2:] == ["| t1 | Question 1: \\| find it |", ""]


def test_a_long_list_says_how_many_it_leaves_to_report_json() -> None:
    # The Markdown and HTML lists stopped at 200 without a word: 210 tasks without a trajectory read as 200.
    from evaluation.report.render import MAX_LISTED, report_html, report_markdown  # noqa: PLC0415

    tasks = {f"m{i:03d}": "Office" for i in range(MAX_LISTED + 10)}
    report = _built(tasks, [], {})
    assert len(report.missing_trajectories) == MAX_LISTED + 10
    markdown = report_markdown(report, {})
    assert "- m199\n- … and 10 more (every one is in report.json)\n" in markdown and "- m200" not in markdown
    assert "<li>m199</li><li>… and 10 more (every one is in report.json)</li></ul>" in report_html(report, {})


def test_text_from_agents_servers_and_tasks_stays_text_in_the_markdown() -> None:
    # Before: a task id (or an agent's name, a server's error) holding "\n# heading" or "<script>"
    # added its own lines and raw HTML to report.md, which Markdown viewers render.
    from evaluation.report.render import markdown_text, report_markdown  # noqa: PLC0415

    hostile = "t<img src=x onerror=alert(1)>\n\n# INJECTED\n<script>alert('md')</script>\u2028- item & more"
    report = _built({hostile: "Office"}, [], {})
    markdown = report_markdown(report, {})
    assert "<script>" not in markdown and "<img" not in markdown
    assert not any(line.startswith(("# INJECTED", "- item")) for line in markdown.splitlines())
    assert markdown_text(hostile) == (
        "t&lt;img src=x onerror=alert(1)&gt;  # INJECTED &lt;script&gt;alert('md')&lt;/script&gt; - item &amp; more"
    )
