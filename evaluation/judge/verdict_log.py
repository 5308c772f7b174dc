"""``verdicts.jsonl``: one line per judged task, appended and flushed as each verdict arrives,
so an interrupted run loses nothing and a rerun judges only what is missing.

A line an interrupted write cut short is moved, as it is, to ``verdicts.damaged.jsonl`` by the
next judge run (:meth:`VerdictLog.set_aside_damaged`), which judges its task again: kept for
anyone who wants it, and not warned about on every later run."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Literal, TextIO

from pydantic import BaseModel, Field, ValidationError

from evaluation.judge.prompting.verdicts import KeyPointVerdict
from server.trajectory.records import utc_now

logger = logging.getLogger(__name__)

Verdict = Literal["success", "failure", "abstain"]


class JudgeVote(BaseModel):
    """One judge model's verdict on one task."""

    model: str
    verdict: Verdict
    thoughts: str = ""
    key_point_verdicts: list[KeyPointVerdict] = Field(default_factory=list)
    #: Replies needed to get a parseable verdict (1 = first reply parsed).
    attempts: int = 1
    prompt_hash: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    cached: bool = False
    #: The last reply, kept when it could not be parsed (why the vote is an abstain).
    unparsed_reply: str | None = None


class VerdictRecord(BaseModel):
    task_id: str
    category: str
    #: The question the judge was given, and the trajectory's own when it differed.
    question: str = ""
    trajectory_question: str | None = None
    verdict: Verdict
    key_points: list[str] = Field(default_factory=list)
    key_points_source: Literal["annotated", "extracted", "fallback"] = "annotated"
    thoughts: str = ""
    #: The model, or ``jury(a,b,c)``.
    judge_model: str
    prompt: str
    prompt_hash: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    judges: list[JudgeVote] = Field(default_factory=list)
    #: What the verdict depends on; a rerun re-judges a task only when one of these changed.
    config_hash: str
    trajectory_hash: str
    #: :meth:`Job.inputs_hash`; absent from verdicts of earlier versions (then the trajectory's decides).
    inputs_hash: str | None = None
    sources: list[str] = Field(default_factory=list)
    ts: str = Field(default_factory=utc_now)


class VerdictLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: TextIO | None = None

    def read(self) -> list[VerdictRecord]:
        """Existing records; damaged lines (an interrupted write) are skipped with a warning."""
        records: list[VerdictRecord] = []
        if not self.path.is_file():
            return records
        # utf-8-sig: a file someone saved in a Windows editor keeps its first verdict.
        with self.path.open(encoding="utf-8-sig", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    records.append(VerdictRecord.model_validate_json(line))
                except (ValidationError, ValueError):
                    logger.warning(
                        "%s:%d: unreadable verdict line skipped (it will be judged again)", self.path, number
                    )
        return records

    @property
    def damaged_path(self) -> Path:
        return self.path.with_name(self.path.stem + ".damaged.jsonl")

    def set_aside_damaged(self) -> int:
        """Move unreadable lines to :attr:`damaged_path` (appended, byte for byte), keep the rest in
        place (atomically rewritten); the number moved. Call only while holding the output lock."""
        if not self.path.is_file():
            return 0
        kept: list[bytes] = []
        damaged: list[tuple[int, bytes]] = []
        with self.path.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                text = line.decode("utf-8", "replace").lstrip("\ufeff") if number == 1 else line.decode("utf-8", "replace")
                if not text.strip():
                    continue
                try:
                    VerdictRecord.model_validate_json(text)
                except (ValidationError, ValueError):
                    damaged.append((number, line))
                else:
                    kept.append(line if line.endswith(b"\n") else line + b"\n")
        if not damaged:
            return 0
        with self.damaged_path.open("ab") as aside:
            for _number, line in damaged:
                aside.write(line if line.endswith(b"\n") else line + b"\n")
            aside.flush()
            os.fsync(aside.fileno())
        descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.writelines(kept)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        lines = ", ".join(str(number) for number, _line in damaged[:10]) + (", …" if len(damaged) > 10 else "")
        logger.warning(
            "%s: %d unreadable verdict line(s) (line %s; an interrupted write) moved to %s; their tasks are judged again",
            self.path, len(damaged), lines, self.damaged_path.name,
        )
        return len(damaged)

    def append(self, record: VerdictRecord) -> None:
        if self._file is None:
            self._file = self._open()
        self._file.write(record.model_dump_json() + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def _open(self) -> TextIO:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a", encoding="utf-8")
        if _lacks_final_newline(self.path):
            # A write cut short (SIGKILL, a full disk) or an editor that dropped the final newline:
            # the next verdict must start its own line, or both it and that line are lost.
            handle.write("\n")
        return handle

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _lacks_final_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        if handle.seek(0, os.SEEK_END) == 0:
            return False
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) != b"\n"


def latest_by_task(records: list[VerdictRecord]) -> dict[str, VerdictRecord]:
    latest: dict[str, VerdictRecord] = {}
    for record in records:
        latest[record.task_id] = record
    return latest
