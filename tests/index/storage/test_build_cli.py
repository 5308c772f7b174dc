"""``python -m index build`` the way a new user meets it: through the real program, off a terminal.

The missing-index message must name the one command that fixes it (this interpreter, the
settings the user's shell may lack), and running exactly that command must fix it; a broken
servers file must fail the build (so ``make run`` stops there, not at the serve step).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.index.index_support import make_catalog

from index.storage.build import progress_bar
from tests.support.cli import PROJECT, cli_env, line_with, run_cli, single_error

pytestmark = pytest.mark.timeout(300)


def _interpreter_as_typed_from(directory: Path) -> str:
    executable = Path(sys.executable)
    return str(executable.relative_to(directory)) if executable.is_relative_to(directory) else str(executable)


def test_missing_index_names_the_exact_command_and_that_command_builds_it(tmp_path: Path) -> None:
    home = tmp_path / "copilot home"  # a space: the command must quote it
    catalog = make_catalog().save(tmp_path / "catalog.json")
    settings = {"COPILOT_HOME": str(home), "COPILOT_CATALOG": str(catalog)}

    missing = run_cli("index", "search", "weather forecast for a city", env=cli_env(**settings))
    command = (
        f"COPILOT_HOME={shlex.quote(str(home))} COPILOT_CATALOG={shlex.quote(str(catalog))} "
        f"{_interpreter_as_typed_from(PROJECT)} -m index build"
    )
    assert single_error(missing) == f"error: no tool index at {home / 'index' / 'chroma'}: build it with: {command}"
    assert missing.returncode == 2

    # The user pastes the command into a shell that has none of the copilot's settings.
    built = subprocess.run(
        command, shell=True, cwd=PROJECT, env=cli_env(), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=240, check=False,
    )
    assert built.returncode == 0, built.stderr
    total = len(make_catalog().tools)
    line_with(built.stdout, f"tools: {total} indexed -- {total} added, 0 updated, 0 removed, 0 unchanged")
    # Off a terminal the progress is plain lines on stderr (a rich bar would stay silent until the end).
    work = total + len(make_catalog().servers)  # tool and server documents
    progress = [line for line in built.stderr.splitlines() if line.startswith("embedding: ")]
    assert progress[0] == f"embedding: 0 of {work} (0%)", built.stderr
    assert progress[-1].startswith(f"embedding: {work} of {work} (100%) in "), built.stderr

    found = run_cli("index", "search", "weather forecast for a city", env=cli_env(**settings))
    assert found.returncode == 0, found.stderr
    # The result table is laid out for a pipe: each row on one line, whatever COLUMNS says.
    row = line_with(found.stdout, "Get the weather forecast for the next days in a city.")
    assert "get_weather_forecast" in row and "weather" in row


def test_missing_catalog_says_to_crawl_first(tmp_path: Path) -> None:
    settings = {"COPILOT_HOME": str(tmp_path / "home"), "COPILOT_CATALOG": str(tmp_path / "none.json")}
    result = run_cli("index", "search", "weather", env=cli_env(**settings))
    line = single_error(result)
    python = _interpreter_as_typed_from(PROJECT)
    assert f"there is no catalog at {tmp_path / 'none.json'}" in line
    assert f"{python} -m index crawl && " in line and line.endswith(f"{python} -m index build")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"mcpServers": {"time": {"command": "uvx",}}}', "servers.json:1:"),
        ('{"mcpServers": {\n "time": {"args": ["x"]}\n}}', "servers.json:2: server 'time': "),
        ('{"servers": []}', "servers.json:1: 'servers' must be an object mapping each server's name to its entry (got list)"),
    ],
)
def test_a_broken_servers_file_fails_the_build_before_anything_is_embedded(
    tmp_path: Path, text: str, where: str
) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(text, encoding="utf-8")
    result = run_cli("index", "build", env=cli_env(COPILOT_HOME=str(tmp_path / "home"), COPILOT_SERVERS=str(servers)))
    assert where in single_error(result)
    assert result.returncode == 2 and result.stdout == ""
    assert not (tmp_path / "home" / "index").exists()  # failed before touching the index


def test_progress_off_a_terminal_is_a_line_per_tenth_of_the_work(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar("embedding") as progress:  # stderr is pytest's capture: not a terminal
        progress(0, 0)  # nothing to do yet: nothing shown
        for done in range(0, 1001, 7):
            progress(done, 1000)
        progress(1000, 1000)
        progress(1000, 1000)
    lines = capsys.readouterr().err.splitlines()
    shown = [int(line.split()[1]) for line in lines]
    assert lines[0] == "embedding: 0 of 1000 (0%)" and lines[1] == "embedding: 105 of 1000 (10%)"
    assert shown == [0, 105, 203, 301, 406, 504, 602, 700, 805, 903, 1000]
    assert lines[-1].startswith("embedding: 1000 of 1000 (100%) in ") and lines[-1].endswith(" s")


def test_progress_shows_nothing_when_disabled(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar("embedding", enabled=False) as progress:
        progress(0, 10)
        progress(10, 10)
    assert capsys.readouterr().err == ""


CLOCK_SERVER = PROJECT / "tests" / "fixtures" / "clock_server.py"


def test_the_commands_a_missing_catalog_suggests_write_that_catalog(tmp_path: Path) -> None:
    # Without --out they wrote the default catalog: the build still failed, and the bundled one was overwritten.
    servers = tmp_path / "servers.json"
    servers.write_text(
        json.dumps({"mcpServers": {"clock": {"command": sys.executable, "args": [str(CLOCK_SERVER)]}}}), encoding="utf-8"
    )
    env = cli_env(COPILOT_HOME=str(tmp_path / "home"), COPILOT_SERVERS=str(servers))
    mine = tmp_path / "my catalog.json"  # a space: the commands must quote it
    missing = single_error(run_cli("index", "build", "--catalog", str(mine), env=env))
    assert missing.startswith(f"error: {mine}: catalog not found. Create one with: ")
    crawl, imported = missing.split("Create one with: ", 1)[1].split(" -- or: ")
    assert imported.endswith(f"-m index import-livemcpbench PATH/tools.json --out {shlex.quote(str(mine))}")

    assert crawl.endswith(f"-m index crawl --out {shlex.quote(str(mine))}")
    # The user pastes the crawl into a shell without the copilot's settings (COPILOT_CATALOG only
    # guards the project's catalog, should the command ever lose its --out again).
    crawled = subprocess.run(
        crawl, shell=True, cwd=PROJECT, env=cli_env(COPILOT_CATALOG=str(tmp_path / "guard.json")), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert crawled.returncode == 0, crawled.stderr
    assert mine.is_file()
    built = run_cli("index", "build", "--catalog", str(mine), env=env, timeout=240)
    assert built.returncode == 0, built.stderr
    line_with(built.stdout, "tools: 1 indexed -- 1 added, 0 updated, 0 removed, 0 unchanged")
