"""``python -m index build`` and ``python -m index search``: output, batch order, errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from index_support import make_catalog, make_records

import index.build
import index.settings
from index.cli import main

pytestmark = pytest.mark.timeout(300)

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def catalog_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_catalog().save(tmp_path_factory.mktemp("catalog") / "catalog.json")


@pytest.fixture(scope="module")
def built_home(tmp_path_factory: pytest.TempPathFactory, catalog_file: Path) -> Path:
    home = tmp_path_factory.mktemp("cli-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COPILOT_HOME", str(home))
        assert main(["build", "--catalog", str(catalog_file)]) == 0
    return home


@pytest.fixture
def env_home(built_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COPILOT_HOME", str(built_home))
    monkeypatch.delenv("COPILOT_CHROMA_URL", raising=False)
    return built_home


def test_build_prints_a_summary_and_rebuilds_incrementally(
    tmp_path: Path, catalog_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path))
    assert main(["build", "--catalog", str(catalog_file)]) == 0
    first = capsys.readouterr()
    total = len(make_records())
    assert f"tools: {total} indexed -- {total} added, 0 updated, 0 removed, 0 unchanged" in first.out
    assert "time:" in first.out and "embedding" in first.err  # the progress bar is on stderr

    records = make_records()
    records[0] = records[0].model_copy(update={"description": "Seven-day weather forecast for a city."})
    make_catalog(records[1:] + [records[0]]).save(catalog_file.with_name("changed.json"))
    assert main(["build", "--catalog", str(catalog_file.with_name("changed.json"))]) == 0
    assert f"0 added, 1 updated, 0 removed, {total - 1} unchanged" in capsys.readouterr().out

    make_catalog(records[1:]).save(catalog_file.with_name("smaller.json"))
    assert main(["build", "--catalog", str(catalog_file.with_name("smaller.json"))]) == 0
    assert f"tools: {total - 1} indexed -- 0 added, 0 updated, 1 removed" in capsys.readouterr().out


def test_build_without_the_default_catalog_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "data" / "catalog.json"
    monkeypatch.setattr(index.settings, "DEFAULT_CATALOG", missing)
    monkeypatch.setattr(index.build, "DEFAULT_CATALOG", missing)
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path))
    monkeypatch.delenv("COPILOT_CATALOG", raising=False)
    assert main(["build"]) == 2
    err = capsys.readouterr().err
    assert "does not exist yet" in err and "python -m index crawl" in err and "import-livemcpbench" in err
    assert "Traceback" not in err
    assert main(["build", "--catalog", str(tmp_path / "nope.json")]) == 2
    assert "catalog not found" in capsys.readouterr().err


def test_search_prints_a_table(env_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["search", "convert a word document to pdf", "--top-k", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 of 25 tools" in out and "convert_to_pdf" in out and "word-document-server" in out


def test_search_json_carries_full_hits(env_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "read a file", "--json", "--server", "filesystem", "--top-k", "2"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["query"] == "read a file"
    first = payload["results"][0]
    assert (first["server"], first["tool"], first["required"]) == ("filesystem", "read_file", ["path"])
    assert first["input_schema"]["properties"]["path"] == {"type": "string"}
    assert {r["server"] for r in payload["results"]} == {"filesystem"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "   "], "the query is empty"),
        (["search", "?!?"], "no words to search for"),
        (["search", "weather", "--top-k", "0"], "top_k must be between 1"),
        (["search", "weather", "--server", "wether"], "Did you mean 'weather'"),
        (["search"], "give a QUERY"),
    ],
)
def test_bad_searches_exit_2_with_a_message(
    env_home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and message in captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_batch_keeps_order_and_answers_bad_lines(env_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batch = tmp_path / "queries.jsonl"
    lines = [
        json.dumps({"query": "convert a word document to pdf"}),
        "{not json",
        json.dumps({"q": "missing the query key"}),
        json.dumps({"query": "<tool_assistant>\nserver: map service\ntool: driving directions\n</tool_assistant>"}),
        json.dumps({"query": "   "}),
        "",
        json.dumps({"query": "必应搜索"}),
        json.dumps({"query": 7}),
    ]
    batch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["search", "--batch", str(batch), "--top-k", "2"]) == 1
    captured = capsys.readouterr()
    answers = [json.loads(line) for line in captured.out.splitlines()]
    assert len(answers) == len(lines)
    assert answers[0]["results"][0] == {"server": "word-document-server", "tool": "convert_to_pdf", "score": answers[0]["results"][0]["score"]}
    assert len(answers[0]["results"]) == 2 and set(answers[0]["results"][0]) == {"server", "tool", "score"}
    assert answers[3]["results"][0]["tool"] == "get_directions"
    assert answers[6]["results"][0]["tool"] == "bing_search"
    errored = [i for i, a in enumerate(answers) if "error" in a]
    assert errored == [1, 2, 4, 5, 7]
    assert answers[1]["line"] == 2 and "not valid JSON" in answers[1]["error"]
    assert "query" in answers[2]["error"] and answers[4]["query"] == "   "
    for number in (2, 3, 5, 6, 8):
        assert f"{batch}:{number}: " in captured.err
    assert "Traceback" not in captured.err


def test_clean_batch_exits_0(env_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batch = tmp_path / "ok.jsonl"
    batch.write_text(json.dumps({"query": "time zone"}) + "\n" + json.dumps({"query": "bar chart"}) + "\n", encoding="utf-8")
    assert main(["search", "--batch", str(batch), "--top-k", "1"]) == 0
    answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [a["query"] for a in answers] == ["time zone", "bar chart"]
    assert answers[1]["results"][0]["tool"] == "generate_bar_chart"


def test_batch_file_missing(env_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "--batch", str(tmp_path / "none.jsonl")]) == 2
    assert "batch file not found" in capsys.readouterr().err


def test_search_on_an_unbuilt_index_in_a_real_process(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPILOT_")}
    env["COPILOT_HOME"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "index", "search", "weather"],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: no tool index") and "python -m index build" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
