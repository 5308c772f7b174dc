"""The benchmark's command lines answer ``--help`` and refuse a wrong argument without importing
the ``openai`` client or the MCP SDK, which take about two seconds together (``evaluation.run
--help`` took 3.8 s with them, 1.2 s without)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_HEAVY = {"openai", "mcp", "mcp_types"}


def _imported(module: str, *arguments: str) -> tuple[int, set[str]]:
    """The exit code of ``python -m module arguments`` and the top-level packages it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, *arguments],
        cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    names = {
        line.rsplit("|", 1)[1].strip().split(".")[0] for line in done.stderr.splitlines() if line.startswith("import time:")
    }
    assert "evaluation" in names, done.stderr[-2000:]  # -X importtime reported what was imported
    return done.returncode, names


@pytest.mark.parametrize("module", ["evaluation.run", "evaluation.judge"])
@pytest.mark.parametrize(("arguments", "exit_code"), [(["--help"], 0), (["--no-such-option"], 2)])
def test_a_command_line_parses_its_arguments_without_the_llm_client_or_the_sdk(
    module: str, arguments: list[str], exit_code: int
) -> None:
    code, imported = _imported(module, *arguments)
    assert code == exit_code
    assert imported & _HEAVY == set()
