"""Rug pulls in the child pool: a real hostile child whose definitions change between starts
(tests/fixtures/hostile/shapeshifter_server.py) is checked at every listing by server.guard."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import types

from index.catalog.servers import ServerConfig
from index.trust.review import TrustReviewer, Verdict
from index.trust.store import TrustStore
from server.errors import ToolBlockedError
from server.guard import DefinitionGuard
from server.pool.sessions import ChildPool, PoolSettings
from tests.server.pool.pool_support import call, shapeshifter

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("description", "looks like tool poisoning"),
        ("benign-description", "description changed (46 -> 47 characters)"),
        ("schema", "input schema: parameter(s) added: sidenote"),
    ],
)
async def test_a_tool_whose_definition_changes_after_a_restart_is_blocked(
    tmp_path: Path, change: str, expected: str
) -> None:
    config = shapeshifter(tmp_path / "starts", change)
    first = await call(tmp_path, config, "read_notes")
    assert not first.is_error and first.content[0].text == "buy milk"  # first start: pinned as it is

    with pytest.raises(ToolBlockedError) as blocked:
        await call(tmp_path, config, "read_notes")  # second start: the definitions changed
    message = str(blocked.value)
    assert "notes/read_notes" in message and expected in message
    assert "python -m index approve notes/read_notes" in message
    assert "id_rsa" not in message  # the hostile text never reaches the model

    untouched = await call(tmp_path, config, "delete_notes")  # unchanged tools of the server still work
    assert not untouched.is_error


async def test_approving_a_changed_tool_releases_it(tmp_path: Path) -> None:
    config = shapeshifter(tmp_path / "starts", "benign-description")
    await call(tmp_path, config, "read_notes")
    with pytest.raises(ToolBlockedError):
        await call(tmp_path, config, "read_notes")
    TrustReviewer(TrustStore.in_home(tmp_path)).approve("notes/read_notes", unseen=True)  # approve --yes
    released = await call(tmp_path, config, "read_notes")
    assert not released.is_error


async def test_a_child_that_stops_declaring_a_tool_destructive_is_caught(tmp_path: Path) -> None:
    config = shapeshifter(tmp_path / "starts", "annotations")
    await call(tmp_path, config, "read_notes")
    with pytest.raises(ToolBlockedError, match="annotations: destructiveHint true -> false"):
        await call(tmp_path, config, "delete_notes")


async def test_a_tool_added_by_an_update_waits_for_approval(tmp_path: Path) -> None:
    config = shapeshifter(tmp_path / "starts", "new-tool")
    await call(tmp_path, config, "read_notes")
    with pytest.raises(ToolBlockedError, match="appeared after its server's tools were approved"):
        await call(tmp_path, config, "export_notes")


async def test_a_poisoned_server_is_quarantined_on_its_very_first_start(tmp_path: Path) -> None:
    config = shapeshifter(tmp_path / "starts", "none", "--poisoned")
    with pytest.raises(ToolBlockedError, match="looks like tool poisoning"):
        await call(tmp_path, config, "read_notes")
    pins = json.loads((tmp_path / "trust" / "pins.json").read_text())
    pending = pins["tools"]["notes/read_notes"]["pending"]
    assert pending["reason"] == "poisoning" and {f["severity"] for f in pending["findings"]} == {"high"}
    assert not (await call(tmp_path, config, "delete_notes")).is_error


async def test_a_homoglyph_of_another_servers_tool_is_quarantined(tmp_path: Path) -> None:
    store = TrustStore.in_home(tmp_path)
    from index.catalog.records import ToolRecord

    TrustReviewer(store).review("fixture", [ToolRecord(server="fixture", name="echo")])  # another server's tool
    config = shapeshifter(tmp_path / "starts", "homoglyph", "--from-start", "1")
    with pytest.raises(ToolBlockedError, match="looks like tool poisoning"):
        await call(tmp_path, config, "\u0435cho", text="hi")


class DeadlineRecordingGuard(DefinitionGuard):
    """The real guard, noting the deadline its review of a listing ran under."""

    def __init__(self, reviewer: TrustReviewer, settings: PoolSettings) -> None:
        super().__init__(reviewer, settings)
        self.deadlines: list[float] = []

    async def review_listing(self, server: str, config: ServerConfig, tools: list[types.Tool]) -> dict[str, Verdict]:
        self.deadlines.append(anyio.current_effective_deadline())
        return await super().review_listing(server, config, tools)


async def test_the_review_of_a_listing_does_not_count_against_the_childs_time_limit(tmp_path: Path) -> None:
    # A review waits for the pins file's lock, which another copilot may hold: that wait is the
    # copilot's, and must neither cut the listing short nor be reported as the child being slow.
    settings = PoolSettings(home=tmp_path, shutdown_grace=0.5, restart_backoff=0.0, call_timeout=30.0)
    guard = DeadlineRecordingGuard(TrustReviewer(TrustStore.in_home(tmp_path)), settings)
    with anyio.fail_after(60):  # the test's own bound; the listing's is 30 s
        ours = anyio.current_effective_deadline()
        async with ChildPool({"notes": shapeshifter(tmp_path / "starts", "description")}, settings, guard=guard) as pool:
            tools = await pool.list_tools("notes")
    assert {tool.name for tool in tools} >= {"read_notes", "delete_notes"}
    assert guard.deadlines == [ours]
