"""How a benchmark task launches the copilot: command, environment, and a Claude-Desktop config.

The built-in agent starts the copilot itself over stdio; an external agent gets the same launch
as an ``mcpServers`` config file (``{mcp_config}``), so any MCP host runs the identical copilot
with the task id, question and trajectory path already set.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from index.catalog.redact import MASK, redact_text
from index.children.containment.environment import (
    has_url_credentials, inherited_environment, looks_secret_name, strip_url_credentials,
)

logger = logging.getLogger(__name__)

#: A private config directory's name: the runner's pid says whether the directory is still in use.
_PRIVATE_PREFIX = "mcp-copilot-task-"
_PRIVATE_NAME = re.compile(rf"{_PRIVATE_PREFIX}(\d+)-")

#: The name the copilot gets in generated configs (Claude Code calls its tools mcp__copilot__…).
COPILOT_SERVER_NAME = "copilot"
#: Environment passed through to the copilot besides what every child inherits
#: (``index.children.containment.environment.inherited_environment``): its settings and offline switches.
_PASS_PREFIXES = ("COPILOT_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_")
_PASS_NAMES = frozenset({"TMPDIR", "TOKENIZERS_PARALLELISM"})
#: The HTTP server's settings (its bearer token among them): a task's copilot serves stdio only.
_HTTP_ONLY_PREFIXES = ("COPILOT_HTTP_", "COPILOT_ALLOWED_ORIGINS")
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
    #: Variables of ``env`` the servers file's ``${VAR}`` placeholders take: secrets to the copilot
    #: (it shows them as ``${VAR}`` everywhere), whatever their names.
    placeholders: list[str] = []

    def shown_env(self) -> dict[str, str]:
        """``env`` as a run's artefacts may show it: values of secret-looking names (``HF_TOKEN``)
        and of the servers file's placeholders as ``***``, URL credentials masked (a proxy a server
        opted into with ``inherit_env``)."""
        shown = {}
        for name, value in self.env.items():
            if looks_secret_name(name) or name in self.placeholders:
                value = MASK
            elif has_url_credentials(value, name):
                masked = redact_text(value)
                # redact_text masks scheme URLs only; a proxy's bare user:pass@host loses its userinfo.
                value = masked if masked != value else strip_url_credentials(value, name)
            shown[name] = value
        return shown

    @property
    def holds_secrets(self) -> bool:
        return self.shown_env() != self.env

    def mcp_config(self, *, redacted: bool = False) -> dict[str, Any]:
        env = self.shown_env() if redacted else self.env
        return {
            "mcpServers": {
                COPILOT_SERVER_NAME: {"command": self.command, "args": self.args, "env": env, "cwd": self.cwd}
            }
        }

    def mcp_config_text(self, *, redacted: bool = False) -> str:
        return json.dumps(self.mcp_config(redacted=redacted), indent=1, ensure_ascii=False) + "\n"

    def write_mcp_config(self, path: Path, *, redacted: bool = True) -> Path:
        """Write the config to ``path``, redacted unless asked otherwise (the real one: :meth:`agent_mcp_config`)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.mcp_config_text(redacted=redacted), encoding="utf-8")
        return path

    @contextmanager
    def agent_mcp_config(self, shown: Path) -> Iterator[Path]:
        """The config file an external agent is given while it runs.

        ``shown`` (the run's redacted copy) when the launch holds no secret; otherwise the real
        config in a fresh private directory outside the run (0700, the file 0600), removed when the
        agent is done: a run directory is shared with reports, a token in it would travel with them.
        """
        if not self.holds_secrets:
            yield shown
            return
        directory = Path(tempfile.mkdtemp(prefix=f"{_PRIVATE_PREFIX}{os.getpid()}-"))
        try:
            path = directory / shown.name
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(self.mcp_config_text())
            yield path
        finally:
            shutil.rmtree(directory, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True


def sweep_stale_agent_configs(temp_dir: Path | None = None) -> int:
    """Remove the private config directories runners that are gone left behind; how many.

    A runner that was SIGKILLed (or lost power) never reached :meth:`CopilotLaunch.agent_mcp_config`'s
    cleanup, so its agent's real config -- secrets included -- stayed in the temp directory for good.
    Only this user's directories of dead runners are removed; a live runner's are in use.
    """
    base = temp_dir or Path(tempfile.gettempdir())
    removed = 0
    try:
        entries = list(os.scandir(base))
    except OSError:
        return 0
    for entry in entries:
        match = _PRIVATE_NAME.match(entry.name)
        if match is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or _process_alive(int(match.group(1))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += not os.path.lexists(entry.path)
    if removed:
        logger.info("removed %d private agent config director%s left by runners that were killed", removed, "y" if removed == 1 else "ies")
    return removed


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
    placeholders: Iterable[str] = (),
) -> CopilotLaunch:
    """The copilot process for one task (``python -m server`` with this interpreter).

    ``workdir`` holds the children's temp directories (the pool sets ``TMPDIR``/``TEMP``/``TMP``
    to ``<workdir>/<server>/tmp`` whatever the servers file says) and ``child_log_dir`` their
    stderr logs; the runner puts both in the task's directory so no task writes to another's,
    nor to the copilot home. ``roots`` (the task's workspace) is what the copilot answers when a
    child asks for the user's roots, and where ``works_in: roots`` servers run (``COPILOT_ROOTS``).

    The environment is the children's allowlist (TLS roots, proxies, locale, package-registry
    settings; no credentials unless a server opts in through ``inherit``), the copilot's own
    ``COPILOT_*``/``HF_*`` settings (not the HTTP server's, ``COPILOT_HTTP_TOKEN`` among them: a
    task's copilot serves stdio), the variables the servers file's ``${VAR}`` placeholders take
    (``placeholders``: a strict host starts the copilot with nothing else, and their servers were
    off in every task), and the per-task values.
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
            if (key.startswith(_PASS_PREFIXES) or key in _PASS_NAMES)
            and key not in _PER_TASK
            and not key.startswith(_HTTP_ONLY_PREFIXES)
        }
    )
    given = [name for name in dict.fromkeys(placeholders) if name in source and name not in _PER_TASK]
    env.update({name: source[name] for name in given})
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
        placeholders=given,
    )
