"""What route says when the pool has nothing of the kind asked for (server.route.kinds)."""

from __future__ import annotations

import pytest

from server.route.kinds import missing_kind_note, route_kind, unknown_kind_message

TOOLS_ONLY = {"tool": 12}
MIXED = {"tool": 12, "prompt": 2, "resource": 1, "resource_template": 1}


def test_a_kind_no_server_offers_is_named_with_the_kinds_there_are() -> None:
    note = missing_kind_note("prompt", TOOLS_ONLY)
    assert note is not None and note.startswith("No server in the pool offers prompts")
    assert 'tools (12; kind="tool", the default)' in note
    resources = missing_kind_note("resource", {"tool": 3, "prompt": 1})
    assert resources is not None and "No server in the pool offers resources" in resources
    assert 'prompts (1; kind="prompt")' in resources
    assert missing_kind_note("tool", {"prompt": 2}) is not None


def test_kinds_the_pool_offers_need_no_note() -> None:
    assert missing_kind_note("prompt", MIXED) is None
    assert missing_kind_note("resource", {"tool": 1, "resource_template": 1}) is None
    assert missing_kind_note("any", MIXED) is None
    assert missing_kind_note("prompt", {}) is None  # nothing indexed: not a matter of kinds


def test_a_server_filter_without_the_kind_points_to_the_other_servers() -> None:
    note = missing_kind_note("prompt", MIXED, "alpha", {"tool": 3})
    assert note == (
        'Server \'alpha\' offers no prompts; it offers tools (3; kind="tool", the default). '
        "Other servers in the pool offer prompts: drop the server filter to search them."
    )
    assert missing_kind_note("prompt", MIXED, "jotter", {"tool": 3, "prompt": 2}) is None
    # The pool has none at all: the pool's note, not the filter's.
    pool_note = missing_kind_note("prompt", TOOLS_ONLY, "alpha", {"tool": 3})
    assert pool_note is not None and pool_note.startswith("No server in the pool offers prompts")


@pytest.mark.parametrize(
    ("given", "meant"),
    [(None, "tool"), ("", "tool"), ("  ", "tool"), (" prompt ", "prompt"), ("Resources", "resource"), ("TOOLS", "tool"),
     ("any", "any")],
)
def test_a_kind_is_read_as_the_model_meant_it(given: object, meant: str) -> None:
    assert route_kind(given) == meant


@pytest.mark.parametrize("given", ["widgets", "toolz", 3, ["tool"]])
def test_a_kind_that_names_no_kind_is_refused(given: object) -> None:
    assert route_kind(given) is None


def test_a_refused_kind_suggests_the_nearest_one() -> None:
    assert unknown_kind_message("promtp") == (
        "kind must be one of tool, prompt, resource, any, got 'promtp'. Did you mean kind=\"prompt\"?"
    )
    assert unknown_kind_message("widgets") == "kind must be one of tool, prompt, resource, any, got 'widgets'."
    assert unknown_kind_message(3) == "kind must be one of tool, prompt, resource, any, got 3."


def test_a_huge_kind_is_refused_without_a_search_for_its_nearest_and_shown_short() -> None:
    """difflib compared all of it (15 MB: 2.8 s on the event loop), and the message echoed it whole."""
    message = unknown_kind_message("t" * 1_000_000)
    assert len(message) < 400 and "1,000,000 characters" in message and "Did you mean" not in message
    assert 'Did you mean kind="tool"?' in unknown_kind_message("tol")
