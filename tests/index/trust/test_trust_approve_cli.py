"""``python -m index approve`` with several targets, as a person runs it: a bad target must not
hide what the good ones did, nor stop them."""

from __future__ import annotations

from pathlib import Path

from index.catalog.records import ToolRecord
from index.trust.review import TrustReviewer
from index.trust.store import TrustStore
from tests.index.trust.test_trust_cli import run


def _held_back(home: Path) -> TrustReviewer:
    reviewer = TrustReviewer(TrustStore.in_home(home))
    listing = [ToolRecord(server="notes", name=name, description=f"{name} notes.") for name in ("read", "write")]
    reviewer.review("notes", listing)
    reviewer.review("notes", [ToolRecord(server="notes", name="read", description="Read every note.")])
    reviewer.review("mail", [ToolRecord(server="mail", name="send", description="Send a mail.")])
    return reviewer


def test_a_bad_target_is_reported_and_the_others_are_approved_and_said_so(tmp_path: Path) -> None:
    reviewer = _held_back(tmp_path)
    done = run(tmp_path, "approve", "notes/read", "note/read")
    assert done.returncode == 2
    assert done.stdout.splitlines() == ["approved notes/read"]  # it happened, so it is said
    assert "no server named 'note'" in done.stderr and "Did you mean notes?" in done.stderr
    assert reviewer.held() == []

    reviewer.review("notes", [ToolRecord(server="notes", name="write", description="Write any note.")])
    done = run(tmp_path, "approve", "mail/sned", "notes")  # the first fails; the second still runs
    assert done.returncode == 2 and done.stdout.splitlines() == ["approved notes/write"]
    assert "Did you mean send?" in done.stderr and "Traceback" not in done.stderr
    assert reviewer.held() == []


def test_approving_a_server_with_nothing_held_says_so(tmp_path: Path) -> None:
    _held_back(tmp_path)
    done = run(tmp_path, "approve", "mail")
    assert done.returncode == 0 and done.stdout.strip() == "mail: nothing was waiting for approval"
