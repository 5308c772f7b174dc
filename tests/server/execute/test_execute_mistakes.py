"""What a model reads back from ``execute`` when its call is wrong (the paper's "Tool Error" class).

Each test calls a real copilot (``Copilot.running``, real child pool) on the real fixture server
(``tests/fixtures/fixture_server.py``), with no search index, so nothing loads a model: the
tool's live schema is what the params are checked against. The message must let the model fix
its next call, and stay readable whatever it sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from index.catalog.servers import load_servers
from server.copilot import Copilot
from tests.server.support.copilot_harness import copilot_settings, fixture_entry, write_servers

pytestmark = pytest.mark.timeout(120)

CALL_TIMEOUT = 60


@asynccontextmanager
async def running_copilot(tmp_path: Path, **settings_extra: Any) -> AsyncIterator[Copilot]:
    """A copilot over the fixture server ``alpha`` (entered in the test's own task: its task group)."""
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")})
    settings = copilot_settings(tmp_path / "home", tmp_path, auto_index=False, **settings_extra)
    async with Copilot.running(settings, load_servers(servers)) as copilot:
        yield copilot


async def _execute(copilot: Copilot, tool: str, params: Any, confirm: Any = None) -> tuple[str, Any]:
    with anyio.fail_after(CALL_TIMEOUT):
        result = await copilot.execute("alpha", tool, params, confirm, None, None)
    return "\n".join(getattr(block, "text", "") for block in result.content), result


async def test_arguments_wrapped_in_one_more_object_get_the_exact_fix(tmp_path: Path) -> None:
    async with running_copilot(tmp_path) as copilot:
        text, result = await _execute(copilot, "add", {"params": {"a": 1, "b": 2}})
        assert result.is_error
        assert (
            "The tool's arguments are nested one level too deep, inside 'params': pass them directly as params, "
            'e.g. params={"a": 1, "b": 2}.'
        ) in text
        # The fix it names works.
        text, result = await _execute(copilot, "add", {"a": 1, "b": 2})
        assert not result.is_error and text == "3"


async def test_a_flood_of_unknown_keys_gives_a_short_message_that_still_names_what_is_missing(tmp_path: Path) -> None:
    async with running_copilot(tmp_path) as copilot:
        params = {f"key_{n}": n for n in range(300)} | {"k" * 5000: 1}
        text, result = await _execute(copilot, "add", params)
        assert result.is_error
        assert "missing required parameter 'a' (integer)" in text and "missing required parameter 'b' (integer)" in text
        assert "- … and 293 more problem(s): 293 unknown parameter(s)" in text
        assert "Expected parameters: a (integer, required); b (integer, required)." in text
        assert len(text) < 1500


async def test_a_huge_unknown_name_is_shortened_in_the_message(tmp_path: Path) -> None:
    async with running_copilot(tmp_path) as copilot:
        text, result = await _execute(copilot, "add", {"a": 1, "b": 2, "k" * 5000: 1})
        assert result.is_error
        assert "… (5,000 characters)'" in text
        assert len(text) < 600


async def test_null_for_a_required_integer_reads_got_null(tmp_path: Path) -> None:
    async with running_copilot(tmp_path) as copilot:
        text, result = await _execute(copilot, "add", {"a": None, "b": 2})
        assert result.is_error
        assert "- 'a' should be integer, got null\n" in text


async def test_params_encoded_as_json_twice_are_accepted(tmp_path: Path) -> None:
    async with running_copilot(tmp_path) as copilot:
        text, result = await _execute(copilot, "add", json.dumps(json.dumps({"a": 2, "b": 3})))
        assert not result.is_error, text
        assert text == "5"


async def test_confirm_that_is_not_a_token_is_said_to_be_no_token(tmp_path: Path) -> None:
    async with running_copilot(tmp_path) as copilot:
        text, result = await _execute(copilot, "delete_item", {"item_id": "x"}, confirm=True)
        assert result.is_error and result.structured_content["confirmation_required"] is True
        assert "The confirm you gave (true) is not a token: confirm takes only the token string this answer gives." in text
        token = result.structured_content["confirm"]
        assert f'confirm="{token}"' in text
        text, result = await _execute(copilot, "delete_item", {"item_id": "x"}, confirm=token)
        assert not result.is_error, text


async def test_a_huge_confirm_string_is_not_echoed_whole(tmp_path: Path) -> None:
    async with running_copilot(tmp_path) as copilot:
        text, result = await _execute(copilot, "delete_item", {"item_id": "x"}, confirm="c" * 20_000)
        assert result.is_error and "is unknown or was already used" in text
        assert "(20,000 characters)" in text and len(text) < 400


async def test_a_near_miss_of_a_denied_tool_is_not_pointed_at_it(tmp_path: Path) -> None:
    """execute refuses a denied tool: "did you mean" must not suggest it, nor the list name it."""
    async with running_copilot(tmp_path, deny=["alpha/structured"]) as copilot:
        text, result = await _execute(copilot, "structurd", {})
        assert result.is_error and "Unknown tool 'structurd' on server 'alpha'" in text
        assert "structured" not in text and "echo" in text, text
