"""Strict parsing of judge replies.

A verdict is read from the *last* ``Status:`` line (quotes, markdown emphasis, backticks and
case are tolerated) or, failing that, from a JSON ``status``/``verdict`` field of the object that
ends the reply (the whole reply, a fenced block, or an object on lines of its own). Nothing else:
LiveMCPBench's evaluator fell back to "does the reply contain the word success anywhere", which
turned 8 of DeepSeek-V3's 95 failures into successes. A reply we cannot parse is ``None`` here;
the judge asks again and finally records ``abstain``.
"""

from __future__ import annotations

from index.json_text import parse_json_object
import re
from typing import Literal

from pydantic import BaseModel, Field

Status = Literal["success", "failure"]

# Markdown and quoting characters that may surround the label or the value. Never two character
# classes that share characters side by side: a reply with a long run of spaces or "*" then made
# the match quadratic (4,000 characters took half a second, on the event loop, at every rerun).
_DECOR_CHARS = r"\s*_`~\"'“”‘’\[\]"
_DECOR = rf"[{_DECOR_CHARS}]*"
#: A line's lead-in: list markers and quoting as well as decoration.
_LEAD = rf"[{_DECOR_CHARS}>#\-+]*"
_STATUS_LINE = re.compile(rf"^{_LEAD}status{_DECOR}[:：]\s*(?P<rest>.*)$", re.IGNORECASE)
_STATUS_VALUE = re.compile(rf"^{_DECOR}(?P<word>success|failure)\b[{_DECOR_CHARS}.!]*(?P<tail>.*)$", re.IGNORECASE)
_THOUGHTS = re.compile(
    rf"\bthoughts{_DECOR}[:：]\s*(?P<body>.*?)(?=^{_LEAD}status{_DECOR}[:：]|\Z)",
    re.IGNORECASE | re.DOTALL | re.MULTILINE,
)
#: What follows a verdict word when the line offers a choice: "or failure", "/ failure", "| success",
#: and a second verdict word anywhere after it ("success? No, failure."): either is a change of mind.
_ALTERNATIVE = re.compile(rf"^\s*(?:or|/|\||,)\s*{_DECOR}(?:success|failure)\b", re.IGNORECASE)
_OTHER_VERDICT = re.compile(r"\b(?:success|failure)\b", re.IGNORECASE)
#: "not failure", "no failure", "non-failure": the other word negated agrees with the verdict.
_NEGATED = re.compile(r"\b(?:not|no|non)[\s-]+(?:a\s+)?$", re.IGNORECASE)
_FENCE = "```"
_KEY_POINT_LINE = re.compile(
    rf"^{_LEAD}key\s*point\s*(?P<n>\d+){_DECOR}[:：.\-]{_DECOR}(?P<met>not\s+met|unmet|met){_DECOR}(?P<rest>.*)$",
    re.IGNORECASE,
)
_CALL_REF = re.compile(r"#(\d+)")


class KeyPointVerdict(BaseModel):
    number: int
    met: bool
    #: Call numbers (``#n`` in the evidence prompt) the judge cited for this key point.
    calls: list[int] = Field(default_factory=list)
    note: str = ""


class ParsedVerdict(BaseModel):
    status: Status
    thoughts: str = ""
    key_points: list[KeyPointVerdict] = Field(default_factory=list)


def _status_from_line(rest: str) -> Status | None:
    match = _STATUS_VALUE.match(rest.strip())
    if not match:
        return None
    # "Status: success or failure" (an echoed template) offers both: not a verdict. Anything else
    # after the verdict word is commentary ("success (the agent did not fail)") and is ignored.
    word = match.group("word").lower()
    if _ALTERNATIVE.match(match.group("tail")):
        return None
    # "success? No, failure." or "success: no, failure" changes its mind on the line: ambiguous,
    # asked again (it was read as the first word). The same word again ("success, a clear success") is not.
    tail = match.group("tail")
    for other in _OTHER_VERDICT.finditer(tail):
        if other.group().lower() != word and not _NEGATED.search(tail[max(0, other.start() - 12) : other.start()]):
            return None
    return word  # type: ignore[return-value]


def _trailing_json(text: str) -> str | None:
    """The JSON object that ends ``text``: the whole text, a fenced block, or an object whose first
    line is its own; ``None`` otherwise.

    Only the end counts: a judge that quotes a tool's ``{"status": "success"}`` (in a fence or in a
    sentence) and then writes its own verdict in prose was read as a success. Plain string scans,
    no pattern: a reply of repeated fences made the old lazy pattern quadratic (64 KB, 19 s).
    """
    stripped = text.strip()
    if stripped.endswith(_FENCE) and len(stripped) > len(_FENCE):
        opening = stripped.rfind(_FENCE, 0, len(stripped) - len(_FENCE))
        if opening < 0 or (opening > 0 and stripped[opening - 1] != "\n"):
            return None
        body = stripped[opening + len(_FENCE) : len(stripped) - len(_FENCE)]
        if body[:4].lower() == "json":
            body = body[4:]
        body = body.strip()
        return body if body.startswith("{") and body.endswith("}") else None
    if not stripped.endswith("}"):
        return None
    if stripped.startswith("{"):
        return stripped
    own_line = stripped.rfind("\n{")
    return stripped[own_line + 1 :] if own_line >= 0 else None


def _status_from_json(text: str) -> tuple[Status, str] | None:
    candidate = _trailing_json(text)
    if candidate is None:
        return None
    data = parse_json_object(candidate)
    if data is None:
        return None
    fields = {str(key).lower(): value for key, value in data.items()}
    found = {
        value.strip().strip("\"'").lower()
        for key in ("status", "verdict")
        if isinstance(value := fields.get(key), str) and value.strip().strip("\"'").lower() in ("success", "failure")
    }
    if len(found) != 1:
        # {"verdict": "failure", "status": "success"} says both: asked again, as a Status line
        # that changes its mind is (it was settled by which key came first).
        return None
    thoughts = fields.get("thoughts") or fields.get("reasoning") or fields.get("reason") or ""
    return found.pop(), str(thoughts)  # type: ignore[return-value]


def parse_verdict(text: str | None) -> ParsedVerdict | None:
    """The verdict in a judge reply, or ``None`` when it states none unambiguously."""
    if not text or not text.strip():
        return None
    status: Status | None = None
    thoughts = ""
    status_lines = [match for line in text.splitlines() if (match := _STATUS_LINE.match(line))]
    if status_lines:
        # The last Status line decides; an ambiguous last line is unparseable, not "look earlier".
        status = _status_from_line(status_lines[-1].group("rest"))
    if status is None and not status_lines:
        from_json = _status_from_json(text)
        if from_json:
            status, thoughts = from_json
    if status is None:
        return None
    if not thoughts:
        match = _THOUGHTS.search(text)
        if match:
            thoughts = match.group("body").strip().lstrip("*_`~ ").strip()
        else:
            thoughts = "\n".join(line for line in text.splitlines() if not _STATUS_LINE.match(line)).strip()
    return ParsedVerdict(status=status, thoughts=_capped(thoughts), key_points=parse_key_point_verdicts(text))


#: Characters of a judge's reasoning kept: a 10 MB reply was stored whole, twice per verdict line,
#: and again in every report and cache entry.
THOUGHTS_LIMIT = 8000


def _capped(thoughts: str) -> str:
    if len(thoughts) <= THOUGHTS_LIMIT:
        return thoughts
    return f"{thoughts[:THOUGHTS_LIMIT]} … [{len(thoughts) - THOUGHTS_LIMIT} more characters cut]"


def parse_key_point_verdicts(text: str) -> list[KeyPointVerdict]:
    """``Key point 2: not met -- evidence: #3, #5`` lines of the evidence prompt's reply."""
    verdicts: dict[int, KeyPointVerdict] = {}
    for line in text.splitlines():
        match = _KEY_POINT_LINE.match(line)
        if not match:
            continue
        number = int(match.group("n"))
        met = match.group("met").lower() == "met"
        rest = match.group("rest").strip(" -—–:;,.")
        verdicts[number] = KeyPointVerdict(
            number=number, met=met, calls=[int(n) for n in _CALL_REF.findall(rest)], note=rest[:500]
        )
    return [verdicts[number] for number in sorted(verdicts)]


_KEY_POINTS_HEADER = re.compile(rf"\bkey\s*points{_DECOR}[:：]?{_DECOR}", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(?P<item>.+)$")


def parse_key_points(text: str | None) -> list[str]:
    """Numbered or bulleted items after the last "Key Points" header of an extraction reply."""
    if not text:
        return []
    headers = list(_KEY_POINTS_HEADER.finditer(text))
    body = text[headers[-1].end() :] if headers else text
    items = []
    for line in body.splitlines():
        match = _LIST_ITEM.match(line)
        if match:
            item = match.group("item").strip().strip("*_` ").strip()
            if item:
                items.append(item)
    return items
