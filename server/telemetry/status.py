"""What a running copilot is doing, for ``python -m server status`` in another process.

Each copilot keeps ``COPILOT_HOME/run/copilot-<pid>.json`` up to date (rewritten atomically
every few seconds while something changes, removed when it stops): transport, start time,
servers file, index state, live children, recent errors, held-back tools, call counts. This
works the same for a stdio copilot a host started and an HTTP one; a file whose process is gone
(a killed copilot) is reported as stale and removed by ``status``.
"""

from __future__ import annotations

from index.json_text import parse_json
import logging
import os
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel, Field

logger = logging.getLogger(__name__)

RUN_DIR = "run"


class ChildStatus(BaseModel):
    server: str
    state: str
    pid: int | None = None
    transport: str = ""
    calls: int = 0
    errors: int = 0
    in_flight: int = 0
    #: Starts after the server's previous process crashed or timed out.
    restarts: int = 0
    #: Children stopped for idleness (started again on the next call: not restarts).
    idle_stops: int = 0
    #: Runs in a Landlock domain of its own (its entry and the machine allow it); None: a remote server.
    isolated: bool | None = None
    last_used: str | None = None
    last_error: str | None = None


class RecentError(BaseModel):
    at: str
    server: str
    tool: str
    kind: str
    message: str


class CopilotStatus(BaseModel):
    pid: int
    process_created: float = 0.0  # psutil create_time: tells a live copilot from a reused pid
    transport: str
    started_at: str
    updated_at: str
    version: str = ""
    servers_file: str | None = None
    servers_enabled: int = 0
    http_url: str | None = None
    index: dict[str, Any] = Field(default_factory=dict)
    indexing: dict[str, Any] = Field(default_factory=dict)
    children: list[ChildStatus] = Field(default_factory=list)
    recent_errors: list[RecentError] = Field(default_factory=list)
    held_back: list[str] = Field(default_factory=list)
    calls: dict[str, int] = Field(default_factory=dict)


def run_dir(home: Path) -> Path:
    return home / RUN_DIR


def status_path(home: Path, pid: int | None = None) -> Path:
    return run_dir(home) / f"copilot-{pid or os.getpid()}.json"


def write_status(path: Path, status: CopilotStatus) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(status.model_dump_json(indent=1), encoding="utf-8")
    tmp.replace(path)


def remove_status(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        logger.warning("could not remove %s", path, exc_info=True)


def process_created(pid: int | None = None) -> float:
    try:
        return psutil.Process(pid or os.getpid()).create_time()
    except psutil.Error:
        return 0.0


def _alive(status: CopilotStatus) -> bool:
    try:
        process = psutil.Process(status.pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return not status.process_created or abs(process.create_time() - status.process_created) < 1.0
    except (psutil.Error, ValueError, OverflowError):  # a damaged file's pid: -5, 2**70
        return False


def read_statuses(home: Path, *, remove_stale: bool = True) -> tuple[list[CopilotStatus], list[str]]:
    """Statuses of the copilots running with ``home``, and notes on files skipped (stale, unreadable)."""
    statuses: list[CopilotStatus] = []
    notes: list[str] = []
    directory = run_dir(home)
    if not directory.is_dir():
        return statuses, notes
    for path in sorted(directory.glob("copilot-*.json")):
        try:
            status = CopilotStatus.model_validate(parse_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as error:
            notes.append(f"{path}: unreadable status file ({type(error).__name__}); skipped")
            continue
        if not _alive(status):
            notes.append(f"{path}: copilot {status.pid} is no longer running (stale status{', removed' if remove_stale else ''})")
            if remove_stale:
                remove_status(path)
            continue
        statuses.append(status)
    return statuses, notes
