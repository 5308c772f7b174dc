"""Allow/deny lists, confirmation rules, read-only mode and confirm tokens (server.policy)."""

from __future__ import annotations

import json

import pytest

from index.catalog.servers import ServerConfig, parse_servers
from server.errors import ConfirmationRequiredError, PolicyDeniedError
from server.policy import ConfirmationStore, Policy

DESTRUCTIVE = {"destructiveHint": True, "readOnlyHint": False}
READ_ONLY = {"readOnlyHint": True}


def _servers() -> dict[str, ServerConfig]:
    return {
        "files": ServerConfig(name="files", command="x"),
        "shady": ServerConfig(name="shady", command="x", trusted=False),
    }


def test_everything_allowed_by_default() -> None:
    policy = Policy()
    assert policy.tool_allowed("any", "tool")
    assert policy.server_visible("any")
    policy.check_allowed("any", "tool")


def test_deny_patterns_match_server_and_tool_globs() -> None:
    policy = Policy(deny=["files/delete_*", "secrets"])
    assert not policy.tool_allowed("files", "delete_all")
    assert policy.tool_allowed("files", "read")
    assert not policy.tool_allowed("secrets", "read")
    assert not policy.server_visible("secrets")
    assert policy.server_visible("files")  # only some of its tools are denied
    with pytest.raises(PolicyDeniedError) as caught:
        policy.check_allowed("files", "delete_all")
    assert "deny list" in str(caught.value)


def test_allow_list_restricts_and_deny_wins() -> None:
    policy = Policy(allow=["files", "web/fetch"], deny=["files/rm"])
    assert policy.tool_allowed("files", "read")
    assert policy.tool_allowed("web", "fetch")
    assert not policy.tool_allowed("web", "post")
    assert not policy.tool_allowed("files", "rm")
    assert not policy.server_visible("other")
    with pytest.raises(PolicyDeniedError) as caught:
        policy.check_allowed("web", "post")
    assert "allow list" in str(caught.value)


def test_destructive_tools_need_confirmation() -> None:
    policy = Policy(servers=_servers())
    risk = policy.assess("files", "rm", DESTRUCTIVE)
    assert risk.needs_confirmation and not risk.refused_read_only
    assert "destructive" in risk.reason
    assert not policy.assess("files", "read", None).needs_confirmation
    assert not policy.assess("files", "read", READ_ONLY).needs_confirmation


def test_snake_case_annotations_are_understood() -> None:
    assert Policy().assess("s", "t", {"destructive_hint": True}).needs_confirmation


def test_unannotated_tools_of_untrusted_servers_need_confirmation() -> None:
    policy = Policy(servers=_servers(), untrusted=["extra-*"])
    assert policy.assess("shady", "anything", None).needs_confirmation
    assert policy.assess("extra-web", "anything", None).needs_confirmation
    assert not policy.assess("shady", "lookup", READ_ONLY).needs_confirmation
    assert not policy.assess("shady", "lookup", {"destructiveHint": False}).needs_confirmation
    assert not policy.assess("files", "anything", None).needs_confirmation


def test_read_only_mode_refuses_instead_of_asking() -> None:
    policy = Policy(read_only=True, servers=_servers())
    risk = policy.assess("files", "rm", DESTRUCTIVE)
    assert risk.refused_read_only
    with pytest.raises(PolicyDeniedError) as caught:
        policy.check_read_only("files", "rm", risk)
    assert "read-only mode" in str(caught.value)
    assert policy.assess("files", "write", {"readOnlyHint": False}).refused_read_only
    assert not policy.assess("files", "read", READ_ONLY).needs_confirmation


def test_read_only_mode_allows_only_declared_read_only_tools_and_the_allowlist() -> None:
    """Issue 9 item 19: an unannotated tool (307 of the 488 crawled) may write, so it is refused."""
    policy = Policy(read_only=True, servers=_servers(), read_only_allow=["files/stat", "calc"])
    unannotated = policy.assess("files", "write_file", None)
    assert unannotated.refused_read_only and "does not declare itself read-only" in unannotated.reason
    assert not policy.assess("files", "stat", None).needs_confirmation  # allowlisted tool
    assert not policy.assess("calc", "anything", None).needs_confirmation  # allowlisted server
    assert not policy.read_only_permits("files", "write_file", {"readOnlyHint": False, "destructiveHint": False})


def test_servers_file_overrides_correct_what_a_child_claims() -> None:
    servers = parse_servers(
        json.dumps(
            {
                "mcpServers": {
                    "excel": {
                        "command": "x",
                        "annotations": {
                            "excel_read_sheet": {"readOnlyHint": True, "destructiveHint": False},
                            "*": {"openWorldHint": False},
                        },
                        "confirm": ["excel_format_*"],
                    }
                }
            }
        )
    ).servers
    claimed = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True}
    policy = Policy(servers=servers)
    assert not policy.assess("excel", "excel_read_sheet", claimed).needs_confirmation
    assert policy.annotations("excel", "excel_read_sheet", claimed) == {
        "readOnlyHint": True, "destructiveHint": False, "openWorldHint": False,
    }
    assert policy.assess("excel", "excel_write_to_sheet", claimed).needs_confirmation
    listed = policy.assess("excel", "excel_format_range", {"destructiveHint": False})
    assert listed.needs_confirmation and "'confirm' list" in listed.reason
    assert Policy(servers=servers, read_only=True).read_only_permits("excel", "excel_read_sheet", claimed)


def test_read_only_mode_refuses_a_tool_the_servers_file_marks_destructive_whatever_the_child_claims() -> None:
    # Before: the child's readOnlyHint: true alone let it through, the override notwithstanding.
    servers = parse_servers(
        json.dumps({"mcpServers": {"notes": {"command": "x", "annotations": {"wipe": {"destructiveHint": True}}}}})
    ).servers
    claimed = {"readOnlyHint": True}
    policy = Policy(servers=servers, read_only=True, confirm="never")
    assert not policy.read_only_permits("notes", "wipe", claimed)
    risk = policy.assess("notes", "wipe", claimed)
    assert risk.refused_read_only and "annotated as destructive" in risk.reason
    assert policy.read_only_permits("notes", "read", claimed)


@pytest.mark.parametrize(
    ("mode", "destructive", "untrusted_unannotated", "plain"),
    [
        ("destructive", True, True, False),
        ("untrusted", False, True, False),
        ("always", True, True, True),
        ("never", False, False, False),
    ],
)
def test_confirm_modes(mode: str, destructive: bool, untrusted_unannotated: bool, plain: bool) -> None:
    policy = Policy(servers=_servers(), confirm=mode)  # type: ignore[arg-type]
    assert policy.assess("files", "rm", DESTRUCTIVE).needs_confirmation is destructive
    assert policy.assess("shady", "anything", None).needs_confirmation is untrusted_unannotated
    assert policy.assess("files", "read", READ_ONLY).needs_confirmation is plain


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_confirm_token_is_single_use_and_bound_to_the_call() -> None:
    store = ConfirmationStore(ttl=60)
    token = store.issue("files", "rm", {"path": "a"})
    with pytest.raises(ConfirmationRequiredError) as caught:
        store.redeem(token, "files", "rm", {"path": "b"})
    assert "different call" in str(caught.value)
    store.redeem(token, "files", "rm", {"path": "a"})
    with pytest.raises(ConfirmationRequiredError) as caught:
        store.redeem(token, "files", "rm", {"path": "a"})
    assert "unknown or was already used" in str(caught.value)


def test_confirm_token_expires() -> None:
    clock = FakeClock()
    store = ConfirmationStore(ttl=60, clock=clock)
    token = store.issue("files", "rm", {})
    clock.now += 61
    with pytest.raises(ConfirmationRequiredError) as caught:
        store.redeem(token, "files", "rm", {})
    assert "expired" in str(caught.value)


def test_params_order_does_not_change_the_binding() -> None:
    store = ConfirmationStore()
    token = store.issue("s", "t", {"a": 1, "b": 2})
    store.redeem(token, "s", "t", {"b": 2, "a": 1})


def test_patterns_naming_no_server_are_reported_with_the_nearest_name(caplog: pytest.LogCaptureFixture) -> None:
    servers = {name: ServerConfig(name=name, command="x") for name in ("time", "files")}
    with caplog.at_level("WARNING", logger="server.policy"):
        policy = Policy(deny=["tim/*", "files/delete_*"], allow=["*"], untrusted=["filez"], servers=servers)
    assert policy.unmatched() == [
        "COPILOT_DENY pattern 'tim/*' names no server of the servers file: it has no effect. Did you mean 'time'?",
        "COPILOT_UNTRUSTED pattern 'filez' names no server of the servers file: it has no effect. Did you mean 'files'?",
    ]
    assert [r.getMessage() for r in caplog.records] == policy.unmatched()
    policy.update_servers({**servers, "tim": ServerConfig(name="tim", command="x")})
    assert len(policy.unmatched()) == 1
