"""Finding and reading every trajectory under the paths given to the judge."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from evaluation.judge.outputs import is_judge_output
from evaluation.run.layout import REPEATS_FILE
from evaluation.run.models import SUMMARY_FILE
from evaluation.trajectories.copilot import Session, merge_sessions, read_jsonl, session_task_id
from evaluation.trajectories.livemcpbench import read_livemcpbench
from evaluation.trajectories.model import LoadResult, Problem, Trajectory


def _files_of_directory(directory: Path) -> list[Path]:
    """A benchmark run directory (``summary.json``) logs each task as ``<task_id>.jsonl`` at its
    top level; below it are the tasks' workspaces, whose files are outputs, not logs. The judge's
    own outputs (``verdicts.jsonl``, ``report.json`` … of an earlier judging, wherever it wrote
    them under ``directory``) are no trajectories either: see :func:`is_judge_output`."""
    if (directory / SUMMARY_FILE).is_file():
        found = (path for path in directory.glob("*.jsonl") if path.is_file())
    else:
        found = (path for path in directory.rglob("*") if path.suffix in (".jsonl", ".json") and path.is_file())
    return sorted(path for path in found if not is_judge_output(path))


def _resolved(path: Path) -> Path:
    # Not Path.resolve(): on Python 3.11 it raises RuntimeError for a symlink loop (an --out or
    # --cache-dir given as one was a traceback); realpath leaves the loop's name as it is.
    return Path(os.path.realpath(path))


def _candidate_files(paths: Sequence[Path], exclude: Sequence[Path], result: LoadResult) -> list[tuple[Path, bool]]:
    excluded = [_resolved(path) for path in exclude]

    def is_excluded(path: Path) -> bool:
        resolved = _resolved(path)
        return any(resolved == ex or ex in resolved.parents for ex in excluded)

    files: list[tuple[Path, bool]] = []
    for path in paths:
        if path.is_dir() and (path / REPEATS_FILE).is_file():
            result.problems.append(
                Problem(
                    kind="skipped_file",
                    file=str(path),
                    message="holds repeated runs; judge it on its own (python -m evaluation.judge DIR) so each repeat "
                    "is judged separately",
                )
            )
        elif path.is_dir():
            files += [(found, False) for found in _files_of_directory(path) if not is_excluded(found)]
        elif path.is_file():
            files.append((path, True))
        else:
            result.problems.append(Problem(kind="unreadable_file", file=str(path), message="no such file or directory"))
    return files


def load_trajectories(
    paths: Iterable[str | Path], *, known_tasks: Iterable[str] = (), exclude: Sequence[Path] = ()
) -> LoadResult:
    """Read every trajectory under ``paths`` (files or directories, recursively).

    ``known_tasks`` lets a session without ``task_id`` be matched by its file name
    (``<run>/<task_id>.jsonl``); ``exclude`` skips the judge's own output directory (and the reply
    cache). The outputs of earlier judgings found in directories are skipped too, in silence; a
    file named in ``paths`` is always read.
    """
    result = LoadResult()
    known = set(known_tasks)
    sessions_by_task: dict[str, list[Session]] = {}
    file_of_session: dict[tuple[str, str], str] = {}  # (task, session id) -> the file read
    livemcpbench: list[Trajectory] = []
    for path, explicit in _candidate_files([Path(p) for p in paths], exclude, result):
        if path.suffix == ".jsonl" or (explicit and path.suffix != ".json"):
            sessions = read_jsonl(path, result)
            if sessions:
                result.files_read += 1
            for session in sessions:
                task_id = session_task_id(session, known)
                if task_id is None:
                    result.problems.append(
                        Problem(kind="no_task", file=session.file, message="events without session_start or task id; skipped")
                    )
                    continue
                key = (task_id, session.start.session_id if session.start else "")
                if key[1] and file_of_session.setdefault(key, session.file) != session.file:
                    result.problems.append(
                        Problem(
                            kind="duplicate_session",
                            file=session.file,
                            message=f"session {key[1]} of task {task_id} is also in {file_of_session[key]} (a copy of "
                            "the same log?); read once",
                        )
                    )
                    continue
                sessions_by_task.setdefault(task_id, []).append(session)
        else:
            found = read_livemcpbench(path, result, explicit)
            if found:
                result.files_read += 1
            livemcpbench.extend(found)
    for task_id, sessions in sessions_by_task.items():
        directories = sorted({str(Path(session.file).parent) for session in sessions})
        if len(directories) > 1:
            result.problems.append(
                Problem(
                    kind="mixed_runs",
                    file=sessions[0].file,
                    message=f"task {task_id} has logs in {len(directories)} directories ({', '.join(directories)}): "
                    "read as one trajectory, its sessions merged; if these are different runs, judge each on its own",
                )
            )
        result.trajectories[task_id] = merge_sessions(task_id, sessions)
    for trajectory in livemcpbench:
        earlier = result.trajectories.get(trajectory.task_id)
        if earlier is not None:
            result.problems.append(
                Problem(
                    kind="duplicate_task",
                    file=earlier.sources[0],
                    message=f"task {trajectory.task_id} is also in {trajectory.sources[0]}: this one is skipped (the "
                    "later one is judged)",
                )
            )
        result.trajectories[trajectory.task_id] = trajectory
    return result
