"""Running the project's real command-line programs the way CI and a user's pipe do.

No terminal: stdin is closed, stdout and stderr are pipes, and ``COLUMNS=40`` -- output meant for
people must still come out one unwrapped line per message. The caller's ``COPILOT_*`` variables are
dropped, so a test states every setting it depends on (and never touches the real data dir).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
NARROW_COLUMNS = "40"


def cli_env(**settings: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("COPILOT_")}
    env.update({"COLUMNS": NARROW_COLUMNS, "PYTHONUNBUFFERED": "1"})
    env.update(settings)
    return env


def _python(
    argv: list[str], env: Mapping[str, str] | None, cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """This interpreter with ``argv``, stdin closed, output captured, ``COLUMNS=40`` unless ``env`` says."""
    return subprocess.run(
        [sys.executable, *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(env) if env is not None else cli_env(),
        timeout=timeout,
        check=False,
    )


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path = PROJECT,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS...`` with stdin closed, output captured, ``COLUMNS=40``."""
    return _python(["-m", *args], env, cwd, timeout)


def run_python(
    script: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 200
) -> subprocess.CompletedProcess[str]:
    """``python -c SCRIPT ARGS...`` in the project, stdin closed, output captured; it must exit 0."""
    result = _python(["-c", script, *args], env, PROJECT, timeout)
    assert result.returncode == 0, result.stderr
    return result


def line_with(text: str, phrase: str) -> str:
    """The one line of ``text`` that holds all of ``phrase`` (which is longer than 40 columns)."""
    assert len(phrase) > int(NARROW_COLUMNS), "a phrase this short proves nothing about wrapping"
    lines = [line for line in text.splitlines() if phrase in line]
    assert lines, f"{phrase!r} is not on one line of:\n{text}"
    return lines[0]


def single_error(result: subprocess.CompletedProcess[str]) -> str:
    """The program failed with exactly one line on stderr, ``error: ...``, and nothing else."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0, f"exit 0; stderr:\n{result.stderr}"
    assert len(lines) == 1 and lines[0].startswith("error: "), f"not one error line:\n{result.stderr}"
    return lines[0]


def index_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m index ARGS...`` on the data dir ``home``, as :func:`run_cli` runs it."""
    return run_cli("index", *args, env=cli_env(COPILOT_HOME=str(home)))


def server_status(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m server status --home HOME ARGS...``, as :func:`run_cli` runs it."""
    return run_cli("server", "status", "--home", str(home), *args, timeout=60)


def approve_as_user(home: Path, item_id: str) -> list[dict[str, Any]]:
    """Review with ``python -m index trust --json``, then ``approve`` exactly the definition of
    ``item_id`` it showed (its ``SERVER/ITEM@HASH``), as a person does; the review it read."""
    review: list[dict[str, Any]] = json.loads(index_cli(home, "trust", "--json").stdout)
    target = next(verdict["approve"] for verdict in review if verdict["id"] == item_id)
    done = index_cli(home, "approve", target)
    assert done.returncode == 0 and done.stdout.strip() == f"approved {item_id}", done.stderr
    return review
