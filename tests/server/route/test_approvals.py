"""A definition the user approves is what ``route`` shows right after the approval
(``server.route.approvals``): the real copilot in-process with its real pool and index, real
children whose definitions change (``tests/fixtures/shapeshifter_server.py``, ``poison_server.py``),
and ``python -m index trust`` / ``approve`` run as a user runs them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from index.catalog.servers import load_servers
from server.copilot import Copilot
from server.settings import ServerSettings
from tests.index.trust.test_trust_cli import run
from tests.server.aggregate.test_withheld import CHANGING_SPEC, POISON_SERVER, TERM_URI
from tests.server.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    copy_home,
    text_of,
    write_servers,
)

pytestmark = pytest.mark.timeout(240)
WAIT = 120.0
SHAPESHIFTER = Path(__file__).resolve().parents[2] / "fixtures" / "shapeshifter_server.py"


def _settings(home: Path, tmp_path: Path) -> ServerSettings:
    return ServerSettings(home=home, catalog=tmp_path / "no-catalog.json", log_dir=tmp_path / "logs", crawl_timeout=60)


def _notes(tmp_path: Path, change: str) -> Any:
    """The servers of a shapeshifter ``notes``: honest at its first start (the crawl), ``change`` from its second."""
    entry = {"command": sys.executable, "args": [str(SHAPESHIFTER), "--state", str(tmp_path / "starts"), "--change", change]}
    return load_servers(write_servers(tmp_path / "servers.json", {"notes": entry}))


def _approve(home: Path, definition: str) -> None:
    """Review with ``python -m index trust --json``, then approve exactly the definition it showed."""
    review = json.loads(run(home, "trust", "--json").stdout)
    target = next(verdict["approve"] for verdict in review if verdict["id"] == definition)
    done = run(home, "approve", target)
    assert done.returncode == 0 and done.stdout.strip() == f"approved {definition}", done.stderr


def _shown(result: Any) -> dict[str, str]:
    return {found["tool"]: found["description"] for found in result.structured_content["tools"]}


async def test_a_changed_tool_the_user_approves_is_what_route_shows_at_once(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    # route kept showing the text from before the change until the child listed its tools again.
    home = copy_home(built_index, tmp_path / "home")
    async with Copilot.running(_settings(home, tmp_path), _notes(tmp_path, "benign-description"), start_now=True) as copilot:
        with anyio.fail_after(WAIT):
            await copilot.indexer.done.wait()  # the crawl was the first start: its definitions are pinned
            before = await copilot.route("read the user's notes", 5, "notes", None)
            held = await copilot.execute("notes", "read_notes", {}, None, None, None)  # the second start changed it
            assert _shown(before)["read_notes"] == "Read the user's notes and return them as text."
            assert held.is_error and "changed since it was approved" in text_of(held)

            _approve(home, "notes/read_notes")
            after = await copilot.route("read the user's notes", 5, "notes", None)
        assert _shown(after)["read_notes"] == "Return every note the user saved, newest first."
        assert copilot.approvals is not None and copilot.approvals.written == 1
        ran = await copilot.execute("notes", "read_notes", {}, None, None, None)
        assert not ran.is_error and text_of(ran) == "buy milk"


async def test_a_new_tool_held_back_then_approved_is_routed_to_at_once(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # A held-back new tool is in no index; once approved it stayed out of route until the next listing.
    home = copy_home(built_index, tmp_path / "home")
    async with Copilot.running(_settings(home, tmp_path), _notes(tmp_path, "new-tool"), start_now=True) as copilot:
        with anyio.fail_after(WAIT):
            await copilot.indexer.done.wait()
            listed = await copilot.execute("notes", "read_notes", {}, None, None, None)  # lists export_notes: held back
            before = await copilot.route("export the notes as JSON", 5, "notes", None)
            assert not listed.is_error and "export_notes" not in _shown(before)

            _approve(home, "notes/export_notes")
            after = await copilot.route("export the notes as JSON", 5, "notes", None)
        assert _shown(after)["export_notes"] == "Export the notes as JSON."
        added, sibling = copilot.index.get("notes", "export_notes"), copilot.index.get("notes", "read_notes")
        assert added is not None and sibling is not None
        assert (added.server_description, added.category) == (sibling.server_description, sibling.category)
        exported = await copilot.execute("notes", "export_notes", {}, None, None, None)
        assert not exported.is_error and text_of(exported) == '["buy milk"]'


async def test_approved_prompts_and_resource_templates_are_what_route_and_hosts_get_at_once(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    from server.aggregate.service import Aggregation

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(CHANGING_SPEC), encoding="utf-8")
    entry = {"command": sys.executable, "args": [str(POISON_SERVER), str(spec)]}
    servers = load_servers(write_servers(tmp_path / "servers.json", {"glossary": entry}))
    home = copy_home(built_index, tmp_path / "home")
    settings = _settings(home, tmp_path)
    aggregation = Aggregation(settings, lambda ctx: ("shared", None))
    async with Copilot.running(settings, servers, start_now=True) as copilot, aggregation.running(copilot):
        assert aggregation.catalog is not None and aggregation.live is not None
        with anyio.fail_after(WAIT):
            await copilot.indexer.done.wait()  # the crawl pinned the prompt and the template
            pulled = await copilot.execute("glossary", "rug_pull", {}, None, None, None)  # reworded, and a new prompt
            await aggregation.live.settled()
            withheld = await copilot.route("summarize the glossary", 5, "glossary", None, kind="prompt")
            assert not pulled.is_error and _shown(withheld) == {}

            for definition in (
                "prompt:glossary/summarize_glossary", "prompt:glossary/quiz", f"resource_template:glossary/{TERM_URI}"
            ):  # fmt: skip
                _approve(home, definition)
            prompts = await copilot.route("summarize the glossary", 5, "glossary", None, kind="prompt")
            quiz = await copilot.route("quiz the user on glossary terms", 5, "glossary", None, kind="prompt")
            templates = await copilot.route("one glossary term", 5, "glossary", None, kind="resource")
            listed = await aggregation.catalog.records({"prompt", "resource_template"})
        assert _shown(prompts)["summarize_glossary"] == "Summarize the glossary, then list every term it defines."
        assert _shown(quiz)["quiz"] == "Quiz the user on glossary terms."
        assert _shown(templates)["term"] == "One term, with its etymology."
        # What hosts list (prompts/list, resources/templates/list) comes from the same index.
        assert {(r.kind, r.name): r.description for r in listed} == {
            ("prompt", "summarize_glossary"): "Summarize the glossary, then list every term it defines.",
            ("prompt", "quiz"): "Quiz the user on glossary terms.",
            ("resource_template", "term"): "One term, with its etymology.",
        }
