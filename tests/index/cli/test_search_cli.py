"""``python -m index build`` and ``python -m index search``: output, batch order, errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.index.index_support import make_catalog, make_records

import index.storage.build
import index.settings
from index.cli.args import main
from index.catalog.records import ToolRecord
from tests.support.cli import cli_env

pytestmark = pytest.mark.timeout(300)

PROJECT = Path(__file__).resolve().parents[3]


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
    monkeypatch.setattr(index.storage.build, "DEFAULT_CATALOG", missing)
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


def test_search_table_shows_input_links(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def tool(name: str, description: str, *required: str) -> ToolRecord:
        schema = {"type": "object", "properties": {p: {"type": "string"} for p in required}, "required": list(required)}
        return ToolRecord(server="maps", name=name, description=description, input_schema=schema)

    records = [
        tool("geocode_address", "Convert a street address to coordinates: latitude and longitude.", "address"),
        tool("find_parking", "Find parking lots and garages near a point on the map.", "latitude", "longitude"),
    ]
    catalog = make_catalog(records).save(tmp_path / "catalog.json")
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["build", "--catalog", str(catalog)]) == 0
    capsys.readouterr()
    assert main(["search", "find a parking garage", "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "[inputs from: geocode_address (latitude)] Find parking lots" in out
    assert "[call it first for: find_parking (latitude)] Convert a street address" in out


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
        (["search", "weather", "--top-k", "0"], "--top-k must be between 1 and 100, not 0"),
        (["search", "weather", "--top-k", "101"], "--top-k must be between 1 and 100, not 101"),
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
    assert errored == [1, 2, 4, 7]
    assert answers[5] == {"query": None, "line": 6, "skipped": "blank line"}  # answered, not an error
    assert answers[1]["line"] == 2 and "not valid JSON" in answers[1]["error"]
    assert "query" in answers[2]["error"] and answers[4]["query"] == "   "
    for number in (2, 3, 5, 8):
        assert f"{batch}:{number}: " in captured.err
    assert f"{batch}:6: " not in captured.err
    assert "Traceback" not in captured.err


def test_clean_batch_exits_0(env_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batch = tmp_path / "ok.jsonl"
    # A key other than "query" was ignored without a word: a per-line top_k read as if obeyed.
    lines = [{"query": "time zone", "top_k": 5}, {"query": "bar chart", "top_k": 5, "server": "x"}]
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert main(["search", "--batch", str(batch), "--top-k", "1"]) == 0
    captured = capsys.readouterr()
    answers = [json.loads(line) for line in captured.out.splitlines()]
    assert [a["query"] for a in answers] == ["time zone", "bar chart"]
    assert answers[1]["results"][0]["tool"] == "generate_bar_chart" and len(answers[0]["results"]) == 1
    said = "is not read: a line gives only \"query\" (--top-k and --server apply to every line)"
    assert captured.err.splitlines() == [f"{batch}:1: 'top_k' {said}", f"{batch}:2: 'server' {said}"]


def test_batch_with_an_unknown_server_is_one_error(env_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batch = tmp_path / "ok.jsonl"
    batch.write_text(json.dumps({"query": "time zone"}) + "\n" + json.dumps({"query": "bar chart"}) + "\n", encoding="utf-8")
    assert main(["search", "--batch", str(batch), "--server", "word-document-servr"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("error: ") == 1 and "Did you mean 'word-document-server'?" in captured.err


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


# Tool names and descriptions come from child servers; a hostile or merely unlucky one must not be able
# to break the table (rich markup), hide text (markup-like brackets) or drive the terminal (ESC, NUL...).
HOSTILE = [
    ToolRecord(
        server="weather",
        name="parse_headers",
        description="Parse HTTP headers into a Dict[str, str]; files are [type='file'] entries. Ends a [/red] tag.",
        input_schema={"type": "object", "properties": {"raw[0]": {"type": "string"}}, "required": ["raw[0]"]},
    ),
    ToolRecord(
        server="weather",
        name="ring_bell\x1b]0;pwned\x07\x1b[2J",
        description="Ring the terminal bell and clear\x1b[2J the screen\x00 with\x9b31m a fake\rline.",
    ),
]


@pytest.fixture(scope="module")
def hostile_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("hostile-home")
    catalog = make_catalog(make_records() + HOSTILE).save(home / "catalog.json")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COPILOT_HOME", str(home))
        assert main(["build", "--catalog", str(catalog)]) == 0
    return home


def test_the_table_shows_markup_like_text_as_written(
    hostile_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(hostile_home))
    capsys.readouterr()
    assert main(["search", "parse HTTP headers into a dict [/red]", "--top-k", "3"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "parse_headers" in line)
    assert "Parse HTTP headers into a Dict[str, str]; files are [type='file'] entries. Ends a [/red] tag." in row
    assert "raw[0]" in row
    assert "'parse HTTP headers into a dict [/red]'" in out  # the query in the title too


def test_the_table_shows_control_characters_visibly(
    hostile_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(hostile_home))
    capsys.readouterr()
    assert main(["search", "ring the terminal bell and clear the screen", "--top-k", "3", "--server", "weather"]) == 0
    out = capsys.readouterr().out
    assert not any(char in out for char in "\x1b\x07\x00\x9b\r"), repr(out)
    row = next(line for line in out.splitlines() if "ring_bell" in line)
    assert r"ring_bell\x1b]0;pwned\x07\x1b[2J" in row
    # Line breaks in a description are layout (it is shown on one line); the other controls are shown.
    assert r"clear\x1b[2J the screen\x00 with\x9b31m a fake line." in row


def test_top_level_help_is_written_for_users(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "Argument parsing" not in out and "``" not in out
    assert "Find the right MCP tool for a task" in out and "python -m index search" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--concurrency", "0"], "error: --concurrency must be at least 1 (got 0)."),
        (["--timeout", "0"], "error: --timeout must be a positive number of seconds (got 0.0)."),
    ],
)
def test_crawl_errors_name_the_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path))
    assert main(["crawl", "--out", str(tmp_path / "catalog.json"), *flags]) == 2
    assert capsys.readouterr().err.strip() == message
    assert not (tmp_path / "catalog.json").exists()


def _search_process(home: Path, *args: str, stdin: int | None, stdout: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "index", "search", *args],
        cwd=PROJECT, env=cli_env(COPILOT_HOME=str(home)), stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True,
    )


def test_batch_output_to_a_reader_that_stops_after_one_line(env_home: Path) -> None:
    """``... --batch - | head -1``: the reader goes away between two answers; no traceback, exit 1."""
    process = _search_process(env_home, "--batch", "-", "--top-k", "1", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    process.stdin.write(json.dumps({"query": "time zone"}) + "\n")
    process.stdin.flush()
    first = json.loads(process.stdout.readline())
    assert first["query"] == "time zone"
    process.stdout.close()  # like head -1 exiting; the next answer meets a closed pipe
    process.stdin.write(json.dumps({"query": "bar chart"}) + "\n")
    process.stdin.close()
    err = process.stderr.read()
    assert process.wait(timeout=120) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


@pytest.mark.parametrize("output", [["--json"], []], ids=["json", "table"])
def test_search_output_to_a_closed_pipe(env_home: Path, output: list[str]) -> None:
    """The reader is gone before the answer is written (``... | head -0``): no traceback, exit 1."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = _search_process(env_home, "weather forecast", *output, stdin=subprocess.DEVNULL, stdout=write_end)
    finally:
        os.close(write_end)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


def test_an_empty_index_says_so_and_how_to_fill_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from index.catalog.records import Catalog  # noqa: PLC0415

    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COPILOT_CHROMA_URL", raising=False)
    empty = Catalog(tools=[]).save(tmp_path / "empty.json")
    assert main(["build", "--catalog", str(empty)]) == 0
    capsys.readouterr()
    assert main(["search", "convert a document to pdf"]) == 0
    err = capsys.readouterr().err
    assert "holds no tools: build it from a catalog with" in err and "-m index build" in err


def test_a_query_that_is_not_utf8_is_searched_not_a_traceback(env_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # $'time zone \xff' on the command line: the byte arrives as the lone surrogate \udcff.
    assert main(["search", "time zone \udcff", "--json", "--top-k", "1"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["query"] == "time zone \ufffd" and answer["results"][0]["tool"] == "convert_time"


def test_batch_answers_every_line_whatever_its_encoding(env_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batch = tmp_path / "queries.jsonl"
    batch.write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"query": "time zone"}).encode()  # a byte order mark, as Notepad writes
        + b'\n{"query": "\\ud800"}'  # valid JSON, but a lone surrogate: no text to search
        + b'\n{"query": "bar \xff chart"}'  # not UTF-8
        + b'\n{"query": "bar chart \\udc00"}\n'
    )
    assert main(["search", "--batch", str(batch), "--top-k", "1"]) == 1
    captured = capsys.readouterr()
    answers = [json.loads(line) for line in captured.out.splitlines()]
    assert [answer.get("line") for answer in answers] == [None, 2, 3, None]
    assert answers[0]["results"][0]["tool"] == "convert_time"
    assert answers[1]["query"] == "\ufffd" and "no words to search for" in answers[1]["error"]
    assert answers[2] == {"query": None, "line": 3, "error": answers[2]["error"]}
    assert "not UTF-8 text (byte 0xff at column 16)" in answers[2]["error"]
    assert answers[3]["query"] == "bar chart \ufffd" and answers[3]["results"][0]["tool"] == "generate_bar_chart"
    assert f"{batch}:2: " in captured.err and f"{batch}:3: not UTF-8" in captured.err and "Traceback" not in captured.err


def test_search_under_a_locale_that_is_not_utf8_reads_the_query_and_writes_valid_json(env_home: Path, tmp_path: Path) -> None:
    # LC_ALL=C with PYTHONUTF8=0: stdout is ASCII, and the query's bytes arrive as lone surrogates.
    # The query was searched as U+FFFD marks, and --json and --batch stopped with a traceback.
    legacy = cli_env(COPILOT_HOME=str(env_home), LC_ALL="C", PYTHONUTF8="0", PYTHONIOENCODING="ascii")
    asked = "天气 time zone"
    one = subprocess.run(
        [sys.executable, "-m", "index", "search", asked, "--json", "--top-k", "1"],
        cwd=PROJECT, env=legacy, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )
    assert one.returncode == 0 and "Traceback" not in one.stderr, one.stderr
    answer = json.loads(one.stdout)
    assert answer["query"] == asked and answer["results"][0]["tool"] == "convert_time"
    # A non-ASCII file name: read as UTF-8 text (as the query is) it could not be opened any more.
    batch = tmp_path / "queries-é.jsonl"
    batch.write_text("".join(json.dumps({"query": query}) + "\n" for query in (asked, "bar chart")), encoding="utf-8")
    many = subprocess.run(
        [sys.executable, "-m", "index", "search", "--batch", str(batch), "--top-k", "1"],
        cwd=PROJECT, env=legacy, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )
    assert many.returncode == 0 and "Traceback" not in many.stderr, many.stderr
    answers = [json.loads(line) for line in many.stdout.splitlines()]
    assert [a["query"] for a in answers] == [asked, "bar chart"] and answers[1]["results"][0]["tool"] == "generate_bar_chart"
