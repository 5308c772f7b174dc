"""Strict verdict parsing: a Status line or a JSON field, never a substring guess."""

from __future__ import annotations

import pytest

from evaluation.judge.prompting.verdicts import THOUGHTS_LIMIT, parse_key_points, parse_verdict


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        ("Thoughts: all key points met.\nStatus: success", "success"),
        ('Thoughts: no file.\nStatus: "failure"', "failure"),
        ("**Thoughts:** fine\n**Status:** **Success**", "success"),
        ("Thoughts: x\n- **Status**: `failure`", "failure"),
        ("Thoughts: x\nstatus: SUCCESS.", "success"),
        ("### Status: failure", "failure"),
        ("> Status: “failure”", "failure"),
        ('{"thoughts": "ok", "status": "success"}', "success"),
        ('Here you go:\n```json\n{"Verdict": "Failure", "reason": "no tool"}\n```', "failure"),
        ('I checked every call.\n{"status": "failure", "thoughts": "no file"}', "failure"),
        ('```\n{"status": "success", "extra": [1, 2]}\n```', "success"),
        # The word "success" elsewhere does not matter: the last Status line decides.
        ("The agent reported success and was successful at step 1.\nStatus: failure", "failure"),
        ("Status: success\nOn reflection the file was never written.\nStatus: failure", "failure"),
        # Commentary after the verdict word is not a second verdict, whatever words it uses.
        ("Thoughts: ok\nStatus: success (the agent did not fail)", "success"),
        ("Status: **failure** - nothing succeeded", "failure"),
        ("Status: success, not failure", "success"),
    ],
)
def test_verdicts_that_parse(reply: str, status: str) -> None:
    parsed = parse_verdict(reply)
    assert parsed is not None and parsed.status == status


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "The task was a success.",  # the paper's parser would have called this a success
        'Status: "success" or "failure"',  # an echoed template
        "Status: success/failure",
        "Status: failure | success",
        "Status: successful",
        "Status: partially",
        "Status: success\nStatus: unclear",  # the last Status line is unreadable: do not look earlier
        '{"status": "maybe"}',
        # A change of mind on the line was read as its first word.
        "Status: success? No, failure.",
        "Status: success-ish, not really: failure",
        "Status: success: no, failure",
        # JSON that does not end the reply, or is part of a sentence, is quoted, not the verdict:
        # all three were read as successes.
        'The tool said:\n```json\n{"status": "success", "files": []}\n```\nso nothing was written. Final verdict: FAILURE',
        'The agent failed: it only relayed the API reply {"status": "success"}',
        '{"verdict": "failure", "status": "success"}',  # settled by which key came first
    ],
)
def test_replies_without_a_clear_verdict_are_unparseable(reply: str) -> None:
    assert parse_verdict(reply) is None


def test_thoughts_are_extracted() -> None:
    parsed = parse_verdict("Thoughts: line one\nline two\nStatus: success")
    assert parsed is not None and parsed.thoughts == "line one\nline two"


def test_key_point_verdicts_with_cited_calls() -> None:
    parsed = parse_verdict(
        "Key point 1: met -- evidence: #2, #4\nKey point 2: not met -- evidence: none\nThoughts: x\nStatus: failure"
    )
    assert parsed is not None
    assert [(k.number, k.met, k.calls) for k in parsed.key_points] == [(1, True, [2, 4]), (2, False, [])]


def test_key_points_are_read_from_the_extraction_reply() -> None:
    assert parse_key_points("**Key Points**:\n1. find the stock\n2. **create a ppt**\n\n3. save it") == [
        "find the stock",
        "create a ppt",
        "save it",
    ]
    assert parse_key_points("Sure.\nKey Points:\n- a\n- b") == ["a", "b"]
    assert parse_key_points("I cannot help with that.") == []


@pytest.mark.parametrize("run", [" ", "*", " *", "> "])
def test_long_runs_of_decoration_parse_in_linear_time(run: str) -> None:
    # Two neighbouring character classes that both took spaces and "*" made every pattern quadratic:
    # 4,000 characters took half a second on the event loop; 400,000 would not finish within the test.
    filler = run * (400_000 // len(run))
    spaces = " " * 400_000
    reply = f"Thoughts: {filler}\n{filler}Key point 1{spaces}: met #2\n{filler}\nKey Points {filler}\n{filler}Status: {spaces}failure"
    parsed = parse_verdict(reply)
    assert parsed is not None and parsed.status == "failure"
    assert parse_verdict(filler) is None and parse_key_points(filler + "\n" + filler) == []


def test_a_huge_reply_keeps_a_bounded_part_of_its_reasoning() -> None:
    # Before: a 10 MB reply was stored whole, twice in its verdict line and in every report.
    parsed = parse_verdict("Thoughts: " + "why " * 250_000 + "\nStatus: failure")
    assert parsed is not None and parsed.status == "failure"
    assert len(parsed.thoughts) < THOUGHTS_LIMIT + 100 and parsed.thoughts.endswith("more characters cut]")

