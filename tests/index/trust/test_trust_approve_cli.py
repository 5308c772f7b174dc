"""``python -m index approve`` as a person runs it: a bad target must not hide what the good ones
did, nor stop them; and an approval takes only the definition a review showed (a real child that
changes its tools in between: ``tests/fixtures/hostile/shapeshifter_server.py`` in a real pool)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from index.catalog.records import ToolRecord
from index.trust.review import ApprovalError, TrustReviewer
from index.trust.store import TrustStore
from server.errors import ToolBlockedError
from tests.server.pool.pool_support import call, shapeshifter
from tests.support.cli import index_cli


def _held_back(home: Path) -> TrustReviewer:
    reviewer = TrustReviewer(TrustStore.in_home(home))
    listing = [ToolRecord(server="notes", name=name, description=f"{name} notes.") for name in ("read", "write")]
    reviewer.review("notes", listing)
    reviewer.review("notes", [ToolRecord(server="notes", name="read", description="Read every note.")])
    reviewer.review("mail", [ToolRecord(server="mail", name="send", description="Send a mail.")])
    return reviewer


def test_a_bad_target_is_reported_and_the_others_are_approved_and_said_so(tmp_path: Path) -> None:
    reviewer = _held_back(tmp_path)
    assert index_cli(tmp_path, "trust").returncode == 1  # the review: a bare approve takes what it showed
    done = index_cli(tmp_path, "approve", "notes/read", "note/read")
    assert done.returncode == 2
    assert done.stdout.splitlines() == ["approved notes/read"]  # it happened, so it is said
    assert "no server named 'note'" in done.stderr and "Did you mean notes?" in done.stderr
    assert reviewer.held() == []

    reviewer.review("notes", [ToolRecord(server="notes", name="write", description="Write any note.")])
    assert index_cli(tmp_path, "trust").returncode == 1
    done = index_cli(tmp_path, "approve", "mail/sned", "notes")  # the first fails; the second still runs
    assert done.returncode == 2 and done.stdout.splitlines() == ["approved notes/write"]
    assert "Did you mean send?" in done.stderr and "Traceback" not in done.stderr
    assert reviewer.held() == []


@pytest.mark.parametrize("target", ["notes/", "prompt:notes/", "resource_template:notes/"])
def test_a_slash_with_no_name_after_it_approves_nothing(tmp_path: Path, target: str) -> None:
    # Before: "notes/" (a script's "notes/$TOOL" with TOOL empty) approved every held tool of the server.
    reviewer = _held_back(tmp_path)
    held = reviewer.held()
    done = index_cli(tmp_path, "approve", "--yes", target)
    assert done.returncode == 2 and done.stdout == ""
    assert f"'{target}' names no " in done.stderr and "after the '/'" in done.stderr
    assert reviewer.held() == held


def test_approving_a_server_with_nothing_held_says_so(tmp_path: Path) -> None:
    _held_back(tmp_path)
    done = index_cli(tmp_path, "approve", "mail")
    assert done.returncode == 0 and done.stdout.strip() == "mail: nothing was waiting for approval"


@pytest.mark.parametrize("home", ["a-file", "a-file/home"])
def test_a_home_that_is_no_directory_is_one_line_not_a_traceback(tmp_path: Path, home: str) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    for command in (["trust"], ["trust", "--json"], ["approve", "notes/read"], ["approve", "--yes", "notes"]):
        done = index_cli(tmp_path / home, *command)
        assert done.returncode == 2, command
        assert done.stderr.startswith("error: cannot use ") and done.stderr.count("\n") == 1, done.stderr
        assert f"COPILOT_HOME ({tmp_path / home}) must be a writable directory" in done.stderr
        assert done.stdout == ""


async def test_an_approval_takes_only_the_definition_reviewed(tmp_path: Path) -> None:
    """A real child changes read_notes, the user reviews it, the child changes it again before the
    approval: neither the reviewed hash nor a bare approve may take the unreviewed definition."""
    state = tmp_path / "starts"
    await call(tmp_path, shapeshifter(state, "benign-description"), "read_notes")  # start 1: pinned
    with pytest.raises(ToolBlockedError):
        await call(tmp_path, shapeshifter(state, "benign-description"), "read_notes")  # start 2: changed
    shown = index_cli(tmp_path, "trust")
    assert shown.returncode == 1, shown.stderr
    (reviewed,) = json.loads(index_cli(tmp_path, "trust", "--json").stdout)
    assert reviewed["approve"] == f"notes/read_notes@{reviewed['hash'][:16]}"
    assert f"pending definition: @{reviewed['hash'][:16]}" in shown.stdout
    assert f"approve notes/read_notes@{reviewed['hash'][:16]}" in shown.stdout

    schema = shapeshifter(state, "schema")
    with pytest.raises(ToolBlockedError):
        await call(tmp_path, schema, "read_notes")  # start 3: changed again, after the review
    waiting = TrustReviewer(TrustStore.in_home(tmp_path)).verdict("notes", "read_notes")
    assert waiting is not None and waiting.hash is not None and waiting.hash != reviewed["hash"]
    now = waiting.hash[:16]

    refused = index_cli(tmp_path, "approve", reviewed["approve"])
    assert refused.returncode == 2 and refused.stdout == ""
    assert (
        f"notes/read_notes changed since the review: you reviewed @{reviewed['hash'][:16]}, but the definition "
        f"waiting now is @{now}. Nothing was approved." in refused.stderr
    )
    assert "'python -m index trust --server notes'" in refused.stderr
    assert f"'python -m index approve notes/read_notes@{now}'" in refused.stderr
    bare = index_cli(tmp_path, "approve", "notes/read_notes")  # the habit: the last review showed another one
    assert bare.returncode == 2 and f"(@{now}) was not shown by a review" in bare.stderr
    whole = index_cli(tmp_path, "approve", "notes")
    assert whole.returncode == 2 and f"notes/read_notes@{now}" in whole.stderr
    with pytest.raises(ToolBlockedError, match="parameter\\(s\\) added: sidenote"):
        await call(tmp_path, schema, "read_notes")  # still held: nothing was approved

    (second,) = json.loads(index_cli(tmp_path, "trust", "--json").stdout)  # the user reviews what waits now
    assert second["hash"] == waiting.hash
    approved = index_cli(tmp_path, "approve", second["approve"])
    assert approved.returncode == 0 and approved.stdout.strip() == "approved notes/read_notes"
    assert not (await call(tmp_path, schema, "read_notes")).is_error


def test_a_bare_approve_takes_what_the_last_review_showed_and_yes_takes_anything(tmp_path: Path) -> None:
    reviewer = _held_back(tmp_path)  # notes/read changed, never listed
    refused = index_cli(tmp_path, "approve", "notes/read")
    assert refused.returncode == 2 and "was not shown by a review" in refused.stderr and "--yes" in refused.stderr
    assert [v.id for v in reviewer.held()] == ["notes/read"]
    assert index_cli(tmp_path, "trust", "--no-diff").returncode == 1  # listed, even without diffs: shown
    assert index_cli(tmp_path, "approve", "notes/read").stdout.strip() == "approved notes/read"

    reviewer.review("notes", [ToolRecord(server="notes", name="read", description="Read and send every note.")])
    done = index_cli(tmp_path, "approve", "--yes", "notes/read")  # a script that decided without a review
    assert done.returncode == 0 and done.stdout.strip() == "approved notes/read"


def test_approve_targets_with_hashes_are_checked(tmp_path: Path) -> None:
    reviewer = _held_back(tmp_path)
    (verdict,) = reviewer.held()
    assert verdict.hash is not None
    with pytest.raises(ApprovalError, match="a hash names one definition"):
        reviewer.approve(f"notes@{verdict.hash[:16]}")
    with pytest.raises(ApprovalError, match="no tool 'read@abc1'.*at least 16 hex digits"):
        reviewer.approve("notes/read@abc1")
    assert reviewer.approve(f"notes/read@{verdict.hash.upper()}") == ["notes/read"]  # the whole hash, any case
    with pytest.raises(ApprovalError, match=f"already approved, as @{verdict.hash[:16]}"):
        reviewer.approve(f"notes/read@{verdict.hash[:16]}")
