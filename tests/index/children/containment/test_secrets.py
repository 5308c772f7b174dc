"""A process that starts children through ``open_session`` (the crawler, not only the copilot's
start-up, which protects itself) keeps its secrets from them: a child reading
``/proc/<parent>/environ`` finds none, while the process itself still sees them."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from index.children.containment.guardian import landlock_abi
from tests.support.processes import HOSTILE_SERVER

pytestmark = [pytest.mark.timeout(60), pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

REPO = Path(__file__).resolve().parents[4]
#: Unique per run: the owner holds it in /proc/<pid>/environ until it blanks it, just before its first
#: child starts, and a run going on at the same time (another suite) found it there in ``elsewhere``.
SECRET = f"sk-childaudit-owner-secret-{secrets.token_hex(8)}"

#: Owns one session like the crawler does; afterwards writes what its own environment still says.
_OWNER = """
import anyio, os, sys
from pathlib import Path
from index.children.connect import open_session
from index.catalog.servers import ServerConfig

async def main():
    config = ServerConfig(
        name="spy", command=sys.executable,
        args=[sys.argv[1], "--look-for", sys.argv[2], "--report", sys.argv[3]], isolated=sys.argv[6] == "isolated",
    )
    with anyio.fail_after(30):
        async with open_session(config, workdir=Path(sys.argv[4])) as connection:
            # Once the session is up, the watchdog watching the child runs too.
            stolen = await connection.session.call_tool("steal", {})
    Path(sys.argv[3]).with_suffix(".later.json").write_text(stolen.content[0].text)
    Path(sys.argv[5]).write_text(os.environ.get("OPENAI_API_KEY", "<unset>"))
    Path(sys.argv[5]).with_suffix(".pid").write_text(str(os.getpid()))

anyio.run(main)
"""


@pytest.mark.parametrize("isolation", ["isolated", "unisolated"])
def test_a_child_cannot_read_the_secrets_of_the_process_that_started_it(tmp_path: Path, isolation: str) -> None:
    if isolation == "isolated" and not landlock_abi():
        pytest.skip("this kernel has no Landlock (Linux 5.13+): children cannot be isolated here")
    report, seen = tmp_path / "report.json", tmp_path / "seen.txt"
    env = {key: value for key, value in os.environ.items() if not key.startswith("COPILOT_")}
    env["OPENAI_API_KEY"] = SECRET
    owner = subprocess.run(
        [sys.executable, "-c", _OWNER, str(HOSTILE_SERVER), SECRET, str(report), str(tmp_path / "work"), str(seen), isolation],
        cwd=tmp_path,  # no .env of the checkout is read
        env={**env, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=50,
    )
    assert owner.returncode == 0, owner.stderr.decode(errors="replace")[-2000:]
    owner_pid = int(seen.with_suffix(".pid").read_text(encoding="ascii"))
    ancestors = json.loads(report.read_text(encoding="utf-8"))["ancestors"]
    # The child's parent is its guardian (index.children.containment.guardian), the owner the next one up.
    assert [entry["pid"] for entry in ancestors[:2]] == [ancestors[0]["pid"], owner_pid]
    assert all(entry["found"] == [] for entry in ancestors)
    later = json.loads(report.with_suffix(".later.json").read_text(encoding="utf-8"))
    if isolation == "isolated":  # its own Landlock domain: no ancestor's environment is readable at all
        assert [entry["readable"] for entry in later["ancestors"][:2]] == [False, False]
    else:  # the owner's blanked environment is what the child reads (as root; other users cannot)
        assert later["ancestors"][1]["readable"]
    assert all(entry["found"] == [] for entry in later["ancestors"])
    assert later["elsewhere"] == []  # nor in the watchdog's, a program started afresh
    assert seen.read_text(encoding="utf-8") == SECRET  # the owner itself still has it
