"""Learning the usage prior from trajectory logs (the copilot's JSONL, see the README's log format).

A trajectory is one JSONL file. Each ``execute`` event whose ``result`` is not an error (and that
has no copilot ``error``) counts its ``server``/``tool`` once for the file, however often it ran.
Only those fields are read, so logs of older and newer copilots count alike. Given the judge's
``verdicts.jsonl``, only trajectories of tasks judged a success count (a task is its
``session_start``'s ``task_id``, else the file's name, as a benchmark run names it): the tools that
solved tasks, not the ones an agent tried. A file is a trajectory when it has a ``session_start``
(every writer begins with one, and the judge skips a log without it too). What cannot be read is
reported, never fatal: a line that is not JSON (file and line), a file that is no trajectory (e.g.
another program's JSONL), an unreadable file.

The judge's readers (``evaluation.trajectories``, ``evaluation.judge.verdict_log``) and the log's
models (``server.trajectory.records``) are not used: ``index`` imports neither package, and these
few fields are all a count needs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from index.json_text import parse_json
from index.errors import ConfigError
from index.usage.prior import UsagePrior

#: A benchmark run directory has this file; its tasks' logs are at its top level, and what is below
#: (the tasks' workspaces) are the agents' outputs, not logs.
_RUN_SUMMARY = "summary.json"


@dataclass
class Learned:
    prior: UsagePrior
    executes: int = 0  # execute events read
    unsuccessful: int = 0  # trajectories left out: their task was judged, not a success
    unjudged: int = 0  # trajectories left out: the verdicts hold none for their task
    problems: list[str] = field(default_factory=list)

    @property
    def files(self) -> int:
        """Trajectories counted."""
        return self.prior.trajectories

    @property
    def counted(self) -> int:
        """(trajectory, tool) pairs counted."""
        return sum(sum(tools.values()) for tools in self.prior.tools.values())


def log_files(paths: Iterable[Path]) -> tuple[list[Path], list[str]]:
    """Every ``*.jsonl`` under ``paths`` (files as given, directories recursively; a benchmark run's
    workspaces are skipped), each once, sorted; and what was not found."""
    found: dict[Path, Path] = {}
    missing = []
    for path in paths:
        if path.is_file():
            found.setdefault(path.resolve(), path)
        elif path.is_dir():
            pattern = "*.jsonl" if (path / _RUN_SUMMARY).is_file() else "**/*.jsonl"
            for file in path.glob(pattern):
                if file.is_file():
                    found.setdefault(file.resolve(), file)
        else:
            missing.append(f"{path}: no such file or directory")
    return sorted(found.values()), missing


@dataclass
class Verdicts:
    """The tasks a judge's ``verdicts.jsonl`` calls a success, and every task it judged."""

    path: Path
    successful: set[str]
    judged: set[str]


def successful_tasks(path: Path) -> tuple[Verdicts, list[str]]:
    """The tasks the judge's ``verdicts.jsonl`` (or the judge directory holding it) calls a success,
    the last verdict of a task winning; and the lines it could not read. A file without one
    readable verdict is a :class:`ConfigError` (it is no judge's, or not this one's)."""
    if path.is_dir():
        path = path / "verdicts.jsonl"
    verdicts: dict[str, object] = {}
    problems: list[str] = []
    try:
        for number, record in _json_lines(path):
            if not isinstance(record, dict) or not isinstance(record.get("task_id"), str) or "verdict" not in record:
                problems.append(f"{path}:{number}: not a verdict (task_id and verdict); skipped")
                continue
            verdicts[record["task_id"]] = record["verdict"]
    except OSError as error:
        raise ConfigError(
            f"{path}: cannot read the judge's verdicts ({error.strerror or error}); pass the verdicts.jsonl "
            "of a judged run (python -m evaluation.judge writes it into its output directory)."
        ) from None
    if not verdicts:
        raise ConfigError(
            f"{path}: no verdict in it ({len(problems)} line(s) that are none); pass the verdicts.jsonl of a judged "
            "run (python -m evaluation.judge writes it into its output directory)."
        )
    successful = {task for task, verdict in verdicts.items() if verdict == "success"}
    return Verdicts(path=path, successful=successful, judged=set(verdicts)), problems


def learn_usage(paths: Iterable[Path], *, verdicts: Verdicts | None = None) -> Learned:
    """The prior of every trajectory under ``paths`` (only those of the tasks ``verdicts`` calls a
    success, when given)."""
    files, problems = log_files(paths)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    learned = Learned(UsagePrior(), problems=problems)
    trajectories = 0
    for path in files:
        read = _read(path, learned)
        if read is None:
            continue
        task, succeeded = read
        if verdicts is not None and task not in verdicts.successful:
            if task in verdicts.judged:
                learned.unsuccessful += 1
            else:
                learned.unjudged += 1
            continue
        trajectories += 1
        for server, tool in succeeded:
            counts[server][tool] += 1
    learned.prior = UsagePrior(
        learned_at=datetime.now(UTC).isoformat(timespec="seconds"),
        trajectories=trajectories,
        tools={server: dict(sorted(tools.items())) for server, tools in sorted(counts.items())},
    )
    return learned


def _read(path: Path, learned: Learned) -> tuple[str, set[tuple[str, str]]] | None:
    """The task of ``path`` and the tools that ran without error in it; None (with the problem noted)
    when it is no trajectory."""
    succeeded: set[tuple[str, str]] = set()
    task: str | None = None
    started = False
    executes = 0  # counted for the summary only once the file proves to be a trajectory
    bad_lines: list[int] = []
    try:
        for number, event in _json_lines(path):
            if event is _NOT_JSON:
                bad_lines.append(number)
            if not isinstance(event, dict):
                continue
            if event.get("event") == "session_start":
                started = True
                if task is None and isinstance(event.get("task_id"), str):
                    task = event["task_id"]
            elif event.get("event") == "execute":
                executes += 1
                if (pair := _success(event)) is not None:
                    succeeded.add(pair)
    except OSError as error:
        learned.problems.append(f"{path}: cannot read ({error.strerror or error}); skipped")
        return None
    if bad_lines:
        shown = ", ".join(map(str, bad_lines[:5])) + (f" and {len(bad_lines) - 5} more" if len(bad_lines) > 5 else "")
        learned.problems.append(f"{path}:{bad_lines[0]}: not JSON (line {shown}); the other lines were read")
    if not started:
        learned.problems.append(f"{path}: no trajectory event (not a copilot log?); skipped")
        return None
    learned.executes += executes
    return task or path.stem, succeeded


_NOT_JSON = object()


def _json_lines(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, parsed JSON or :data:`_NOT_JSON`) of each line that is not blank (raises OSError)."""
    # utf-8-sig: a log saved by a Windows editor starts with a BOM, as the judge's readers allow.
    with path.open(encoding="utf-8-sig", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield number, parse_json(line)
            except ValueError:
                yield number, _NOT_JSON


def _success(event: dict[str, object]) -> tuple[str, str] | None:
    server, tool, result = event.get("server"), event.get("tool"), event.get("result")
    if not isinstance(server, str) or not isinstance(tool, str) or not server or not tool:
        return None
    if event.get("error") or not isinstance(result, dict) or result.get("is_error", False):
        return None
    return server, tool
