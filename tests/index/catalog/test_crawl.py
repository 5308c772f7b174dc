"""``python -m index crawl`` and ``crawl_servers`` against real fixture MCP servers in subprocesses."""

from __future__ import annotations

import io
import json
import re
import os
from collections import Counter
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from index.children.listing_limits import LISTING_CUT, MAX_DEFINITION_CHARS, MAX_TOOLS
from index.cli.args import main as index_main
from index.catalog.crawl import CrawlReport, crawl_server, crawl_servers, log_file_name, print_summary, scrub_machine_paths
from index.cli.console import make_console
from index.catalog.records import Catalog, CatalogServer, ToolRecord, load_catalog
from index.catalog.servers import ServerConfig, parse_servers
from index.search.tool_index import ToolIndex
from index.settings import CopilotSettings
from index.storage.build import build_index
from tests.fixtures.hostile.hostile_server import HUGE_NAME, TOOLS as HOSTILE_TOOLS
from tests.support.processes import hostile_entry

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "fixture_server.py"
CHANGING_SERVER = FIXTURE.parent / "hostile" / "changing_server.py"
SCHEMA_BREAKER = Path(__file__).resolve().parents[2] / "fixtures" / "hostile" / "schema_breaking_server.py"
PROJECT_DIR = Path(__file__).resolve().parents[3]
FIXTURE_TOOLS = {
    "echo", "add", "counter", "sleep", "crash", "huge", "get_env", "write_file", "delete_item", "structured", "fail",
}
SECRET = "sk-test-do-not-leak-0123456789"

pytestmark = pytest.mark.timeout(90)


def fixture_entry(name: str, mode: str = "healthy", *extra_args: str, **keys: Any) -> dict[str, Any]:
    args = [str(FIXTURE), "--name", name, "--mode", mode, *extra_args]
    return {"command": sys.executable, "args": args, "description": f"fixture server {name}", "category": "Test", **keys}


def write_servers(path: Path, entries: dict[str, dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"mcpServers": entries}, indent=2), encoding="utf-8")
    return path


# --- one crawl of a mixed pool through the CLI, in a subprocess (shared by several tests) -----------


class MixedCrawl:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.env_dump = root / "healthy-env.json"
        self.servers = write_servers(
            root / "servers.json",
            {
                "healthy": fixture_entry("healthy", "healthy", "--dump-env", str(root / "healthy-env.json")),
                "crashy": fixture_entry("crashy", "crash-at-start"),
                "hangs": fixture_entry("hangs", "hang-at-start", timeout=3),
                "noisy": fixture_entry("noisy", "junk-stdout"),
                "paged": fixture_entry("paged", "paginated"),
                "off": fixture_entry("off", enabled=False, reason="switched off for the test"),
                # A Claude Desktop config also holds the copilot's own entry: seen in the file...
                "copilot": {"command": sys.executable, "args": ["-m", "server"]},
                # ...or, behind a wrapper, only at the handshake (it answers as 'mcp-copilot').
                "wrapped-copilot": {
                    "command": "/bin/sh",
                    "args": ["-c", 'exec "$0" -m server', sys.executable],
                    "env": {"COPILOT_HOME": str(root / "nested-home"), "COPILOT_AUTO_INDEX": "false",
                            "COPILOT_WARM_INDEX": "false"},
                },
            },
        )
        self.out = root / "catalog.json"
        self.logs = root / "logs"
        env = {**os.environ, "OPENAI_API_KEY": SECRET, "COPILOT_HOME": str(root / "home"), "COLUMNS": "40"}
        self.result = subprocess.run(
            [sys.executable, "-m", "index", "crawl", "--servers", str(self.servers), "--out", str(self.out),
             "--log-dir", str(self.logs), "--concurrency", "2", "--timeout", "60"],
            cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=80,
        )
        self.stderr = self.result.stderr

    def catalog(self) -> Catalog:
        return load_catalog(self.out)

    def tools_of(self, server: str) -> dict[str, ToolRecord]:
        return {record.name: record for record in self.catalog().tools if record.server == server}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> MixedCrawl:
    return MixedCrawl(tmp_path_factory.mktemp("mixed-crawl"))


def test_crawl_succeeds_when_some_servers_fail(mixed: MixedCrawl) -> None:
    assert mixed.result.returncode == 0, mixed.stderr
    assert "Traceback" not in mixed.stderr
    assert mixed.result.stdout == ""  # everything for people goes to stderr
    assert "crawled 3 of 5 server(s)" in mixed.stderr


def test_healthy_server_tools_land_in_the_catalog_with_schemas_and_annotations(mixed: MixedCrawl) -> None:
    tools = mixed.tools_of("healthy")
    assert set(tools) >= FIXTURE_TOOLS
    add = tools["add"]
    assert add.description == "Add two integers and return the sum."
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    assert add.required == ["a", "b"]
    assert add.server_description == "fixture server healthy" and add.category == "Test"
    assert tools["delete_item"].annotations == {"destructiveHint": True, "readOnlyHint": False}
    assert tools["echo"].annotations is None
    assert add.output_schema is not None and add.output_schema["properties"]["result"]["type"] == "integer"
    info = mixed.catalog().servers["healthy"]
    assert info.tool_count == len(tools) and info.category == "Test" and info.launch_hash


def test_start_times_are_measured_recorded_and_summarized(mixed: MixedCrawl) -> None:
    servers = mixed.catalog().servers
    assert set(servers) == {"healthy", "noisy", "paged"}
    for name, info in servers.items():
        # Launch to initialize answered: a Python fixture takes a fraction of a second to seconds.
        assert info.start_seconds is not None and 0 < info.start_seconds < 60, (name, info)
    assert re.search(r"start times \(launch to initialize\): median [0-9.]+ s, slowest [0-9.]+ s", mixed.stderr)
    assert re.search(r"ok +healthy: \d+ tools \(started in [0-9.]+ s, [0-9.]+ s in all\)", mixed.stderr)


def test_crash_at_start_is_reported_with_exit_code_and_stderr(mixed: MixedCrawl) -> None:
    row = _summary_row(mixed.stderr, "crashy")
    assert "crashed" in row and "exit code 3" in row
    assert "fatal: fixture configured to crash at start" in row
    assert "crashy" not in mixed.catalog().servers


def test_hang_is_cut_by_the_servers_own_timeout(mixed: MixedCrawl) -> None:
    row = _summary_row(mixed.stderr, "hangs")
    assert "timed out" in row and "within 3 s" in row  # its own timeout (3 s) beat --timeout 60
    assert "hangs" not in mixed.catalog().servers


def test_junk_on_stdout_is_tolerated_and_noted(mixed: MixedCrawl) -> None:
    assert set(mixed.tools_of("noisy")) >= FIXTURE_TOOLS
    assert "noisy: printed 1 non-protocol line(s) on stdout" in mixed.stderr
    assert "not JSON-RPC" in (mixed.logs / "noisy.log").read_text(encoding="utf-8")


def test_paginated_tools_list_is_followed_to_the_end(mixed: MixedCrawl) -> None:
    assert set(mixed.tools_of("paged")) == set(mixed.tools_of("healthy"))


def test_disabled_servers_are_skipped_and_named(mixed: MixedCrawl) -> None:
    assert "skipped 1 disabled server(s): off" in mixed.stderr
    assert not (mixed.logs / "off.log").exists()


def test_entries_that_are_the_copilot_itself_are_skipped_with_one_line_each(mixed: MixedCrawl) -> None:
    lines = mixed.stderr.splitlines()
    [static] = [line for line in lines if "copilot'" in line and "skipping" in line]
    assert static.startswith(f"WARNING index.catalog.servers: {mixed.servers}:")
    assert f"skipping server 'copilot': it is this copilot ({sys.executable} -m server)" in static
    [handshake] = [line for line in lines if line.startswith("skipped wrapped-copilot:")]
    assert "is this copilot (it answered initialize as 'mcp-copilot')" in handshake
    assert "skipped 1 entry(ies) that are the copilot itself: wrapped-copilot" in mixed.stderr
    assert not {"copilot", "wrapped-copilot"} & set(mixed.catalog().servers)
    assert not any(line.startswith("│ wrapped-copilot ") for line in lines)  # not in the failures table


def test_child_stderr_lands_in_its_log_file(mixed: MixedCrawl) -> None:
    assert "fatal: fixture configured to crash at start" in (mixed.logs / "crashy.log").read_text(encoding="utf-8")
    # Whether the hanging child got to print before its 3 s ran out depends on the machine's load;
    # that its session was ended and recorded does not.
    assert "session closed" in (mixed.logs / "hangs.log").read_text(encoding="utf-8")


def test_child_gets_clean_environment_and_own_temp_dir(mixed: MixedCrawl) -> None:
    dumped = json.loads(mixed.env_dump.read_text(encoding="utf-8"))
    env, cwd = dumped["env"], Path(dumped["cwd"])
    assert "OPENAI_API_KEY" not in env and "COPILOT_HOME" not in env
    assert SECRET not in json.dumps(env)
    assert Path(env["TMPDIR"]) == cwd / "tmp"
    assert cwd.name == "healthy"
    assert not cwd.exists(), "the crawl's temporary work dirs are removed afterwards"


def test_catalog_holds_no_paths_of_the_crawl(mixed: MixedCrawl) -> None:
    text = mixed.out.read_text(encoding="utf-8")
    assert str(mixed.root) not in text
    assert SECRET not in text


def _summary_row(stderr: str, server: str) -> str:
    """The summary-table row (all its wrapped lines) of ``server``."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("│ " + server + " "))
    row = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("│ " + " " * len(server)):
            break
        row.append(line)
    return " ".join(" ".join(part.split()) for part in row)


# --- CLI behaviour in-process ---------------------------------------------------------------------


def _run_cli(*args: str) -> int:
    return index_main(["crawl", *args])


def test_only_replaces_just_the_named_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    servers = write_servers(
        tmp_path / "servers.json",
        {"alpha": fixture_entry("alpha"), "beta": fixture_entry("beta", "crash-at-start"), "gamma": fixture_entry("gamma")},
    )
    old = Catalog(
        source="earlier",
        servers={name: CatalogServer(description=f"old {name}", tool_count=1) for name in ("alpha", "beta", "gamma")},
        tools=[ToolRecord(server=name, name="old_tool", description=f"old {name}") for name in ("alpha", "beta", "gamma")],
    )
    out = old.save(tmp_path / "catalog.json")
    code = _run_cli("--servers", str(servers), "--only", "alpha", "beta", "--out", str(out),
                    "--log-dir", str(tmp_path / "logs"), "--timeout", "30")
    assert code == 0
    merged = load_catalog(out)
    by_server: dict[str, set[str]] = {}
    for record in merged.tools:
        by_server.setdefault(record.server, set()).add(record.name)
    assert by_server["alpha"] >= FIXTURE_TOOLS and "old_tool" not in by_server["alpha"]  # re-crawled
    assert by_server["beta"] == {"old_tool"}  # failed now: its earlier records are kept
    assert by_server["gamma"] == {"old_tool"}  # not named: untouched
    assert list(merged.servers) == ["alpha", "beta", "gamma"]
    assert merged.servers["alpha"].description == "fixture server alpha"
    # The summary says why each kept server was kept: gamma was not named, which is no failure.
    err = capsys.readouterr().err
    assert "kept the earlier records of 1 server(s) whose crawl failed now: beta\n" in err
    assert "kept the records of 1 other server(s) as they were (not named by --only)" in err


def test_an_installed_packages_first_crawl_builds_on_the_bundled_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Installed (no checkout), a crawl writes COPILOT_HOME/catalog.json, which replaces the bundled
    # snapshot from then on: its first `--only alpha` left a catalog of alpha alone.
    import index.settings as settings_module  # noqa: PLC0415

    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COPILOT_CATALOG", raising=False)
    monkeypatch.setattr(settings_module, "PROJECT_DIR", tmp_path / "site-packages")
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha"), "gamma": fixture_entry("gamma")})
    bundled = Catalog(
        source="bundled",
        servers={name: CatalogServer(description=f"old {name}", tool_count=1) for name in ("alpha", "gamma")},
        tools=[ToolRecord(server=name, name="old_tool") for name in ("alpha", "gamma")],
    ).save(tmp_path / "bundled.json")
    monkeypatch.setattr(settings_module, "DEFAULT_CATALOG", bundled)
    before = bundled.read_bytes()
    code = _run_cli("--servers", str(servers), "--only", "alpha", "--log-dir", str(tmp_path / "logs"), "--timeout", "30")
    assert code == 0
    own = load_catalog(tmp_path / "home" / "catalog.json")
    assert {r.name for r in own.tools if r.server == "alpha"} >= FIXTURE_TOOLS
    assert [r.name for r in own.tools if r.server == "gamma"] == ["old_tool"]  # the bundled record, kept
    assert bundled.read_bytes() == before  # the installed snapshot is never written


def test_a_full_crawl_keeps_the_earlier_records_of_a_server_failing_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    servers = write_servers(
        tmp_path / "servers.json", {"beta": fixture_entry("beta", "crash-at-start"), "alpha": fixture_entry("alpha")}
    )
    old = Catalog(
        source="earlier",
        servers={name: CatalogServer(description=f"old {name}", tool_count=1) for name in ("gone", "alpha", "beta")},
        tools=[ToolRecord(server=name, name="old_tool") for name in ("gone", "alpha", "beta")],
    )
    out = old.save(tmp_path / "catalog.json")
    code = _run_cli("--servers", str(servers), "--out", str(out), "--log-dir", str(tmp_path / "logs"), "--timeout", "30")
    assert code == 0
    assert "kept the earlier records of 1 server(s) whose crawl failed now: beta" in capsys.readouterr().err
    crawled = load_catalog(out)
    assert list(crawled.servers) == ["beta", "alpha"]  # the server list's order; "gone" left the list
    assert [r.name for r in crawled.tools if r.server == "beta"] == ["old_tool"]
    assert {r.name for r in crawled.tools if r.server == "alpha"} >= FIXTURE_TOOLS


def test_unknown_only_name_suggests_the_nearest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = write_servers(tmp_path / "servers.json", {"word-document-server": fixture_entry("w")})
    code = _run_cli("--servers", str(servers), "--only", "word-documents", "--out", str(tmp_path / "c.json"))
    err = capsys.readouterr().err
    assert code == 2
    assert "error: 'word-documents' is not in" in err and "Did you mean: word-document-server?" in err
    assert "Traceback" not in err
    assert not (tmp_path / "c.json").exists()


def test_nothing_crawled_exits_non_zero_and_keeps_the_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    servers = write_servers(tmp_path / "servers.json", {"broken": fixture_entry("broken", "crash-at-start")})
    out = Catalog(tools=[ToolRecord(server="x", name="kept")]).save(tmp_path / "catalog.json")
    before = out.read_text(encoding="utf-8")
    code = _run_cli("--servers", str(servers), "--out", str(out), "--log-dir", str(tmp_path / "logs"))
    err = capsys.readouterr().err
    assert code == 1
    assert "no server could be crawled" in err and "left unchanged" in err
    assert "Traceback" not in err
    assert out.read_text(encoding="utf-8") == before


def test_invalid_server_list_is_an_error_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text('{"mcpServers": {"a": {"args": []}}}', encoding="utf-8")
    code = _run_cli("--servers", str(servers), "--out", str(tmp_path / "c.json"))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and "server 'a'" in err and "Traceback" not in err


def test_broken_catalog_to_merge_into_is_not_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")})
    out = tmp_path / "catalog.json"
    out.write_text("{ not json", encoding="utf-8")
    code = _run_cli("--servers", str(servers), "--only", "alpha", "--out", str(out))
    assert code == 2
    assert "catalog is not valid JSON" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "{ not json"


def test_only_naming_a_disabled_server_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = write_servers(tmp_path / "servers.json", {"off": fixture_entry("off", enabled=False, reason="npm 404")})
    code = _run_cli("--servers", str(servers), "--only", "off", "--out", str(tmp_path / "c.json"))
    assert code == 1
    assert "off: npm 404" in capsys.readouterr().err


# --- library ---------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _wait_for_port(port: int, server: subprocess.Popen[bytes]) -> None:
    while True:
        try:
            stream = await anyio.connect_tcp("127.0.0.1", port)
        except OSError:
            assert server.poll() is None, "the HTTP fixture server exited"
            await anyio.sleep(0.05)  # polling a condition (the port accepting), not waiting for time to pass
            continue
        await stream.aclose()
        return


async def test_remote_server_is_crawled_over_streamable_http(tmp_path: Path) -> None:
    """Tools, and a second server's prompts, resources and templates (each list read raw, as the
    session would ask it over HTTP)."""
    port, notes_port = _free_port(), _free_port()
    server = subprocess.Popen(
        [sys.executable, str(FIXTURE), "--name", "remote", "--transport", "streamable-http", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    notes = subprocess.Popen(
        [sys.executable, str(CHANGING_SERVER), "--name", "notes", "--transport", "streamable-http", "--port", str(notes_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(45):
            await _wait_for_port(port, server)
            await _wait_for_port(notes_port, notes)
            servers = parse_servers(json.dumps({"mcpServers": {
                "remote": {"url": f"http://127.0.0.1:{port}/mcp", "category": "Test"},
                "notes": {"url": f"http://127.0.0.1:{notes_port}/mcp"},
                "gone": {"url": f"http://127.0.0.1:{_free_port()}/mcp"},
            }})).servers
            report = await crawl_servers(servers, timeout=20, log_dir=tmp_path / "logs", progress=False)
    finally:
        for process in (server, notes):
            process.terminate()
            process.wait(10)
    assert report.succeeded == ["remote", "notes"]
    assert {record.name for record in report.records if record.server == "remote"} >= FIXTURE_TOOLS
    assert report.servers["remote"].category == "Test"
    assert sorted((r.kind, r.name) for r in report.records if r.server == "notes" and r.kind != "tool") == [
        ("prompt", "greeting"), ("prompt", "review_code"),
        ("resource", "logo"), ("resource", "readme"), ("resource_template", "item"),
    ]
    assert report.outcomes["notes"].warnings == []
    gone = report.outcomes["gone"]
    assert gone.kind == "HTTP error" and "cannot reach" in gone.reason


async def test_report_outcomes_follow_the_server_list_order(tmp_path: Path) -> None:
    names = ["zeta", "alpha", "mid"]
    servers = {name: ServerConfig.model_validate({**fixture_entry(name), "name": name}) for name in names}
    results: list[str] = []
    with anyio.fail_after(60):
        report = await crawl_servers(
            servers, concurrency=3, timeout=30, log_dir=tmp_path / "logs", workdir_root=tmp_path / "work",
            progress=False, on_result=lambda outcome: results.append(outcome.server),
        )
    assert isinstance(report, CrawlReport)
    assert list(report.outcomes) == names and sorted(results) == sorted(names)
    assert [record.server for record in report.records] == [n for n in names for _ in range(len(report.records) // 3)]
    assert (tmp_path / "work" / "alpha" / "tmp").is_dir()


async def test_a_child_flooding_stderr_during_its_crawl_keeps_its_log_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import index.catalog.crawl as crawl_module  # noqa: PLC0415
    from index.children.stream_limits import MAX_STDERR_LOG_BYTES  # noqa: PLC0415

    monkeypatch.setattr(crawl_module, "LOG_CHECK_INTERVAL", 0.01)
    servers = {"noisy": ServerConfig.model_validate({**fixture_entry("noisy", "flood-stderr-at-start"), "name": "noisy"})}
    with anyio.fail_after(120):
        # The child exits once it sees its log rotated (or after 60 s): the crawl ends on that, not on a timer.
        report = await crawl_servers(servers, timeout=90, log_dir=tmp_path / "logs", progress=False)
    assert not report.outcomes["noisy"].ok  # it never answers initialize
    log = tmp_path / "logs" / log_file_name("noisy")
    assert log.stat().st_size < MAX_STDERR_LOG_BYTES  # 12 MB were written to it
    backup = log.with_name(log.name + ".1")
    assert backup.stat().st_size == MAX_STDERR_LOG_BYTES
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "log rotated at" in text  # the last rotation's note follows its truncation
    # The child's last line is in the log, or in the backup when the copilot rotated again after
    # the child wrote it (a rotation mid-flood leaves more than the limit to write after it).
    both = backup.read_text(encoding="utf-8", errors="replace") + text
    assert "fixture: saw my log rotated" in both


#: What is wrong with each broken tool of ``schema_breaking_server.py``, as the crawl reports it.
BROKEN_TOOLS = {
    "wrong_type": "inputSchema.type: should be 'object' (got 'string')",
    "no_schema_1": "inputSchema: Field required",
    "no_schema_2": "inputSchema: Field required",
    "no_schema_3": "inputSchema: Field required",
    "not_an_object": "inputSchema: should be a valid dictionary or instance of InputSchema",
    "bad_json_schema": "inputSchema.properties.count.minimum is not valid JSON Schema: 'zero' is not of type 'number'",
    # No one could approve these by name ("approve breaker/" names nothing; argv ends at a NUL).
    "": "name: empty or blank; a tool must have a name to be called or approved",
    "nul\x00name": "name: holds the control character U+0000, which no command line can pass",
}


def test_tools_with_broken_definitions_are_skipped_and_the_servers_other_tools_indexed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One tool without a usable inputSchema failed the whole server ("bad reply"): its good tools were lost too.
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    servers = write_servers(tmp_path / "servers.json", {"breaker": {"command": sys.executable, "args": [str(SCHEMA_BREAKER)]}})
    out = tmp_path / "catalog.json"
    with caplog.at_level("WARNING", logger="index.catalog.crawl"):
        code = _run_cli("--servers", str(servers), "--out", str(out), "--log-dir", str(tmp_path / "logs"), "--timeout", "30")
    err = capsys.readouterr().err
    assert code == 0, err
    catalog = load_catalog(out)
    assert [record.name for record in catalog.tools] == ["fine", "echo"]
    assert catalog.servers["breaker"].tool_count == 2
    # Kept in the catalog, and built into the index with the tools (execute of one says why: tests/server).
    assert catalog.servers["breaker"].skipped_tools == BROKEN_TOOLS
    settings = CopilotSettings(home=tmp_path / "home")
    build_index(out, settings, show_progress=False)
    assert ToolIndex.open(settings).skipped_tools("breaker") == BROKEN_TOOLS
    # A warning per tool naming server, tool and problem; the summary lists them; the server's crawl log too.
    # Names are shown with control characters escaped (a NUL would end the line for a reader).
    shown = {name: name.replace("\x00", "\\x00") for name in BROKEN_TOOLS}
    assert [record.getMessage() for record in caplog.records] == [
        f"server 'breaker': skipped tool '{shown[name]}', its definition is broken: {why}" for name, why in BROKEN_TOOLS.items()
    ]
    summary = " ".join(err.split())
    assert "ok breaker: 2 tools, 8 skipped for broken definitions (started in" in summary
    assert "skipped 8 tool(s) whose definition is broken (the other tools of their servers are indexed" in summary
    for name, why in BROKEN_TOOLS.items():
        assert f"breaker/{shown[name]}: {why}" in summary
    log = (tmp_path / "logs" / "breaker.log").read_text(encoding="utf-8")
    for name, why in BROKEN_TOOLS.items():
        assert f"skipped tool '{shown[name]}', its definition is broken: {why}" in log
    assert "crawled 1 of 1 server(s), 2 tools; 0 failed" in summary
    assert "Traceback" not in err


def test_a_listing_cut_at_the_cap_is_kept_and_told_apart_from_broken_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the cut was one more note among the warnings and the catalog kept nothing of it, so
    # execute of a tool past it answered as if the tool did not exist.
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    # The 1,000th tool is broken, the 1,001st past the cap.
    entry = hostile_entry("--many-tools", str(MAX_TOOLS - len(HOSTILE_TOOLS) - 1), "--broken-tool", "--deep-schema", "97")
    servers = write_servers(tmp_path / "servers.json", {"many": entry})
    out = tmp_path / "catalog.json"
    with caplog.at_level("WARNING", logger="index.catalog.crawl"):
        code = _run_cli("--servers", str(servers), "--out", str(out), "--log-dir", str(tmp_path / "logs"), "--timeout", "60")
    err = capsys.readouterr().err
    assert code == 0, err
    broken = "inputSchema.type: should be 'object' (got 'string')"
    cut = (
        f"the server listed more than {MAX_TOOLS:,} tools and the copilot reads only the first {MAX_TOOLS:,} "
        "(1 more left out)"
    )
    assert load_catalog(out).servers["many"].skipped_tools == {"broken": broken, LISTING_CUT: cut}
    assert [record.getMessage() for record in caplog.records] == [
        f"server 'many': skipped tool 'broken', its definition is broken: {broken}",
        f"server 'many': {cut}",
    ]
    summary = " ".join(err.split())
    assert f"ok many: {MAX_TOOLS - 1} tools, 1 skipped for broken definitions, more listed past the cap" in summary
    assert "skipped 1 tool(s) whose definition is broken" in summary and f"many/broken: {broken}" in summary
    assert f"cut many: {cut}" in summary and LISTING_CUT not in summary
    log = (tmp_path / "logs" / "many.log").read_text(encoding="utf-8")
    assert log.count(f"skipped tool 'broken', its definition is broken: {broken}") == 1 and log.count(cut) == 1


async def test_a_report_of_skipped_tools_is_kept_with_the_servers_outcome(tmp_path: Path) -> None:
    servers = {"breaker": ServerConfig(name="breaker", command=sys.executable, args=[str(SCHEMA_BREAKER)])}
    with anyio.fail_after(60):
        report = await crawl_servers(servers, timeout=30, log_dir=tmp_path / "logs", progress=False)
    outcome = report.outcomes["breaker"]
    assert outcome.ok and outcome.tool_count == 2 and outcome.skipped_tools == BROKEN_TOOLS
    assert [record.name for record in report.records] == ["fine", "echo"]
    assert report.skipped_tools == {"breaker": BROKEN_TOOLS}  # what an index sync of the crawl keeps


async def test_a_reply_breaking_the_mcp_schema_beyond_single_tools_is_reported_with_where_and_what(
    tmp_path: Path,
) -> None:
    # It said only "(5 problems)": neither the user nor the server's author could tell which tool.
    entry = {"command": sys.executable, "args": [str(SCHEMA_BREAKER), "--bad-cursor"], "name": "breaker"}
    servers = {"breaker": ServerConfig.model_validate(entry)}
    with anyio.fail_after(60):
        report = await crawl_servers(servers, timeout=30, log_dir=tmp_path / "logs", progress=False)
    outcome = report.outcomes["breaker"]
    assert outcome.kind == "bad reply"
    assert outcome.reason == (
        "its tools/list reply does not follow the MCP schema: nextCursor: should be a valid string (got 5); "
        "tools[1].inputSchema.type: should be 'object' (got 'string') (and 4 more)"
    )


async def test_prompts_resources_and_templates_are_bounded_as_tools_are(tmp_path: Path) -> None:
    """A child listing thousands of prompts, resources and templates, or one of each too big: the
    first 1,000 of each kind are kept (no page asked for past the cap), an oversized one is skipped,
    each cut said (before: every item of every page was kept, however many or big)."""
    over = str(MAX_TOOLS + 500)
    servers = {
        "many": ServerConfig(name="many", **hostile_entry(
            "--many-prompts", over, "--many-resources", str(MAX_TOOLS + 1), "--many-templates", str(MAX_TOOLS),
            "--list-page-size", "300",
        )),
        "huge": ServerConfig(name="huge", **hostile_entry("--many-prompts", "2", "--huge-items", str(MAX_DEFINITION_CHARS))),
    }
    with anyio.fail_after(90):
        report = await crawl_servers(servers, concurrency=2, timeout=60, log_dir=tmp_path / "logs", progress=False)
    kinds = Counter((record.server, record.kind) for record in report.records)
    assert kinds[("many", "prompt")] == kinds[("many", "resource")] == kinds[("many", "resource_template")] == MAX_TOOLS
    prompts = [record.name for record in report.records if record.server == "many" and record.kind == "prompt"]
    assert prompts == [f"prompt_{n}" for n in range(MAX_TOOLS)]  # the first ones
    # Prompts: 4 pages of 300 reach the cap, the 5th is never asked for; resources: the last page is cut.
    assert report.outcomes["many"].warnings == [
        f"prompts/list offered more than {MAX_TOOLS:,} prompts; kept the first {MAX_TOOLS:,} (200 more and further "
        "pages left out)",
        f"resources/list offered more than {MAX_TOOLS:,} resources; kept the first {MAX_TOOLS:,} (1 more left out)",
    ]
    assert [(r.kind, r.name) for r in report.records if r.server == "huge" and r.kind != "tool"] == [
        ("prompt", "prompt_0"), ("prompt", "prompt_1"),
    ]
    warnings = report.outcomes["huge"].warnings
    assert len(warnings) == 3
    for warning, kind in zip(warnings, ["prompt", "resource", "resource template"], strict=True):
        assert warning.startswith(f"{kind} '{HUGE_NAME[:100]}' skipped, its definition is too big: it is ")
        assert warning.endswith(f" characters long, over the copilot's limit of {MAX_DEFINITION_CHARS:,} characters")
    assert report.outcomes["huge"].ok and report.outcomes["huge"].tool_count == len(HOSTILE_TOOLS)


async def test_a_broken_prompt_or_resource_costs_only_itself(tmp_path: Path) -> None:
    """Prompts, resources and templates the MCP schema does not allow, listed among good ones: each
    is skipped with what is wrong with it, and the others are kept (before: the page failed as a
    whole and the server's every prompt, resource or template was lost)."""
    servers = {
        "mixed": ServerConfig(name="mixed", **hostile_entry(
            "--broken-items", "second", "--many-prompts", "3", "--many-resources", "2", "--many-templates", "2",
        )),
    }
    with anyio.fail_after(60):
        report = await crawl_servers(servers, concurrency=1, timeout=30, log_dir=tmp_path / "logs", progress=False)
    assert [(r.kind, r.name) for r in report.records if r.kind != "tool"] == [
        ("prompt", "prompt_0"), ("prompt", "prompt_1"), ("prompt", "prompt_2"),
        ("resource", "resource_0"), ("resource", "resource_1"),
        ("resource_template", "template_0"), ("resource_template", "template_1"),
    ]
    assert report.outcomes["mixed"].warnings == [
        "prompt '#2 (no name)' skipped, its definition is broken: name: Field required",
        "prompt 'bad_arguments' skipped, its definition is broken: arguments: should be a valid list (got 'none')",
        "resource 'no_uri' skipped, its definition is broken: uri: Field required",
        "resource template 'no_template' skipped, its definition is broken: uriTemplate: should be a valid string (got 7)",
    ]
    assert report.outcomes["mixed"].ok and report.outcomes["mixed"].tool_count == len(HOSTILE_TOOLS)


async def test_items_past_the_cap_are_counted_not_checked(tmp_path: Path) -> None:
    """A page longer than the cap with broken items past it: the first items fill the cap, and
    the rest of the page -- broken ones included -- is counted as left out, never checked (before:
    the whole page was built and checked, and the broken items past the cap failed it)."""
    servers = {
        "many": ServerConfig(name="many", **hostile_entry("--many-prompts", str(MAX_TOOLS + 5), "--broken-items", "last")),
    }
    with anyio.fail_after(60):
        report = await crawl_servers(servers, concurrency=1, timeout=30, log_dir=tmp_path / "logs", progress=False)
    assert Counter(r.kind for r in report.records)["prompt"] == MAX_TOOLS
    assert report.outcomes["many"].warnings == [
        f"prompts/list offered more than {MAX_TOOLS:,} prompts; kept the first {MAX_TOOLS:,} (7 more left out)",
        # (the only resource and template, broken, are within the cap: checked and skipped)
        "resource 'no_uri' skipped, its definition is broken: uri: Field required",
        "resource template 'no_template' skipped, its definition is broken: uriTemplate: should be a valid string (got 7)",
    ]


def test_a_servers_file_with_a_key_given_twice_stops_the_crawl_before_any_server_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(
        '{\n "mcpServers": {"a": {"command": "%s"}},\n "mcpServers": {"b": {"command": "%s"}}\n}' % (sys.executable, sys.executable),
        encoding="utf-8",
    )
    code = _run_cli("--servers", str(servers), "--out", str(tmp_path / "c.json"), "--log-dir", str(tmp_path / "logs"))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {servers}:3: 'mcpServers' is listed twice (also on line 2)")
    assert not (tmp_path / "logs").exists() and not (tmp_path / "c.json").exists()


async def test_bad_arguments_are_config_errors(tmp_path: Path) -> None:
    from index.errors import ConfigError

    with pytest.raises(ConfigError, match="concurrency"):
        await crawl_servers({}, concurrency=0, log_dir=tmp_path, progress=False)
    with pytest.raises(ConfigError, match="timeout"):
        await crawl_servers({}, timeout=0, log_dir=tmp_path, progress=False)


def test_a_server_with_a_very_long_name_is_crawled_with_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its log was <name>.log: past the file system's 255 bytes, which failed the whole crawl.
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    long_name = "a" * 300
    servers = write_servers(tmp_path / "servers.json", {long_name: fixture_entry("long"), "ok": fixture_entry("ok")})
    out = tmp_path / "catalog.json"
    code = _run_cli("--servers", str(servers), "--out", str(out), "--log-dir", str(tmp_path / "logs"), "--timeout", "30")
    assert code == 0
    assert list(load_catalog(out).servers) == [long_name, "ok"]
    logs = sorted(path.name for path in (tmp_path / "logs").iterdir())
    assert logs == sorted([log_file_name(long_name), "ok.log"]) and all(len(name) <= 100 for name in logs)


def test_log_file_names_of_long_and_unencodable_names_are_short_distinct_and_writable() -> None:
    long_names = ["a" * 300, "a" * 299 + "b"]
    assert [len(log_file_name(name)) < 100 for name in long_names] == [True, True]
    assert log_file_name(long_names[0]) != log_file_name(long_names[1])  # cut alike, told apart by the hash
    surrogates = [log_file_name("\ud800x"), log_file_name("\udc00x")]  # JSON's "\ud800x": no UTF-8 form
    assert surrogates[0] != surrogates[1] and all(name.isascii() and name.startswith("x-") for name in surrogates)
    assert log_file_name("..").startswith("server-") and log_file_name("a" * 80) == "a" * 80 + ".log"


async def test_a_server_whose_log_cannot_be_opened_fails_alone(tmp_path: Path) -> None:
    config = ServerConfig.model_validate({**fixture_entry("alpha"), "name": "alpha"})
    with anyio.fail_after(60):
        outcome, records, info = await crawl_server(
            config, timeout=30, log_dir=tmp_path / ("x" * 300), workdir=tmp_path / "work"
        )
    assert not outcome.ok and outcome.kind == "error" and "File name too long" in outcome.reason
    assert records == [] and info is None


def _sh_server(script: str) -> dict[str, Any]:
    return {"command": "/bin/sh", "args": ["-c", script]}


async def test_crawl_output_shows_control_characters_from_names_and_children_as_escapes(tmp_path: Path) -> None:
    # Entries made in code skip the servers file's name check; children's stderr is theirs to fill.
    servers = {
        "evil\x1b[2J": ServerConfig(name="evil\x1b[2J", **_sh_server(r"printf '\033]0;pwned\007boom\n' >&2; exit 3")),
        "ok": ServerConfig.model_validate({**fixture_entry("ok"), "name": "ok"}),
    }
    stream = io.StringIO()
    console = make_console(file=stream)
    with anyio.fail_after(60):
        report = await crawl_servers(servers, concurrency=2, timeout=30, log_dir=tmp_path / "logs", progress=console)
    print_summary(report, console)
    shown = stream.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown
    assert r"failed evil\x1b[2J: crashed" in shown and r"\x1b]0;pwned\x07boom" in shown  # the stderr tail, escaped
    assert r"ok     ok: " in shown


def test_a_log_dir_or_catalog_path_that_cannot_be_used_is_one_error_before_any_child_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    marker = tmp_path / "started"
    servers = write_servers(tmp_path / "servers.json", {"probe": _sh_server(f"touch {marker}; exit 3")})
    a_file = tmp_path / "a-file"
    a_file.write_text("", encoding="utf-8")
    out = str(tmp_path / "catalog.json")
    cases = [
        (["--log-dir", str(a_file), "--out", out], f"error: --log-dir {a_file}: cannot use it for the children's logs (it is a file"),
        (["--log-dir", str(a_file / "logs"), "--out", out], f"error: --log-dir {a_file / 'logs'}: cannot use it for the children's logs (a file is in the way)"),
        (["--out", str(a_file / "catalog.json")], f"error: --out {a_file / 'catalog.json'}: {a_file} is a file, not a directory"),
        (["--out", str(tmp_path)], f"error: --out {tmp_path}: is a directory"),
    ]
    for flags, message in cases:
        assert _run_cli("--servers", str(servers), *flags) == 2
        err = capsys.readouterr().err
        assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err
    monkeypatch.setenv("COPILOT_HOME", str(a_file))  # the default log dir is under it
    assert _run_cli("--servers", str(servers), "--out", out) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot use ") and f"COPILOT_HOME ({a_file}) must be a writable directory" in err
    assert not marker.exists() and not Path(out).exists()


def test_log_file_names_are_safe() -> None:
    assert log_file_name("Ant Design Components").startswith("Ant_Design_Components-")
    assert log_file_name("../etc/passwd").startswith("etc_passwd-") and "/" not in log_file_name("../etc/passwd")
    assert log_file_name("time") == "time.log"
    # Names that clean up alike keep their own logs (and work dirs).
    assert log_file_name("a b") != log_file_name("a_b") == "a_b.log"


def test_machine_paths_are_scrubbed_from_records(tmp_path: Path) -> None:
    workdir = tmp_path / "work" / "fs"
    home = str(Path.home())
    value = {
        "description": f"Allowed directories: {workdir}/data and {home}/notes",
        "input_schema": {"properties": {"path": {"default": str(workdir)}}},
    }
    scrubbed = scrub_machine_paths(value, workdir)
    assert scrubbed["description"] == "Allowed directories: <workdir>/data and ~/notes"
    assert scrubbed["input_schema"]["properties"]["path"]["default"] == "<workdir>"


ERRING_SERVER = FIXTURE.parent / "hostile" / "erring_server.py"


async def test_a_listing_answered_with_error_32000_is_the_servers_answer_not_a_crash(tmp_path: Path) -> None:
    # -32000 is also the SDK's code for an ended connection: read alone, it made this a crash.
    servers = {
        name: ServerConfig(name=name, command=sys.executable, args=[str(ERRING_SERVER), "--fail", method])
        for name, method in (("tools", "tools/list"), ("prompts", "prompts/list"))
    }
    with anyio.fail_after(60):
        report = await crawl_servers(servers, concurrency=2, timeout=30, log_dir=tmp_path / "logs", progress=False)
    tools = report.outcomes["tools"]
    assert not tools.ok and tools.kind == "tools/list failed"
    assert tools.reason == "answered tools/list with error -32000: Connection closed"
    prompts = report.outcomes["prompts"]
    assert prompts.ok and "prompts/list failed: error -32000: Connection closed" in prompts.warnings
    listed = {(record.kind, record.name) for record in report.records if record.server == "prompts"}
    assert listed == {("tool", "counter"), ("tool", "fail"), ("resource", "note")}  # the listing went on


#: A raw JSON-RPC child with prompts whose listing fails, quoting the API key of its env (real servers
#: put the request they sent, key included, into such errors).
_PROMPTS_FAIL_SERVER = r'''
import json, os, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, reply = message["method"], {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        reply["result"] = {"protocolVersion": message["params"]["protocolVersion"], "serverInfo": {"name": "p", "version": "1"},
                           "capabilities": {"tools": {}, "prompts": {}}}
    elif method == "tools/list":
        reply["result"] = {"tools": [{"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}]}
    else:
        reply["error"] = {"code": -32603, "message": "upstream refused key " + os.environ["SEARCH_API_KEY"]}
    print(json.dumps(reply), flush=True)
'''


async def test_crawl_warnings_quoting_a_childs_error_hold_no_secret_of_its_entry(tmp_path: Path) -> None:
    script = tmp_path / "prompts_fail.py"
    script.write_text(_PROMPTS_FAIL_SERVER, encoding="utf-8")
    text = json.dumps({"mcpServers": {"p": {"command": sys.executable, "args": [str(script)],
                                             "env": {"SEARCH_API_KEY": SECRET}}}})
    config = parse_servers(text, environ={}).servers["p"]
    with anyio.fail_after(60):
        outcome, records, _ = await crawl_server(config, timeout=30, log_dir=tmp_path / "logs", workdir=tmp_path / "work")
    assert outcome.ok and [record.name for record in records] == ["echo"]
    assert "prompts/list failed: error -32603: upstream refused key <env SEARCH_API_KEY>" in outcome.warnings
    assert SECRET not in json.dumps(outcome.warnings)


@pytest.mark.parametrize(
    ("returncode", "reason"),
    [
        (None, "closed its stdout without exiting before answering initialize"),
        (3, "exited with exit code 3 before answering initialize"),
        (-9, "was killed by signal 9 (SIGKILL) before answering initialize"),
    ],
)
def test_a_child_gone_before_initialize_is_reported_as_it_ended(returncode: int | None, reason: str) -> None:
    # A child that closed its stdout but kept running read "exited with still running".
    from index.catalog.crawl import _failure  # noqa: PLC0415
    from index.children.errors import ChildExitedError  # noqa: PLC0415

    error = ChildExitedError("server 'gone' (x) ...", server="gone", returncode=returncode)
    kind, shown, _, _ = _failure(ServerConfig(name="gone", command="x"), error, phase="initialize", limit=5)
    assert kind == "crashed" and shown == reason
