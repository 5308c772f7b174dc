"""Output for people is never hard-wrapped off a terminal, in every CLI of the project.

Each test runs the real program with stdout/stderr piped and ``COLUMNS=40`` (what a CI log or
``| grep`` sees) and finds a long phrase on one line. The CLIs' other tests (``test_build_cli``,
``test_crawl``, ``tests/server/test_main.py``, ``tests/evaluation/test_run_cli.py``) do the same
for their own messages.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.table import Table

from index.cli.console import UNWRAPPED_WIDTH, HelpFormatter, argv_text, json_ensure_ascii, make_console, prepare_text_io
from tests.evaluation.judge_helpers import task_entry, write_copilot_log, write_tasks
from tests.support.cli import cli_env, line_with, run_cli
from tests.support.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.timeout(180)


def test_a_console_on_a_pipe_does_not_wrap_whatever_columns_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    sink = io.StringIO()
    phrase = "resuming runs/r1: 3 task(s) finished earlier are skipped, 0 to run " * 3
    make_console(file=sink).print(phrase.strip())
    assert sink.getvalue() == phrase.strip() + "\n"
    assert HelpFormatter("prog")._width == UNWRAPPED_WIDTH  # pytest's captured stdout is no terminal


def test_output_survives_a_stream_that_is_not_utf8_and_text_arguments_are_read_as_utf8(monkeypatch: pytest.MonkeyPatch) -> None:
    # A C locale's stdout (ascii, surrogateescape): an ellipsis in --help or a Chinese description
    # stopped whole commands with a UnicodeEncodeError traceback; a query typed in Chinese arrived as
    # lone surrogates (each byte one) and was searched as U+FFFD marks.
    raw = io.BytesIO()
    legacy = io.TextIOWrapper(raw, encoding="ascii", errors="surrogateescape")
    monkeypatch.setattr(sys, "stdout", legacy)
    typed = "天气".encode().decode("ascii", "surrogateescape")
    monkeypatch.setattr(sys, "argv", ["prog", typed, "bad \udcff", "plain"])
    assert json_ensure_ascii(legacy)
    prepare_text_io()
    print("weather … 天气")
    legacy.flush()
    assert raw.getvalue() == b"weather \\u2026 \\u5929\\u6c14\n"
    # argv stays as read (paths must: the file system takes back only that form); text options
    # read themselves as UTF-8, bytes that are not UTF-8 stay as read.
    assert sys.argv == ["prog", typed, "bad \udcff", "plain"]
    assert [argv_text(arg) for arg in sys.argv[1:]] == ["天气", "bad \udcff", "plain"]
    utf8 = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", utf8)
    prepare_text_io()
    assert utf8.errors == "strict" and not json_ensure_ascii(utf8)


def test_a_table_on_a_stream_that_is_not_utf8_lines_up() -> None:
    """Escaped only by the stream, a Chinese cell took one column per character in the table's widths
    and six on the line: every row after it was out of line (``index search``, ``server status``)."""
    raw = io.BytesIO()
    legacy = io.TextIOWrapper(raw, encoding="ascii", errors="backslashreplace")
    table = Table(title="tools")
    for column in ("server", "description"):
        table.add_column(column)
    table.add_row("Bazi", "获取黄历信息 (calendar)")
    table.add_row("time", "Get the current time")
    make_console(file=legacy).print(table)
    legacy.flush()
    lines = raw.getvalue().decode("ascii").splitlines()[1:]
    assert "\\u83b7\\u53d6" in lines[3], lines
    assert len({len(line) for line in lines}) == 1, "\n".join(lines)


def test_help_survives_a_locale_that_is_not_utf8() -> None:
    legacy = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": "ascii"}
    result = run_cli("evaluation.run", "--help", env=cli_env(**legacy))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "\\u2026" in result.stdout  # the ellipsis, escaped


@pytest.mark.parametrize(
    ("module", "first", "last"),
    [
        (["server"], "usage: python -m server [-h]", "[--no-auto-index] [-v]"),
        (["index", "crawl"], "usage: python -m index crawl [-h]", "[--log-dir LOG_DIR]"),
        (["evaluation.run"], "usage: python -m evaluation.run [-h]", "[--judge-no-progress] [-v]"),
        (["evaluation.judge"], "usage: python -m evaluation.judge [-h]", "paths [paths ...]"),
        (["evaluation.compare"], "usage: python -m evaluation.compare [-h]", "run_a run_b"),
        (["bench.pool"], "usage: python -m bench.pool [-h]", "[--no-real]"),
    ],
)
def test_help_is_not_wrapped_in_a_pipe(module: list[str], first: str, last: str) -> None:
    result = run_cli(*module, "--help", env=cli_env())
    assert result.returncode == 0, result.stderr
    usage = result.stdout.splitlines()[0]
    assert usage.startswith(first) and usage.endswith(last), result.stdout  # the whole usage on one line


def test_judge_compare_and_bench_print_unwrapped_lines(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.json", [task_entry(f"t{i}", f"question t{i}") for i in range(4)])
    judged = []
    with ScriptedOpenAI() as llm:
        for name, wins in (("a", {"t0", "t1", "t2"}), ("b", {"t0"})):
            logs = tmp_path / name
            logs.mkdir()
            for i in range(4):
                write_copilot_log(logs / f"t{i}.jsonl", f"t{i}", f"question t{i}")
            llm.handler = lambda request, wins=wins: Reply(
                content="Status: success" if any(f"question {t}" in str(request) for t in wins) else "Status: failure"
            )
            result = run_cli(
                "evaluation.judge", str(logs), "--tasks", str(tasks), "--base-url", llm.base_url, "--api-key", "x",
                "--model", "judge-a", "--cache-dir", str(tmp_path / f"cache-{name}"), "--no-progress",
                env=cli_env(COPILOT_HOME=str(tmp_path / "home")),
            )
            assert result.returncode == 0, result.stderr
            rate = "3/4 tasks succeeded: 75.0%" if name == "a" else "1/4 tasks succeeded: 25.0%"
            summary = line_with(result.stderr, "0 abstain, 0 without trajectory (counted as failures)")
            assert summary.startswith(f"{rate} (95% CI"), summary
            judged.append(logs / "judge")

    compared = run_cli("evaluation.compare", *map(str, judged), env=cli_env())
    assert compared.returncode == 0, compared.stderr
    line_with(compared.stdout, f"A = {judged[0]}: 3/4 = 75.0% (95% CI")
    line_with(compared.stdout, "The difference is within noise: 2 tasks solved only by")

    bench = run_cli("bench", "judge", "--", "--tasks", "3", "--delay", "0", "--concurrency", "2", env=cli_env())
    assert "Traceback" not in bench.stderr, bench.stderr
    [speedup] = [line for line in bench.stdout.splitlines() if line.startswith("concurrency  2:")]
    # One line however narrow the terminal would be (the target scaled to 2-way parallelism).
    assert speedup.endswith("x faster (target >= 1.25x: 10x at 16 in parallel, scaled)"), bench.stdout


def test_every_text_option_of_the_copilot_judge_and_runner_is_read_as_utf8() -> None:
    # argv is no longer rewritten wholesale (paths must stay as read): each text option reads itself.
    # The judge's --model (and the runner's --judge-model) were left as read; the copilot's --allow too.
    from evaluation.judge.cli import build_parser as judge_parser  # noqa: PLC0415
    from evaluation.run.cli import build_parser as run_parser  # noqa: PLC0415
    from server.__main__ import build_parser as server_parser  # noqa: PLC0415

    typed = "modèle".encode().decode("ascii", "surrogateescape")
    assert judge_parser().parse_args(["logs", "--model", typed]).model == "modèle"
    run = run_parser().parse_args(["--tasks", "t", "--out", "o", "--model", typed, "--judge-model", typed])
    assert (run.model, run.judge_model) == ("modèle", "modèle")
    served = server_parser().parse_args(["--allow", typed, "--deny", typed, "--question", typed])
    assert (served.allow, served.deny, served.question) == (["modèle"], ["modèle"], "modèle")
