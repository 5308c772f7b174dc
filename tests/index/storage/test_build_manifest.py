"""A build where nothing changed answers from the build manifest without opening Chroma
(``index.storage.build_manifest``), and only then: a changed catalog, servers file or model, a store
written by someone else, deleted, or behind a Chroma server, and an unreadable manifest all
take the full comparison. Real Chroma stores, the real bundled model."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from tests.index.index_support import make_catalog, make_records, open_index

from index.storage.build import build_index, build_inputs
from index.storage.build_manifest import FILE_NAME, read_manifest
from index.models.embedding import bundled_model_path
from index.catalog.records import load_catalog
from index.settings import CopilotSettings
from tests.support.cli import cli_env, line_with, run_cli

pytestmark = pytest.mark.timeout(300)

SHORTCUT = "nothing changed since the last build"
SERVERS = '{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}\n'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    return make_catalog().save(tmp_path / "catalog.json")


@pytest.fixture
def servers(tmp_path: Path) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(SERVERS, encoding="utf-8")
    return path


def _build(home: Path, catalog: Path, servers: Path, caplog: pytest.LogCaptureFixture, **settings: str):
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="index"):
        report = build_index(catalog, CopilotSettings(home=home, **settings), show_progress=False, servers_file=servers)
    shortcut = any(SHORTCUT in record.getMessage() for record in caplog.records)
    return report, shortcut


def test_the_cli_answers_an_unchanged_build_from_the_manifest_and_rebuilds_a_deleted_store(
    home: Path, catalog: Path, servers: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = cli_env(COPILOT_HOME=str(home), COPILOT_CATALOG=str(catalog), COPILOT_SERVERS=str(servers))
    total = len(make_records())
    # The first build in this process (the CLI runs the same build_index; each CLI run costs a cold start).
    first, shortcut = _build(home, catalog, servers, caplog)
    assert first.added == total and not shortcut
    assert (home / "index" / FILE_NAME).is_file()

    second = run_cli("index", "build", env=env, timeout=240)
    assert second.returncode == 0, second.stderr
    line_with(second.stderr, f"INFO index.storage.build: {SHORTCUT}")
    line_with(second.stdout, f"tools: {total} indexed -- 0 added, 0 updated, 0 removed, {total} unchanged")
    # Word for word what a build that compares every stored tool prints; only the time differs.
    (home / "index" / FILE_NAME).unlink()
    compared = run_cli("index", "build", env=env, timeout=240)
    assert compared.returncode == 0, compared.stderr
    assert SHORTCUT not in compared.stderr

    def untimed(stdout: str) -> list[str]:
        return [line for line in stdout.splitlines() if not line.startswith("time:")]

    assert untimed(second.stdout) == untimed(compared.stdout)
    assert len(untimed(second.stdout)) == 4

    shutil.rmtree(home / "index" / "chroma")
    rebuilt = run_cli("index", "build", env=env, timeout=240)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert SHORTCUT not in rebuilt.stderr
    line_with(rebuilt.stdout, f"tools: {total} indexed -- {total} added, 0 updated, 0 removed, 0 unchanged")


def test_a_changed_catalog_is_compared(home: Path, catalog: Path, servers: Path, caplog: pytest.LogCaptureFixture) -> None:
    _build(home, catalog, servers, caplog)
    assert _build(home, catalog, servers, caplog)[1]
    edited = load_catalog(catalog)
    edited.tools[0] = edited.tools[0].model_copy(update={"description": "Weather forecasts for the next ten days."})
    edited.save(catalog)
    report, shortcut = _build(home, catalog, servers, caplog)
    assert not shortcut and report.updated == 1
    assert _build(home, catalog, servers, caplog)[1]


def test_a_changed_servers_file_is_checked_again(
    home: Path, catalog: Path, servers: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _build(home, catalog, servers, caplog)
    servers.write_text(SERVERS.replace("mcp-server-time", "mcp-server-time==0.6.2"), encoding="utf-8")
    report, shortcut = _build(home, catalog, servers, caplog)
    assert not shortcut and not report.changed and report.unchanged == len(make_records())
    assert _build(home, catalog, servers, caplog)[1]


def test_another_model_rebuilds_and_switching_back_rebuilds_again(
    home: Path, catalog: Path, servers: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _build(home, catalog, servers, caplog)
    # The bundled model named by its directory is, to the index, another model.
    other = str(bundled_model_path())
    report, shortcut = _build(home, catalog, servers, caplog, embedding_model=other)
    assert not shortcut and report.full_rebuild and report.model != "all-MiniLM-L6-v2 (int8)"
    report, shortcut = _build(home, catalog, servers, caplog)
    assert not shortcut and report.full_rebuild and report.model == "all-MiniLM-L6-v2 (int8)"
    # float32 vectors are another vector space too.
    report, shortcut = _build(home, catalog, servers, caplog, embedding_precision="float32")
    assert not shortcut and report.full_rebuild and report.model == "all-MiniLM-L6-v2"


def test_a_store_written_by_someone_else_is_compared(
    home: Path, catalog: Path, servers: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _build(home, catalog, servers, caplog)
    # A copilot re-indexing one server after it dropped a tool (a partial sync).
    kept = [record for record in make_records() if record.name != "get_air_quality"]
    assert open_index(home).sync([r for r in kept if r.server == "weather"], servers={"weather"}).removed == 1
    report, shortcut = _build(home, catalog, servers, caplog)
    assert not shortcut and report.added == 1
    assert _build(home, catalog, servers, caplog)[1]


@pytest.mark.parametrize("text", ["{not json", '{"version": 1, "inputs": []}', "", "\udcff"])
def test_an_unreadable_manifest_is_ignored_with_a_warning_and_rewritten(
    home: Path, catalog: Path, servers: Path, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    _build(home, catalog, servers, caplog)
    manifest = home / "index" / FILE_NAME
    manifest.write_bytes(text.encode("utf-8", "surrogateescape"))
    report, shortcut = _build(home, catalog, servers, caplog)
    assert not shortcut and report.unchanged == len(make_records())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"ignoring the build manifest {manifest}" in message for message in warnings), warnings
    assert read_manifest(manifest) is not None
    assert _build(home, catalog, servers, caplog)[1]


def test_a_failed_build_leaves_no_manifest(home: Path, catalog: Path, servers: Path, caplog: pytest.LogCaptureFixture) -> None:
    _build(home, catalog, servers, caplog)
    broken = load_catalog(catalog)
    broken.tools.append(broken.tools[0])  # a duplicate tool stops the sync before it writes anything
    broken_path = broken.save(catalog.with_name("broken.json"))
    with pytest.raises(Exception, match="appears twice"):
        _build(home, broken_path, servers, caplog)
    assert not (home / "index" / FILE_NAME).exists()
    assert not _build(home, catalog, servers, caplog)[1]


def test_a_chroma_server_is_never_shortcut(tmp_path: Path, catalog: Path, servers: Path) -> None:
    settings = CopilotSettings(home=tmp_path / "home", chroma_url="http://127.0.0.1:9")
    assert build_inputs(settings, catalog, load_catalog(catalog), servers) is None
    local = build_inputs(CopilotSettings(home=tmp_path / "home"), catalog, load_catalog(catalog), servers)
    assert local is not None and local.store == str(tmp_path / "home" / "index" / "chroma")


def test_a_home_that_is_a_file_is_one_clear_error(tmp_path: Path, catalog: Path, servers: Path) -> None:
    occupied = tmp_path / "home-file"
    occupied.write_text("not a directory")
    env = cli_env(COPILOT_HOME=str(occupied), COPILOT_CATALOG=str(catalog), COPILOT_SERVERS=str(servers))
    result = run_cli("index", "build", env=env, timeout=240)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: {occupied / 'index' / 'write.lock'}: cannot create this lock file (Not a directory); "
        "COPILOT_HOME must be a writable directory holding index/ (move what is in the way, or set COPILOT_HOME elsewhere)."
    )


def test_a_damaged_store_says_to_remove_it_and_build_again(
    home: Path, catalog: Path, servers: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _build(home, catalog, servers, caplog)
    database = home / "index" / "chroma" / "chroma.sqlite3"
    with database.open("r+b") as handle:
        handle.truncate(10_000)
    env = cli_env(COPILOT_HOME=str(home), COPILOT_CATALOG=str(catalog), COPILOT_SERVERS=str(servers))
    result = run_cli("index", "search", "current time", env=env, timeout=240)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"remove {home / 'index' / 'chroma'} and build it again" in result.stderr
    assert "-m index build" in result.stderr
