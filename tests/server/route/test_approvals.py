"""A definition the user approves is what ``route`` shows right after the approval
(``server.route.approvals``): the real copilot in-process with its real pool and index, real
children whose definitions change (``tests/fixtures/hostile/shapeshifter_server.py``, ``poison_server.py``),
and ``python -m index trust`` / ``approve`` run as a user runs them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from index.catalog.servers import load_servers
from server.copilot import Copilot
from tests.server.support.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    copilot_settings,
    copilot_with_aggregation,
    copy_home,
    fixture_entry,
    shapeshifter_entry,
    text_of,
    write_servers,
)
from tests.server.support.glossary_support import CHANGING_SPEC, TERM_URI, glossary_servers
from tests.support.cli import approve_as_user

pytestmark = pytest.mark.timeout(240)
WAIT = 120.0


@asynccontextmanager
async def _notes_copilot(built: Path, tmp_path: Path, change: str) -> AsyncIterator[tuple[Path, Copilot]]:
    """(home, copilot): a copilot over a shapeshifter ``notes``, honest at its first start, ``change``
    from its second; yielded once its background crawl (that first start) pinned the definitions."""
    home = copy_home(built, tmp_path / "home")
    entry = shapeshifter_entry(tmp_path / "starts", change)
    servers = load_servers(write_servers(tmp_path / "servers.json", {"notes": entry}))
    async with Copilot.running(copilot_settings(home, tmp_path), servers, start_now=True) as copilot:
        with anyio.fail_after(WAIT):
            await copilot.indexer.done.wait()
        yield home, copilot


def _shown(result: Any) -> dict[str, str]:
    return {found["tool"]: found["description"] for found in result.structured_content["tools"]}


async def test_a_changed_tool_the_user_approves_is_what_route_shows_at_once(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    # route kept showing the text from before the change until the child listed its tools again.
    async with _notes_copilot(built_index, tmp_path, "benign-description") as (home, copilot):
        with anyio.fail_after(WAIT):
            before = await copilot.route("read the user's notes", 5, "notes", None)
            held = await copilot.execute("notes", "read_notes", {}, None, None, None)  # the second start changed it
            assert _shown(before)["read_notes"] == "Read the user's notes and return them as text."
            assert held.is_error and "changed since it was approved" in text_of(held)

            approve_as_user(home, "notes/read_notes")
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
    async with _notes_copilot(built_index, tmp_path, "new-tool") as (home, copilot):
        with anyio.fail_after(WAIT):
            listed = await copilot.execute("notes", "read_notes", {}, None, None, None)  # lists export_notes: held back
            before = await copilot.route("export the notes as JSON", 5, "notes", None)
            assert not listed.is_error and "export_notes" not in _shown(before)

            approve_as_user(home, "notes/export_notes")
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
    servers = load_servers(glossary_servers(tmp_path, CHANGING_SPEC))
    home = copy_home(built_index, tmp_path / "home")
    async with copilot_with_aggregation(copilot_settings(home, tmp_path), servers) as (copilot, aggregation):
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
                approve_as_user(home, definition)
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


async def test_hosts_hear_of_an_approval_when_neither_route_nor_execute_is_called(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # The background check of the pins (Copilot._watch_approvals) writes the approved definition and
    # tells the listeners (the aggregation, which tells hosts) with no request to the copilot at all.
    async with _notes_copilot(built_index, tmp_path, "benign-description") as (home, copilot):
        heard: list[tuple[str, set[str]]] = []
        told = anyio.Event()

        async def listener(server: str, kinds: set[str]) -> None:
            heard.append((server, kinds))
            told.set()

        with anyio.fail_after(WAIT):
            held = await copilot.execute("notes", "read_notes", {}, None, None, None)  # the second start changed it
            assert held.is_error and "changed since it was approved" in text_of(held)
            copilot.index_change_listeners.append(listener)

            approve_as_user(home, "notes/read_notes")
            await told.wait()
        assert heard == [("notes", {"tools"})]
        indexed = copilot.index.get("notes", "read_notes")
        assert indexed is not None and indexed.description == "Return every note the user saved, newest first."


async def test_a_sync_touching_several_servers_reads_the_index_once_for_routes_description(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each listener call (one per server the sync touched) refreshed route's description, reading
    # every record of the index again for each server.
    home = copy_home(built_index, tmp_path / "home")
    entries = {"alpha": fixture_entry("alpha"), "beta": fixture_entry("beta")}
    servers = load_servers(write_servers(tmp_path / "servers.json", entries))
    settings = copilot_settings(home, tmp_path, auto_index=False)
    async with copilot_with_aggregation(settings, servers) as (copilot, _aggregation):
        index = copilot.index
        read_at: list[str | None] = []  # the index build each full read of the index saw
        every_record = index.records

        def records() -> Any:
            state = index.state()
            read_at.append(state.build_id if state is not None else None)
            return every_record()

        monkeypatch.setattr(index, "records", records)
        approved = [
            record.model_copy(update={"description": f"{record.description} (approved wording)"})
            for record in (index.get("alpha", "echo"), index.get("beta", "add"))
            if record is not None
        ]
        assert len(approved) == 2
        # As ApprovedDefinitions writes approved definitions: these records only, nothing deleted.
        await anyio.to_thread.run_sync(lambda: index.sync(approved, servers=[]))
        build = index.state().build_id
        with anyio.fail_after(WAIT):
            await copilot._approvals_indexed({"alpha": {"tools"}, "beta": {"tools"}})
        assert read_at.count(build) == 1, read_at
