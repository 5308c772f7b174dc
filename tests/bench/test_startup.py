"""``bench startup``: its table cells (a range over rounds reads as one number and one unit) and
its handshake timing, against a real SDK server and servers that do not answer."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from bench.startup import BARE_SERVER, HANDSHAKE_TIMEOUT, handshake_seconds, span
from index.errors import CopilotError


@pytest.mark.parametrize(
    ("values", "fmt", "cell"),
    [
        ([3.2, 2.7], "{:.1f} s", "2.7-3.2 s"),  # before: "2.7 s-3.2"
        ([1.0, 1.04], "{:.1f} s", "1.0 s"),  # equal as shown: one number
        ([204, 200], "{:.0f}", "200-204"),
        ([], "{:.1f} s", "-"),
    ],
)
def test_a_range_over_rounds_is_one_cell(values: list[float], fmt: str, cell: str) -> None:
    assert span(values, fmt) == cell


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_handshake_of_a_real_sdk_server_is_timed(tmp_path: Path) -> None:
    (tmp_path / "bare.py").write_text(BARE_SERVER, encoding="utf-8")
    seconds = handshake_seconds([sys.executable, str(tmp_path / "bare.py")], dict(os.environ), tmp_path)
    assert 0 < seconds < HANDSHAKE_TIMEOUT


@pytest.mark.parametrize(
    ("code", "timeout", "error"),
    [
        ("import sys; sys.stdin.readline(); print('junk', flush=True)", HANDSHAKE_TIMEOUT, "answered initialize with b'junk\\n'"),
        ("import sys; sys.stdin.readline()", HANDSHAKE_TIMEOUT, "exited without answering initialize"),
        # Never answers, never exits: given up on after the timeout and killed at once (not after 30 s).
        ("import sys, time; sys.stdin.readline(); time.sleep(600)", 0.2, "did not answer initialize within 0.2 s"),
    ],
)
def test_a_server_that_does_not_answer_initialize_is_one_error(tmp_path: Path, code: str, timeout: float, error: str) -> None:
    with pytest.raises(CopilotError, match=re.escape(error)):
        handshake_seconds(_python(code), dict(os.environ), tmp_path, timeout=timeout)
