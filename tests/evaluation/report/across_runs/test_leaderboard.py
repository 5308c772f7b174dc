"""``python -m evaluation.leaderboard``: three judged runs with known costs, the Pareto frontier,
McNemar between frontier neighbours, Markdown + self-contained HTML, and mixed judges flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.judge.pipeline import judge_paths
from evaluation.report.across_runs.leaderboard import main, pareto_frontier
from tests.evaluation.judge_helpers import options, question_of, task_entry, write_copilot_log, write_tasks
from tests.support.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.timeout(120)

TASKS = [f"t{i:02d}" for i in range(20)]


async def judged_run(
    llm: ScriptedOpenAI,
    root: Path,
    model: str,
    cost: float,
    solved: int,
    prompt: str = "livemcpeval",
    unjudged: frozenset[str] | set[str] = frozenset(),
) -> Path:
    """A run of ``model`` that solves the first ``solved`` tasks; the judge's requests fail on ``unjudged``."""
    run = root / model
    run.mkdir()
    for task in TASKS:
        write_copilot_log(run / f"{task}.jsonl", task, f"question {task} by {model}", agent="copilot", model=model,
                          usage=[(1000, 100, cost)])
    tasks = write_tasks(root / f"tasks-{model}.json", [task_entry(t, f"question {t} by {model}") for t in TASKS])
    wins = set(TASKS[:solved])

    def reply(request: dict) -> Reply:
        task = question_of(request).removeprefix("question ").partition(" by ")[0]  # "question <task> by <model>"
        if task in unjudged:
            return Reply(status=500)
        return Reply(content="Status: success" if task in wins else "Status: failure")

    llm.handler = reply
    await judge_paths(
        [run],
        options(llm, root, tasks_file=tasks, out_dir=run / "judge", cache_dir=root / "cache", prompt=prompt, max_retries=0),
    )
    return run


def test_pareto_frontier_keeps_the_runs_nothing_beats() -> None:
    points = [("a", 0.01, 0.25), ("b", 0.05, 0.75), ("c", 0.2, 0.5), ("d", 0.05, 0.75), ("e", 0.01, 0.2)]
    assert pareto_frontier(points) == ["a", "b", "d"]  # c is dearer and worse than b; e worse than a at a's cost


def test_pareto_frontier_compares_points_not_keys() -> None:
    # Before: a point was compared only with points of another name, so of two runs sharing one,
    # the dearer and no better run stayed on the frontier.
    assert pareto_frontier([("x", 2.0, 0.5), ("x", 1.0, 0.5), ("y", 3.0, 0.9)]) == ["x", "y"]


def test_runs_equal_but_for_float_rounding_are_both_on_the_frontier() -> None:
    # Before: a cost summed in another order ($0.012499999999999999 vs $0.0125, both shown as
    # $0.0125 at 50.0%) left only the cheaper-by-rounding run on the frontier.
    assert pareto_frontier([("run", 0.012499999999999999, 0.5), ("repeats", 0.0125, 0.5)]) == ["run", "repeats"]
    assert pareto_frontier([("run", 0.0125, 0.5), ("repeats", 0.0125, 0.5 - 1e-16)]) == ["run", "repeats"]
    assert pareto_frontier([("run", 0.0124, 0.5), ("dearer", 0.0125, 0.5)]) == ["run"]  # a real difference still counts


async def test_three_runs_frontier_steps_and_files(llm: ScriptedOpenAI, tmp_path: Path, capsys) -> None:
    cheap = await judged_run(llm, tmp_path, "cheap-m", 0.01, 5)
    good = await judged_run(llm, tmp_path, "good-m", 0.05, 15)
    dear = await judged_run(llm, tmp_path, "dear-m", 0.20, 10)
    out = tmp_path / "board"
    assert main([str(cheap), str(good), str(dear / "judge"), "--out", str(out)]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    entries = {e["name"]: e for e in board["entries"]}
    assert board["axis"] == "cost" and board["frontier"] == ["copilot cheap-m", "copilot good-m"]
    assert entries["copilot dear-m"]["on_frontier"] is False
    assert (entries["copilot cheap-m"]["cost"], entries["copilot good-m"]["success_rate"]) == (0.01, 0.75)
    assert entries["copilot good-m"]["total_cost"] == pytest.approx(1.0)
    [step] = board["steps"]
    assert (step["cheaper"], step["dearer"], step["common_tasks"]) == ("copilot cheap-m", "copilot good-m", 20)
    assert (step["only_cheaper"], step["only_dearer"]) == (0, 10)
    assert step["p_value"] == pytest.approx(2 * 0.5**10) and step["significant"] is True
    assert step["difference"] == pytest.approx(0.5)
    assert board["warnings"] == []

    markdown = (out / "leaderboard.md").read_text()
    assert "Pareto frontier (cost vs success): copilot cheap-m -> copilot good-m" in markdown
    assert "| copilot good-m | 20 | 1 | 75.0% |" in markdown and "![cost vs success](leaderboard.png)" in markdown
    page = (out / "leaderboard.html").read_text()
    assert "data:image/png;base64," in page and "src='http" not in page and "href='http" not in page
    assert capsys.readouterr().out.startswith("# Leaderboard")


async def test_runs_judged_differently_are_flagged(llm: ScriptedOpenAI, tmp_path: Path) -> None:
    a = await judged_run(llm, tmp_path, "a-m", 0.01, 5)
    b = await judged_run(llm, tmp_path, "b-m", 0.02, 6, prompt="evidence")
    assert main([str(a), str(b), "--out", str(tmp_path / "board")]) == 0
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert board["warnings"][0].startswith("the runs were judged by different judges or prompts")
    assert "judge-a/evidence" in board["warnings"][0]
    assert "(differs!)" in (tmp_path / "board" / "leaderboard.md").read_text()


def test_a_directory_that_was_not_judged_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path), "--out", str(tmp_path / "board")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "python -m evaluation.judge" in err


@pytest.mark.parametrize("alpha", ["1.5", "0", "nan"])
def test_an_alpha_that_is_no_significance_level_is_one_error_before_any_run_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], alpha: str
) -> None:
    assert main([str(tmp_path), "--out", str(tmp_path / "board"), "--alpha", alpha]) == 2
    assert capsys.readouterr().err == f"error: --alpha must be between 0 and 1 (got {float(alpha)}).\n"
    assert not (tmp_path / "board").exists()


async def test_a_repeated_run_shows_pass_at_n_and_the_interval_from_repeats_json(
    llm: ScriptedOpenAI, tmp_path: Path
) -> None:
    from evaluation.judge.repeats import judge_repeats  # noqa: PLC0415

    # 4 tasks x 3 repeats: t0 always solved, t1 once, t2 twice, t3 never.
    solved_in = {"t0": {0, 1, 2}, "t1": {0}, "t2": {0, 1}, "t3": set()}
    tasks = write_tasks(tmp_path / "tasks.json", [task_entry(t, f"question {t}") for t in solved_in])
    repeats = []
    for number in range(3):
        repeat = tmp_path / "rep" / f"repeat-{number + 1}"
        repeat.mkdir(parents=True)
        for task, wins in solved_in.items():
            write_copilot_log(repeat / f"{task}.jsonl", task, f"question {task}", agent="copilot", model="rep-m",
                              answer="answer WIN" if number in wins else "answer LOSE", usage=[(1000, 100, 0.01)])
        repeats.append(repeat)
    llm.handler = lambda request: Reply(content="Status: success" if "answer WIN" in str(request) else "Status: failure")
    judged = await judge_repeats(repeats, options(llm, tmp_path, tasks_file=tasks, out_dir=None), tmp_path / "rep")
    assert judged.fatal is None
    stored = json.loads((tmp_path / "rep" / "repeats.json").read_text())
    assert (stored["pass_at_1"], stored["pass_at_k"]["3"], stored["pass_hat_k"]["3"]) == (0.5, 0.75, 0.25)
    low, high = stored["pass_at_1_ci95"]
    assert 0 < low < 0.5 < high < 1

    out = tmp_path / "board"
    assert main([str(tmp_path / "rep"), "--out", str(out)]) == 0
    [entry] = json.loads((out / "leaderboard.json").read_text())["entries"]
    assert (entry["name"], entry["repeats"], entry["n_tasks"]) == ("copilot rep-m", 3, 4)
    assert (entry["success_rate"], entry["pass_at_n"], entry["pass_hat_n"]) == (0.5, 0.75, 0.25)
    assert entry["ci95"] == [low, high]
    assert entry["total_cost"] == pytest.approx(0.01 * 4 * 3)
    row = f"| copilot rep-m | 4 | 3 | 50.0% | {low:.1%}-{high:.1%} | 75.0% | 25.0% |"
    assert row in (out / "leaderboard.md").read_text()


async def test_a_run_with_no_success_and_runs_over_different_tasks(llm: ScriptedOpenAI, tmp_path: Path) -> None:
    none = await judged_run(llm, tmp_path, "none-m", 0.01, 0)
    other = tmp_path / "other-m"
    other.mkdir()
    for task in TASKS[:3]:
        write_copilot_log(other / f"{task}.jsonl", task, f"question {task} by other-m", agent="copilot", model="other-m",
                          usage=[(1000, 100, 0.02)])
    tasks = write_tasks(tmp_path / "tasks-other.json", [task_entry(t, f"question {t} by other-m") for t in TASKS[:3]])
    llm.handler = lambda request: Reply(content="Status: success")
    await judge_paths([other], options(llm, tmp_path, tasks_file=tasks, out_dir=other / "judge", cache_dir=tmp_path / "cache"))

    out = tmp_path / "board"
    assert main([str(none), str(other), "--out", str(out)]) == 0  # a 0% run plots (its interval starts at 0)
    board = json.loads((out / "leaderboard.json").read_text())
    entries = {e["name"]: e for e in board["entries"]}
    assert entries["copilot none-m"]["success_rate"] == 0.0 and entries["copilot none-m"]["ci95"][0] == 0.0
    [warning] = [w for w in board["warnings"] if "different task sets" in w]
    assert "copilot none-m: 20" in warning and "copilot other-m: 3" in warning and "3 in all" in warning
    assert (out / "leaderboard.png").stat().st_size > 0


async def test_runs_with_unjudged_tasks_are_flagged(llm: ScriptedOpenAI, tmp_path: Path) -> None:
    # A judge endpoint that failed on some tasks left them "not judged", counted as failures: the
    # board ranked that run lower with no word of why.
    good = await judged_run(llm, tmp_path, "good-m", 0.05, 15)
    flaky = await judged_run(llm, tmp_path, "flaky-m", 0.01, len(TASKS), unjudged={"t00", "t01", "t02"})
    assert main([str(good), str(flaky), "--out", str(tmp_path / "board")]) == 0
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    entries = {e["name"]: e for e in board["entries"]}
    assert (entries["copilot flaky-m"]["not_judged"], entries["copilot good-m"]["not_judged"]) == (3, 0)
    [warning] = [w for w in board["warnings"] if w.startswith("tasks never judged")]
    assert "(copilot flaky-m: 3 of 20)" in warning and "rerun the judge" in warning
    assert f"- warning: {warning}" in (tmp_path / "board" / "leaderboard.md").read_text()


async def test_unjudged_tasks_are_left_out_of_frontier_steps_and_an_unjudged_run_has_no_rate(
    llm: ScriptedOpenAI, tmp_path: Path
) -> None:
    # Before: the step paired the 5 tasks flaky's judge never decided as flaky's failures (10 "only
    # dearer" wins, 5 of them the judge endpoint's); a run with no verdict at all ranked as 0%.
    good = await judged_run(llm, tmp_path, "good-m", 0.05, 15)
    # flaky-m solves t05..t09 of the 15 tasks its judge decided (t00..t04 never were).
    flaky = await judged_run(llm, tmp_path, "flaky-m", 0.01, 10, unjudged=set(TASKS[:5]))
    dead = await judged_run(llm, tmp_path, "dead-m", 0.001, 0, unjudged=set(TASKS))
    assert main([str(good), str(flaky), str(dead), "--out", str(tmp_path / "board")]) == 0
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    entries = {e["name"]: e for e in board["entries"]}
    assert entries["copilot dead-m"]["success_rate"] is None and entries["copilot dead-m"]["on_frontier"] is False
    assert board["frontier"] == ["copilot flaky-m", "copilot good-m"]
    [step] = board["steps"]
    assert (step["common_tasks"], step["only_cheaper"], step["only_dearer"]) == (15, 0, 5)
    markdown = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "| copilot dead-m | 20 | 1 | n/a (not judged) |" in markdown


async def _same_agent_run(llm: ScriptedOpenAI, root: Path, name: str, tokens: int, verdict: str) -> Path:
    """A judged run of agent ``copilot`` with model ``same-m`` (three tasks, ``tokens`` each), in ``root/name``."""
    run = root / name
    run.mkdir()
    for task in ("a", "b", "c"):
        write_copilot_log(run / f"{task}.jsonl", task, f"question {task}", agent="copilot", model="same-m",
                          usage=[(tokens, 0, None)])
    llm.handler = lambda request: Reply(content=f"Status: {verdict}")
    await judge_paths([run], options(llm, root, out_dir=run / "judge", cache_dir=root / f"cache-{name}"))
    return run / "judge"


async def test_runs_of_the_same_agent_and_model_get_unique_names_and_the_right_frontier(
    llm: ScriptedOpenAI, tmp_path: Path
) -> None:
    # Before: r2 and r3 were both "copilot same-m (judge)", and the frontier marked r3 (dearer and
    # no better than r2) because the names collapsed into one entry.
    r1 = await _same_agent_run(llm, tmp_path, "r1", 1000, "success")
    r2 = await _same_agent_run(llm, tmp_path, "r2", 100, "failure")
    r3 = await _same_agent_run(llm, tmp_path, "r3", 10000, "failure")
    out = tmp_path / "board"
    assert main([str(r1), str(r2), str(r3), "--out", str(out)]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert [entry["name"] for entry in board["entries"]] == ["copilot same-m", "copilot same-m (r2)", "copilot same-m (r3)"]
    assert [entry["on_frontier"] for entry in board["entries"]] == [True, True, False]
    assert board["frontier"] == ["copilot same-m (r2)", "copilot same-m"]
    [step] = board["steps"]
    assert (step["cheaper"], step["dearer"], step["only_dearer"]) == ("copilot same-m (r2)", "copilot same-m", 3)
    # Any number of clashes, even one directory passed again and again, gives unique names.
    assert main([str(r1), str(r1), str(r1), str(r1), "--out", str(out)]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert [entry["name"] for entry in board["entries"]] == [
        "copilot same-m", "copilot same-m (r1)", f"copilot same-m ({r1})", f"copilot same-m ({r1}) #2",
    ]


def test_run_names_with_dollars_are_drawn_literally(tmp_path: Path) -> None:
    # Before: a model named "gpt$^$x" stopped the leaderboard with a matplotlib mathtext error.
    from evaluation.report.across_runs.leaderboard import Entry, build_leaderboard, frontier_figure, write_leaderboard  # noqa: PLC0415

    entries = [
        Entry(name=name, path=name, n_tasks=2, success_rate=rate, ci95=(0.1, 0.9), tokens=tokens, judge="j",
              prompt="p", judge_key="k")
        for name, rate, tokens in (("copilot gpt$^$x", 0.5, 100.0), ("$$ run", 0.9, 1000.0))
    ]
    board = build_leaderboard(entries)
    figure = frontier_figure(board)
    assert sorted(text.get_text().replace("\\$", "$") for text in figure.axes[0].texts) == ["$$ run", "copilot gpt$^$x"]
    write_leaderboard(board, tmp_path / "board")
    assert (tmp_path / "board" / "leaderboard.png").read_bytes().startswith(b"\x89PNG")


async def test_small_costs_keep_the_cost_axis_and_a_repeat_short_of_tasks_is_charged_what_it_logged(
    llm: ScriptedOpenAI, tmp_path: Path
) -> None:
    from evaluation.judge.repeats import judge_repeats  # noqa: PLC0415

    # Cost per task was rounded to 3 decimals: $0.0004 read 0.0, and the board fell back to tokens.
    runs = [await judged_run(llm, tmp_path, "cheap", 0.0004, 5), await judged_run(llm, tmp_path, "dear", 0.01234, 10)]
    # A repeated run whose first repeat ran 1 of 3 tasks: its total was the mean x 3 tasks x 2 repeats.
    tasks = write_tasks(tmp_path / "tasks-rep.json", [task_entry(t, f"question {t}") for t in ("r0", "r1", "r2")])
    repeats = []
    for number, ran in enumerate((["r0"], ["r0", "r1", "r2"])):
        repeat = tmp_path / "rep" / f"repeat-{number + 1}"
        repeat.mkdir(parents=True)
        for task in ran:
            write_copilot_log(repeat / f"{task}.jsonl", task, f"question {task}", agent="copilot", model="rep-m",
                              usage=[(1000, 100, 0.01)])
        repeats.append(repeat)
    llm.handler = lambda request: Reply(content="Status: success")
    assert (await judge_repeats(repeats, options(llm, tmp_path, tasks_file=tasks, out_dir=None), tmp_path / "rep")).fatal is None
    out = tmp_path / "board"
    assert main([*(str(run) for run in runs), str(tmp_path / "rep"), "--out", str(out)]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["axis"] == "cost"
    costs = {entry["name"]: (entry["cost"], entry["total_cost"]) for entry in board["entries"]}
    assert costs["copilot cheap"] == (pytest.approx(0.0004), pytest.approx(0.0004 * 20))
    assert costs["copilot rep-m"][1] == pytest.approx(0.04)  # 4 tasks run at $0.01, not 6
    assert "| 0.000400 | 0.00800 |" in (out / "leaderboard.md").read_text()


def test_a_run_at_zero_on_the_log_axis_is_said_to_be_off_the_plot() -> None:
    from evaluation.report.across_runs.leaderboard import Entry, build_leaderboard, frontier_figure  # noqa: PLC0415

    def entry(name: str, tokens: float, rate: float) -> Entry:
        return Entry(name=name, path=name, n_tasks=4, success_rate=rate, ci95=(0.0, 1.0), tokens=tokens,
                     judge="j", prompt="p", judge_key="j/p")

    board = build_leaderboard([entry("zero", 0.0, 1.0), entry("normal", 500.0, 0.5)])
    assert board.axis == "tokens" and board.frontier == ["zero"]
    assert (
        "0 tokens per task logged for zero: in the tables and the frontier, but not on the plot (its axis is "
        "logarithmic, and has no 0)." in board.warnings
    )
    figure = frontier_figure(board)
    assert [text.get_text() for text in figure.axes[0].texts] == ["normal"]


def _entry(name: str, rate: float | None, cost: float | None, tokens: float = 1000.0, tasks: str = "t") -> object:
    from evaluation.report.across_runs.leaderboard import Entry  # noqa: PLC0415

    return Entry(
        name=name, path=name, n_tasks=10, success_rate=rate, ci95=None if rate is None else (rate * 0.8, min(1.0, rate * 1.2)),
        cost=cost, tokens=tokens, judge="j", prompt="p", judge_key="j/p",
        attempts={f"{tasks}{i}": (0, 0) if rate is None else (int(i < rate * 10), 1) for i in range(10)},
        not_judged=10 if rate is None else 0,
    )


def test_a_run_without_a_rate_is_ranked_last() -> None:
    # Before: its sort key, -1.0, tied with a 100% run's and ranked it above every other run.
    from evaluation.report.across_runs.leaderboard import build_leaderboard, tables  # noqa: PLC0415

    board = build_leaderboard([_entry("perfect", 1.0, 0.05), _entry("unjudged", None, 0.02), _entry("half", 0.5, 0.01)])  # type: ignore[list-item]
    assert [(row[0], row[3], row[4]) for row in tables(board)[0].rows] == [
        ("perfect", "100.0%", "80.0%-100.0%"), ("half", "50.0%", "40.0%-60.0%"), ("unjudged", "n/a (not judged)", ""),
    ]


def test_a_run_at_zero_dollars_keeps_the_cost_axis() -> None:
    # Before: a run logging $0 per task (a local model) switched the board to tokens, with the
    # warning that not every run logged cost, and the frontier lost it (it had the most tokens).
    from evaluation.report.across_runs.leaderboard import build_leaderboard, render_markdown  # noqa: PLC0415

    board = build_leaderboard([_entry("local-free", 0.4, 0.0, tokens=5000.0), _entry("paid", 0.6, 0.01, tokens=800.0)])  # type: ignore[list-item]
    assert (board.axis, board.frontier) == ("cost", ["local-free", "paid"])
    assert board.warnings == [
        "0 cost per task logged for local-free: in the tables and the frontier, but not on the plot (its axis is "
        "logarithmic, and has no 0)."
    ]
    assert "- Pareto frontier (cost vs success): local-free -> paid" in render_markdown(board, None)
    # A run with no cost logged at all still moves the board to tokens, and says so.
    board = build_leaderboard([_entry("local-free", 0.4, 0.0), _entry("unpriced", 0.6, None)])  # type: ignore[list-item]
    assert board.axis == "tokens" and any(w.startswith("not every run logged cost") for w in board.warnings)


def test_a_frontier_step_between_runs_with_no_common_task_has_no_difference() -> None:
    # Before: difference 0.0 with the interval [0.0, 0.0] in leaderboard.json for a step not tested.
    from evaluation.report.across_runs.leaderboard import build_leaderboard, tables  # noqa: PLC0415

    board = build_leaderboard([_entry("cheap", 0.4, 0.01, tasks="a"), _entry("dear", 0.6, 0.02, tasks="b")])  # type: ignore[list-item]
    [step] = board.steps
    assert (step.common_tasks, step.difference, step.difference_ci95) == (0, None, None)
    assert tables(board)[1].rows == [["cheap", "dear", "0", "0", "0", "", "", "", "", "", "not tested (no common task)"]]


def test_pass_at_n_of_a_repeated_run_says_when_it_rests_on_fewer_tasks(tmp_path: Path) -> None:
    # pass@2 is over the tasks judged in both repeats, here 1 of 2: "100.0%" alone read as both.
    from evaluation.report.across_runs.leaderboard import build_leaderboard, load_entry, tables  # noqa: PLC0415
    from evaluation.report.across_runs.repeats import build_repeats_report  # noqa: PLC0415
    from evaluation.report.across_runs.repeats_render import write_repeats_reports  # noqa: PLC0415
    from tests.evaluation.report.support import built, record, trajectory  # noqa: PLC0415

    universe = {"t0": "Office", "t1": "Office"}
    runs = [
        built(universe, [trajectory("t0"), trajectory("t1")], [record("t0", "success"), record("t1", "failure")]),
        built(universe, [trajectory("t0"), trajectory("t1")], [record("t0", "success")]),
    ]
    write_repeats_reports(build_repeats_report(runs, ["a", "b"], [Path("a"), Path("b")]), tmp_path / "rep", formats=("json",))
    entry = load_entry(tmp_path / "rep", set())
    assert (entry.n_tasks, entry.tasks_at_n, entry.pass_at_n, entry.pass_hat_n) == (2, 1, 1.0, 1.0)
    [row] = tables(build_leaderboard([entry]))[0].rows
    assert row[5:7] == ["100.0% (over 1 task)", "100.0% (over 1 task)"]


def test_a_step_to_a_repeated_run_is_measured_by_the_pass_at_1_the_table_shows() -> None:
    # Before: each task of a repeated run entered the step as its majority outcome, so a run at
    # 1 of 3 on most tasks became a run that failed them; the step read "-8.3 pt" from a run shown
    # at 33.3% to one shown at 41.7%, with both numbers on the same board.
    from evaluation.report.across_runs.leaderboard import build_leaderboard, tables  # noqa: PLC0415

    single = _entry("single", 1 / 3, 0.01, tasks="t")
    single.attempts = {f"t{i}": (int(i < 8), 1) for i in range(24)}  # type: ignore[attr-defined]
    single.n_tasks = 24  # type: ignore[attr-defined]
    repeated = _entry("repeated", 10 / 24, 0.02, tasks="t")
    repeated.attempts = {f"t{i}": (1, 3) if i < 18 else (3, 3) if i < 22 else (0, 3) for i in range(24)}  # type: ignore[attr-defined]
    repeated.repeats, repeated.n_tasks = 3, 24  # type: ignore[attr-defined]
    repeated.success_rate = (18 / 3 + 4) / 24  # type: ignore[attr-defined]
    board = build_leaderboard([single, repeated])  # type: ignore[list-item]
    [step] = board.steps
    assert step.test == "permutation"
    assert step.difference == pytest.approx(repeated.success_rate - 1 / 3)  # type: ignore[attr-defined]
    low, high = step.difference_ci95
    assert low < step.difference < high
    row = tables(board)[1].rows[0]
    assert row[5] == "+8.3 pt" and row[9] == "permutation"
    assert (step.only_cheaper, step.only_dearer) == (8, 14)  # tasks each run did better on (2 tie at 0)


def test_each_frontier_step_is_one_more_test_and_the_verdict_is_holm_adjusted() -> None:
    from evaluation.report.across_runs.leaderboard import build_leaderboard  # noqa: PLC0415

    def run(name: str, cost: float, solved: int) -> object:
        entry = _entry(name, solved / 40, cost)
        entry.attempts = {f"t{i}": (int(i < solved), 1) for i in range(40)}  # type: ignore[attr-defined]
        entry.n_tasks = 40  # type: ignore[attr-defined]
        return entry

    # Three steps up: 10 -> 17 -> 24 -> 31 of 40, each 7 more tasks (McNemar p = 0.0156 alone).
    board = build_leaderboard([run("a", 0.01, 10), run("b", 0.02, 17), run("c", 0.03, 24), run("d", 0.04, 31)])  # type: ignore[list-item]
    assert [round(step.p_value, 4) for step in board.steps] == [0.0156] * 3
    assert [round(step.p_holm, 4) for step in board.steps] == [0.0469] * 3  # type: ignore[arg-type]
    assert all(step.significant for step in board.steps)
    board = build_leaderboard([run("a", 0.01, 10), run("b", 0.02, 16), run("c", 0.03, 22), run("d", 0.04, 28)])  # type: ignore[list-item]
    # 6 more each: p = 0.031 alone, "significant" three times before; 0.094 adjusted.
    assert all(step.p_value < 0.05 for step in board.steps) and not any(step.significant for step in board.steps)
