"""The README's statements, run or checked against the code.

- the Python SDK snippet is taken from README.md as written and run against a real stdio copilot
  (its only child a real fixture server, a small real index built in the default data dir of a
  fresh ``HOME``), and once more without an index, where it must stop with the copilot's message;
- the trajectory log section names every event, field and ``error_kind`` the code has, and its
  example lines parse;
- every file or directory of the repository the README names exists;
- it leads with what a new user does, in order, and keeps the reference for after.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import anyio
import pytest

from index.trust.scan import Finding
import server.copilot  # noqa: F401 -- defines or imports every ExecuteError subclass
from server.errors import ExecuteError
from server.trajectory.records import ExecuteResult, RouteHit, TrajectoryEvent, WorkspaceFile, parse_event
from tests.support.cli import PROJECT, cli_env

README = PROJECT / "README.md"
CLOCK_SERVER = PROJECT / "tests" / "fixtures" / "clock_server.py"
PLACEHOLDER_PYTHON = "/path/to/mcp-copilot/.venv/bin/python"

pytestmark = pytest.mark.timeout(300)


def readme() -> str:
    return README.read_text(encoding="utf-8")


def section(name: str) -> str:
    text = readme()
    start, end = f"<!-- section:{name} -->", f"<!-- /section:{name} -->"
    assert start in text and end in text, f"README has no section {name!r}"
    return text[text.index(start) : text.index(end)]


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


# ----------------------------------------------------------------------------- the SDK snippet


def sdk_snippet() -> str:
    [snippet] = [block for block in code_blocks(section("server"), "python") if "StdioServerParameters" in block]
    assert snippet.count(PLACEHOLDER_PYTHON) == 1, "the snippet no longer names the venv's Python as the test expects"
    assert "is_error" in snippet
    return snippet.replace(PLACEHOLDER_PYTHON, sys.executable)


def default_home(user_home: Path) -> Path:
    """Where the README says the index lives on Linux: ~/.local/share/mcp-copilot."""
    return user_home / ".local" / "share" / "mcp-copilot"


def run_snippet(directory: Path, user_home: Path) -> subprocess.CompletedProcess[str]:
    script = directory / "snippet.py"
    script.write_text(sdk_snippet(), encoding="utf-8")
    env = cli_env(HOME=str(user_home))
    env.pop("XDG_DATA_HOME", None)
    # The SDK starts the copilot with only HOME, PATH, ... of this environment, in this directory:
    # it finds ./servers.json and the index in the default data dir of HOME, as a user's would.
    return subprocess.run(
        [sys.executable, str(script)], cwd=directory, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=240, check=False,
    )


@pytest.fixture(scope="module")
def project_with_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A directory with a servers file (the clock server only) and a HOME whose data dir holds its index."""
    from index.catalog.crawl import crawl_servers
    from index.catalog.servers import parse_servers
    from index.settings import CopilotSettings
    from index.search.tool_index import ToolIndex

    root = tmp_path_factory.mktemp("readme-sdk")
    project, user_home = root / "project", root / "home"
    project.mkdir()
    text = json.dumps({"mcpServers": {"clock": {"command": sys.executable, "args": [str(CLOCK_SERVER)]}}})
    (project / "servers.json").write_text(text, encoding="utf-8")

    async def crawl() -> Any:
        servers = parse_servers(text).servers
        return await crawl_servers(servers, concurrency=1, timeout=60, log_dir=root / "crawl-logs", progress=False)

    report = anyio.run(crawl)
    assert not report.failed, [outcome.message for outcome in report.failed]
    ToolIndex.open(CopilotSettings(home=default_home(user_home))).sync(report.records)
    return project, user_home


@pytest.mark.skipif(sys.platform != "linux", reason="the default data dir checked here is Linux's")
def test_sdk_snippet_routes_and_executes_through_a_real_copilot(project_with_index: tuple[Path, Path]) -> None:
    project, user_home = project_with_index
    result = run_snippet(project, user_home)
    assert result.returncode == 0, result.stderr
    answer = result.stdout.strip()
    assert answer.endswith("(Asia/Tokyo)") or answer.endswith("no time zone data for Asia/Tokyo)"), answer
    logs = list((default_home(user_home) / "logs").glob("*.jsonl"))
    events = [parse_event(line) for path in logs for line in path.read_text(encoding="utf-8").splitlines()]
    calls = [(e.event, getattr(e, "tool", None)) for e in events if e.event in ("route", "execute")]
    assert calls == [("route", None), ("execute", "get_current_time")]


@pytest.mark.skipif(sys.platform != "linux", reason="the default data dir checked here is Linux's")
def test_sdk_snippet_stops_with_the_copilots_message_when_there_is_no_index(tmp_path: Path) -> None:
    project, user_home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    (project / "servers.json").write_text('{"mcpServers": {}}', encoding="utf-8")
    result = run_snippet(project, user_home)
    assert result.returncode == 1 and result.stdout == ""
    assert "Traceback" not in result.stderr
    expected = (
        f"no tool index at {default_home(user_home) / 'index' / 'chroma'}: "
        f"build it with: {sys.executable} -m index build"
    )
    # The copilot logs to the same stderr: print() writes the text and its newline in two writes, and
    # a log line can land between them, so the message is looked for whole, not as a line of its own.
    assert expected in result.stderr


# ------------------------------------------------------------------------ the trajectory format


def _field_names(model: Any) -> set[str]:
    return {name for name in model.model_fields if name not in ("ts", "event")}


def test_trajectory_section_documents_every_event_field_and_error_kind() -> None:
    text = section("trajectory-log")
    rows = {
        match.group(1): match.group(0)
        for match in re.finditer(r"^\| `([a-z_]+)` \|.*$", text, flags=re.MULTILINE)
        if match.group(1) != "event"  # the header row
    }
    union, _ = typing.get_args(TrajectoryEvent)  # Annotated[A | B | ..., discriminator]
    models = {model.model_fields["event"].default: model for model in typing.get_args(union)}
    assert set(rows) == set(models), "the table's events are not the code's"
    for tag, model in models.items():
        missing = {name for name in _field_names(model) if f"`{name}`" not in rows[tag]}
        assert not missing, f"{tag}: fields not documented: {sorted(missing)}"
    for part in (RouteHit, ExecuteResult, WorkspaceFile, Finding):
        assert all(f"`{name}`" in text for name in part.model_fields), part.__name__
    kinds = {cls.kind for cls in _subclasses(ExecuteError)}
    assert all(f"`{kind}`" in text for kind in kinds), sorted(kinds)
    [example] = code_blocks(text, "json")
    events = [parse_event(line) for line in example.splitlines() if line.strip()]
    assert [e.event for e in events][0] == "session_start" and events[-1].event == "session_end"


def _subclasses(cls: type) -> set[type]:
    found = {cls}
    for sub in cls.__subclasses__():
        found |= _subclasses(sub)
    return found


# ---------------------------------------------------------------------------------- paths


def test_every_repository_path_the_readme_names_exists() -> None:
    text = readme()
    named = re.findall(r"`((?:index|server|evaluation|bench|tests)/[A-Za-z0-9_./-]*)`", text)
    paths = {p for p in named if p.endswith("/") or "." in p.rsplit("/", 1)[-1]}  # not globs like server/tool
    assert paths, "no paths found: the pattern is broken"
    assert [p for p in sorted(paths) if not (PROJECT / p).exists()] == []
    modules = set(re.findall(r"\b([a-z_]+\.py)\b", section("architecture")))
    existing = {path.name for package in ("index", "server", "evaluation", "bench") for path in (PROJECT / package).rglob("*.py")}
    assert sorted(modules - existing) == []
    assert not (PROJECT / "DESIGN.md").exists() and "DESIGN.md" not in text


def test_the_readme_leads_with_using_it_and_keeps_the_reference_for_after() -> None:
    headings = [line.lstrip("#").strip() for line in readme().splitlines() if re.match(r"#{2,3} ", line)]
    first_steps = [
        "Quick start",
        "Using the copilot from an MCP host",
        "Add it to a host (stdio)",
        "Over HTTP",
        "Your own servers",
        "Benchmark your own agent (LiveMCPBench)",
        "Judging trajectories (LiveMCPEval)",
        "Reference",
    ]
    positions = [headings.index(title) for title in first_steps]
    assert positions == sorted(positions), [headings[i] for i in sorted(positions)]
    reference = headings.index("Reference")
    for part in ("The server pool: `servers.json`", "Tool index and search", "Configuration", "Benchmarks"):
        assert headings.index(part) > reference, part
