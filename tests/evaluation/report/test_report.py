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
    # Each judge's row adds up: the tasks without a trajectory are its failures too (it said 0).
    assert [(judge.success_rate, judge.success, judge.failure, judge.abstain) for judge in report.judges] == [(0.0, 0, 2, 0)]
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
    # Link and image syntax stays text: a viewer fetched ![x](url) from wherever the name said.
    assert markdown_text("t![pixel](https://tracker.example/p.png) [x](y) a\\b") == (
        "t!\\[pixel\\](https://tracker.example/p.png) \\[x\\](y) a\\\\b"
    )


def test_a_task_the_judge_never_decided_is_no_failure_anywhere() -> None:
    # Before: "lost" (never decided, 20 execute calls, its server unavailable) was a failure in the
    # efficiency table, the retrieval split (1/3 instead of 1/2), the unavailable-server list and
    # the usage plot, while the headline left it out of the rate.
    from evaluation.report.plots import pyplot, usage_figure  # noqa: PLC0415
    from evaluation.report.tables import headline, retrieval_split_table, unavailable_table  # noqa: PLC0415
    from tests.evaluation.report.support import built, record, trajectory  # noqa: PLC0415

    universe = {task: ("Office", ["echo"]) for task in ("ok", "bad", "lost")}
    report = built(
        universe,
        [
            trajectory("ok", executes=2, routes=[["echo"]], tokens=(90, 10)),
            trajectory("bad", executes=4, routes=[["echo"]], tokens=(180, 20)),
            trajectory("lost", executes=20, routes=[["echo"]], tokens=(900, 100), unavailable="srv"),
        ],
        [record("ok", "success"), record("bad", "failure")],
    )
    assert (report.success, report.n_with_outcome, report.not_judged) == (1, 2, ["lost"])
    failure, everything = report.efficiency["failure"], report.efficiency["all"]
    assert (failure.n, failure.execute_calls, failure.tokens) == (1, 4.0, 200.0)
    assert (everything.n, everything.execute_calls) == (3, 8.667)  # "all" is every task with a trajectory
    returned = report.retrieval_split.returned  # type: ignore[union-attr]
    assert (returned.n, returned.success, returned.rate) == (2, 1, 0.5)
    assert retrieval_split_table(report).rows[0][:4] == ["an annotated tool was returned", "2", "1", "50.0%"]  # type: ignore[union-attr]
    assert "When route returned an annotated tool: 1/2 succeeded; when it did not: 0/0." in headline(report)
    assert report.health.failures_from_unavailable_servers == [] and unavailable_table(report) is None
    figure = usage_figure(report)
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert legend == ["success (n=1)", "not success (n=1)"]
    pyplot().close(figure)


def test_each_judges_row_adds_up_to_its_rate() -> None:
    # Before: "judge-a | 1 | 1 | 0 | 25.0%": the rate counted the two tasks without a trajectory as
    # failures, the failure column did not.
    from evaluation.report.tables import judges_table  # noqa: PLC0415
    from tests.evaluation.report.support import built, record, trajectory  # noqa: PLC0415

    jury = ("judge-a", "judge-b")
    report = built(
        {task: "Office" for task in ("t1", "t2", "t3", "t4", "t5")},
        [trajectory("t1"), trajectory("t2"), trajectory("t5")],
        [
            record("t1", "success", {"judge-a": "success", "judge-b": "success"}),
            record("t2", "failure", {"judge-a": "failure", "judge-b": "abstain"}),
        ],
        models=jury,
    )
    assert (report.success, report.n_with_outcome, report.missing_trajectories, report.not_judged) == (1, 4, ["t3", "t4"], ["t5"])
    for judge in report.judges:
        assert judge.success + judge.failure + judge.abstain == report.n_with_outcome
    assert [row[:5] for row in judges_table(report).rows] == [  # type: ignore[union-attr]
        ["judge-a", "1", "3", "0", "25.0%"],
        ["judge-b", "1", "2", "1", "25.0%"],
    ]


def test_an_undefined_interval_is_null_and_shown_as_n_a() -> None:
    # Before: with no task with an outcome, report.json had success_rate null but ci95 [0.0, 0.0],
    # and each empty category the same: an interval of no task read as a certain 0%.
    from evaluation.report.plots import category_figure, pyplot  # noqa: PLC0415
    from evaluation.report.render import report_html, report_markdown  # noqa: PLC0415
    from evaluation.report.tables import category_table, headline  # noqa: PLC0415
    from tests.evaluation.report.support import built, record, trajectory  # noqa: PLC0415

    nothing = built({"a": "Office", "b": "Travel"}, [trajectory("a"), trajectory("b")], [])
    data = json.loads(nothing.model_dump_json())
    assert (data["success_rate"], data["ci95"]) == (None, None)
    assert {name: (rate["rate"], rate["ci95"]) for name, rate in data["by_category"].items()} == {
        "Office": (None, None), "Travel": (None, None),
    }
    assert [row[3:] for row in category_table(nothing).rows] == [["n/a (not judged)", ""]] * 3
    assert headline(nothing)[0].startswith("Success rate: n/a -- not judged")
    for page in (report_markdown(nothing, {}), report_html(nothing, {})):
        assert "0.0%-0.0%" not in page
    # One category undecided, the other judged: a rate overall, none (and no error bar) for Office.
    half = built({"a": "Office", "b": "Travel"}, [trajectory("a"), trajectory("b")], [record("b", "success", category="Travel")])
    assert (half.by_category["Office"].ci95, half.success_rate) == (None, 1.0)
    assert category_table(half).rows[0] == ["Office", "0", "0", "n/a (not judged)", ""]
    figure = category_figure(half)
    assert [bar.get_width() for bar in figure.axes[0].patches] == [0.0, 100.0, 100.0]
    pyplot().close(figure)


def test_the_agreement_plot_rounds_as_the_table_does() -> None:
    # Before: the plot's title said 62% beside the table's 62.5%.
    from evaluation.report.plots import agreement_figure, pyplot  # noqa: PLC0415
    from evaluation.report.tables import agreement_table  # noqa: PLC0415
    from tests.evaluation.report.support import built, record, trajectory  # noqa: PLC0415

    tasks = [f"t{i}" for i in range(8)]
    people = dict(zip(tasks, [True, True, True, False, False, False, True, True], strict=True))
    verdicts = ["success"] * 4 + ["failure"] * 4  # agrees with people on 5 of 8 tasks
    report = built(
        dict.fromkeys(tasks, "Office"), [trajectory(t) for t in tasks],
        [record(t, v) for t, v in zip(tasks, verdicts, strict=True)], human=people,
    )
    assert agreement_table(report).note.startswith("8 labelled tasks: agreement 62.5%, Cohen's kappa 0.25")  # type: ignore[union-attr]
    figure = agreement_figure(report)
    assert figure.axes[0].get_title() == "Judge vs people: agreement 62.5%, kappa 0.25"
    pyplot().close(figure)


def test_the_efficiency_table_says_time_per_task_and_units() -> None:
    from evaluation.report.build import efficiency_group  # noqa: PLC0415
    from evaluation.report.models import TaskRow  # noqa: PLC0415

    rows = [
        TaskRow(task_id="a", category="Office", question="q", verdict="success", seconds=30.0, tool_seconds=2.0),
        TaskRow(task_id="b", category="Office", question="q", verdict="failure", seconds=90.0, tool_seconds=None),
        TaskRow(task_id="c", category="Office", question="q", verdict="failure"),  # a log without times
    ]
    group = efficiency_group(rows)
    assert (group.seconds, group.tool_seconds) == (60.0, 2.0)  # over the tasks that logged them, not 0 for c


def test_a_jury_reports_how_far_its_judges_agree_without_human_labels() -> None:
    # Researchers asked how reliable a jury is; without human labels the report had no figure.
    from evaluation.report.tables import jury_table  # noqa: PLC0415
    from tests.evaluation.report.support import built, record, trajectory  # noqa: PLC0415

    votes = {
        "t1": ("success", "success", "success"),
        "t2": ("failure", "failure", "failure"),
        "t3": ("success", "failure", "success"),
        "t4": ("failure", "failure", "abstain"),
        "t5": ("success", "success", "failure"),
    }
    models = ("a", "b", "c")
    report = built(
        {task: "Office" for task in (*votes, "t6")},
        [trajectory(task) for task in votes],
        [
            record(task, "success" if said.count("success") >= 2 else "failure", dict(zip(models, said, strict=True)))
            for task, said in votes.items()
        ],
        models=models,
    )
    jury = report.jury
    assert jury is not None and jury.n == 5  # t6 has no trajectory: no judge voted on it
    assert jury.split_tasks == ["t3", "t5"]  # abstain counts as "not success", as in the jury's majority
    pairs = {(p.judge_a, p.judge_b): (p.agreement, p.cohen_kappa) for p in jury.pairs}
    assert pairs[("a", "b")][0] == pytest.approx(4 / 5)
    assert pairs[("a", "c")][0] == pytest.approx(4 / 5)
    assert pairs[("b", "c")][0] == pytest.approx(3 / 5)
    # Fleiss by hand: p = 8/15 success votes; each task's pairwise agreement 1, 1, 1/3, 1, 1/3.
    expected = (8 / 15) ** 2 + (7 / 15) ** 2
    assert jury.fleiss_kappa == pytest.approx(((11 / 3) / 5 - expected) / (1 - expected))
    table = jury_table(report)
    assert table is not None and [row[:3] for row in table.rows] == [["a", "b", "5"], ["a", "c", "5"], ["b", "c", "5"]]
    assert "split on 2 task(s): t3, t5" in table.note
    single = built({"t1": "Office"}, [trajectory("t1")], [record("t1", "success")])
    assert single.jury is None and jury_table(single) is None


def test_fleiss_kappa_is_undefined_when_every_vote_is_the_same() -> None:
    from evaluation.report.stats import fleiss_kappa  # noqa: PLC0415

    assert fleiss_kappa([[True, True], [True, True]]) is None
    assert fleiss_kappa([]) is None and fleiss_kappa([[True]]) is None
    assert fleiss_kappa([[True, True], [False, False]]) == pytest.approx(1.0)
    assert fleiss_kappa([[True, False], [False, True]]) == pytest.approx(-1.0)


def test_each_tool_routed_or_executed_is_counted_with_its_tasks() -> None:
    # Researchers asked which tools were shown and called how often; the health table is per server.
    from evaluation.report.tables import tools_table  # noqa: PLC0415
    from evaluation.trajectories.model import ToolCall  # noqa: PLC0415
    from tests.evaluation.report.support import built, record, trajectory  # noqa: PLC0415

    first = trajectory("t1", executes=2, routes=[["echo", "add"], ["echo"]])
    second = trajectory("t2", executes=1, routes=[["add", "add"]])  # one tool twice in one answer: shown once
    second.calls.append(ToolCall(index=9, kind="execute", server="S", tool="Add", is_error=True))  # another spelling
    report = built(
        {"t1": ("Office", ["add"]), "t2": ("Office", ["Add", "echo"]), "t3": "Office"},
        [first, second],
        [record("t1", "success"), record("t2", "failure")],
    )
    usage = {(t.server, t.tool): t for t in report.tools}
    assert list(usage) == [("s", "echo"), ("s", "add")]  # most executed first; "S"/"Add" is "s"/"add"
    echo, add = usage[("s", "echo")], usage[("s", "add")]
    assert (echo.routed, echo.routed_tasks, echo.executed, echo.executed_tasks, echo.successful_tasks) == (2, 1, 3, 2, 1)
    assert (add.routed, add.routed_tasks, add.executed, add.errors, add.executed_tasks, add.successful_tasks) == (2, 2, 1, 1, 1, 0)
    assert (echo.gold_tasks, add.gold_tasks) == (1, 2)
    table = tools_table(report)
    assert table is not None and table.rows[0][:3] == ["s", "echo", "2"]
    assert tools_table(built({"t1": "Office"}, [trajectory("t1")], [record("t1", "success")])) is None
