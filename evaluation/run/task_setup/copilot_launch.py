"""How a benchmark task launches the copilot: command, environment, and a Claude-Desktop config.

The built-in agent starts the copilot itself over stdio; an external agent gets the same launch
as an ``mcpServers`` config file (``{mcp_config}``), so any MCP host runs the identical copilot
with the task id, question and trajectory path already set.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from index.children.containment.environment import inherited_environment

#: The name the copilot gets in generated configs (Claude Code calls its tools mcp__copilot__…).
COPILOT_SERVER_NAME = "copilot"
#: Environment passed through to the copilot besides what every child inherits
#: (``index.children.containment.environment.inherited_environment``): its settings and offline switches.
_PASS_PREFIXES = ("COPILOT_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_")
_PASS_NAMES = frozenset({"TMPDIR", "TOKENIZERS_PARALLELISM"})
#: Seconds a task's first routes wait for the embedding model (``COPILOT_ROUTE_MODEL_WAIT``; the
#: runner's own environment may set another value): every task is ranked the same way, hybrid.
TASK_ROUTE_MODEL_WAIT = 120
#: Set per task by the runner; never inherited from the runner's own environment.
_PER_TASK = frozenset(
    {
        "COPILOT_LOG_DIR", "COPILOT_TASK_ID", "COPILOT_QUESTION", "COPILOT_CATEGORY", "COPILOT_LOG_FILE",
        "COPILOT_SERVERS", "COPILOT_WORKDIR", "COPILOT_CHILD_LOG_DIR", "COPILOT_ROOTS",
    }
)


class CopilotLaunch(BaseModel):
    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str

    def mcp_config(self) -> dict[str, Any]:
        return {
            "mcpServers": {
                COPILOT_SERVER_NAME: {"command": self.command, "args": self.args, "env": self.env, "cwd": self.cwd}
            }
        }

    def write_mcp_config(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.mcp_config(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return path


def copilot_launch(
    *,
    servers_file: Path,
    task_id: str,
    question: str,
    log_file: Path,
    copilot_home: Path | None,
    cwd: Path,
    category: str | None = None,
    workdir: Path | None = None,
    child_log_dir: Path | None = None,
    roots: Sequence[Path] = (),
    environ: Mapping[str, str] | None = None,
    inherit: Iterable[str] = (),
) -> CopilotLaunch:
    """The copilot process for one task (``python -m server`` with this interpreter).

    ``workdir`` holds the children's temp directories (the pool sets ``TMPDIR``/``TEMP``/``TMP``
    to ``<workdir>/<server>/tmp`` whatever the servers file says) and ``child_log_dir`` their
    stderr logs; the runner puts both in the task's directory so no task writes to another's,
    nor to the copilot home. ``roots`` (the task's workspace) is what the copilot answers when a
    child asks for the user's roots, and where ``works_in: roots`` servers run (``COPILOT_ROOTS``).

    The environment is the children's allowlist (TLS roots, proxies, locale, package-registry
    settings; no credentials unless a server opts in through ``inherit``), the copilot's own
    ``COPILOT_*``/``HF_*`` settings, and the per-task values.
    """
    source = os.environ if environ is None else environ
    # Exactly what the copilot's children may inherit (its pool applies the same rule per child):
    # an MCP host -- the SDK's stdio client too -- otherwise starts the copilot with a bare
    # environment, and every npx/uvx child behind a TLS-intercepting proxy fails its downloads.
    # ``inherit`` adds what servers opt into with ``inherit_env`` (e.g. a proxy with credentials).
    env = inherited_environment(source, inherit)
    env.update(
        {
            key: value
            for key, value in source.items()
            if (key.startswith(_PASS_PREFIXES) or key in _PASS_NAMES) and key not in _PER_TASK
        }
    )
    env.update(
        {
            "COPILOT_TASK_ID": task_id,
            "COPILOT_QUESTION": question,
            "COPILOT_LOG_FILE": str(log_file),
            "COPILOT_SERVERS": str(servers_file),
            # The per-task servers file rewrites launch arguments, which changes each server's
            # launch hash; without this the copilot would re-crawl every server for every task.
            "COPILOT_AUTO_INDEX": "0",
            # The paper's agents call ``execute-tool``; the copilot offers that alias on request.
            "COPILOT_LIVEMCPBENCH_ALIAS": "1",
        }
    )
    env.setdefault("HF_HUB_OFFLINE", "1")
    # Each task starts a fresh copilot: without a wait, its first routes would be keyword-only
    # for as long as the model takes to load, so a run's results would depend on machine load.
    env.setdefault("COPILOT_ROUTE_MODEL_WAIT", str(TASK_ROUTE_MODEL_WAIT))
    # Nor on what earlier runs on this machine logged: a usage prior learned from them would
    # change a task's rankings. A run that measures one sets the weight in its own environment.
    env.setdefault("COPILOT_USAGE_PRIOR_WEIGHT", "0")
    if category:
        env["COPILOT_CATEGORY"] = category
    if copilot_home is not None:
        env["COPILOT_HOME"] = str(copilot_home)
    if workdir is not None:
        env["COPILOT_WORKDIR"] = str(workdir)
    if child_log_dir is not None:
        env["COPILOT_CHILD_LOG_DIR"] = str(child_log_dir)
    if roots:
        env["COPILOT_ROOTS"] = os.pathsep.join(str(root) for root in roots)
    return CopilotLaunch(
        command=sys.executable,
        args=["-m", "server", "--servers", str(servers_file)],
        env=env,
        cwd=str(cwd),
    )
