"""A per-task home for child servers, with the package caches kept shared.

Many MCP servers write under ``~`` (basic-memory's ``~/basic-memory``, logs such as
``~/.something.log``, config and state in ``~/.config`` / ``~/.local``), so a benchmark task
would leave files in the real home and see the files earlier tasks left there. Each task's
children therefore get ``HOME`` (and the XDG config/data/state directories under it) in the
task's directory. What must stay shared is set to the real locations explicitly, because it is
found through ``HOME`` otherwise:

- package caches and installs, so ``npx``/``uvx`` do not download every server again per task
  (and, offline, can start at all): the npm cache (where ``npx`` also keeps its packages), uv's
  cache, tool and managed-Python directories, and ``XDG_CACHE_HOME``;
- user-level settings of the package managers and git, read where they are: ``~/.npmrc``
  (registry), ``pip.conf``, ``~/.gitconfig`` (who commits, for the git server);
- ``PYENV_ROOT``, whose shims on ``PATH`` need it (normally inherited as it is).

Temp directories are not set here: the copilot's pool always points ``TMPDIR``/``TEMP``/``TMP``
at ``<COPILOT_WORKDIR>/<server>/tmp``, so the runner puts that work directory in the task's
directory instead (see :mod:`evaluation.run.task_setup.copilot_launch`).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sysconfig
from collections.abc import Mapping
from pathlib import Path

logger = logging.getLogger(__name__)

#: Set to directories under the task's home (unless a server entry sets ``HOME`` itself, when
#: they follow that home as they normally would).
HOME_DERIVED = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "XDG_STATE_HOME": ".local/state",
}
_UV_TIMEOUT = 10.0


def shared_locations(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables pointing children at the real caches, installs and user settings.

    An explicit value in ``environ`` (the runner's environment) wins; otherwise the location is
    the one the tool itself would use with the real ``HOME``. Runs ``uv … dir`` (three quick
    subprocesses): call it once per run.
    """
    source = os.environ if environ is None else environ
    home = Path(source.get("HOME") or Path.home())
    cache_home = source.get("XDG_CACHE_HOME") or str(home / ".cache")
    data_home = Path(source.get("XDG_DATA_HOME") or home / ".local" / "share")
    config_home = Path(source.get("XDG_CONFIG_HOME") or home / ".config")
    shared = {
        "XDG_CACHE_HOME": cache_home,
        "npm_config_cache": _first_set(source, "npm_config_cache", "NPM_CONFIG_CACHE") or str(home / ".npm"),
        "UV_CACHE_DIR": source.get("UV_CACHE_DIR") or _uv_dir(source, "cache") or str(Path(cache_home) / "uv"),
        "UV_TOOL_DIR": source.get("UV_TOOL_DIR") or _uv_dir(source, "tool") or str(data_home / "uv" / "tools"),
        "UV_PYTHON_INSTALL_DIR": (
            source.get("UV_PYTHON_INSTALL_DIR") or _uv_dir(source, "python") or str(data_home / "uv" / "python")
        ),
    }
    settings = {
        ("npm_config_userconfig", "NPM_CONFIG_USERCONFIG"): [home / ".npmrc"],
        ("PIP_CONFIG_FILE",): [config_home / "pip" / "pip.conf", home / ".pip" / "pip.conf"],
        ("GIT_CONFIG_GLOBAL",): [home / ".gitconfig", config_home / "git" / "config"],
        ("PYENV_ROOT",): [home / ".pyenv"],
    }
    for names, candidates in settings.items():
        value = _first_set(source, *names)
        if value is None:
            value = next((str(path) for path in candidates if path.exists()), None)
        if value is not None:
            shared[names[0]] = value
    return shared


def child_environment(home: Path, shared: Mapping[str, str]) -> dict[str, str]:
    """Everything a task's stdio children get in their ``env``: its home plus ``shared``."""
    env = {"HOME": str(home)}
    env.update({key: str(home / relative) for key, relative in HOME_DERIVED.items()})
    env.update(shared)
    return env


def merge_entry_env(entry_env: Mapping[str, object], task_env: Mapping[str, str]) -> dict[str, object]:
    """A server entry's ``env`` with ``task_env`` added; what the entry sets itself wins.

    An entry that sets ``HOME`` keeps it, and its XDG directories then follow that home.
    """
    added = dict(task_env)
    if "HOME" in entry_env:
        for key in ("HOME", *HOME_DERIVED):
            added.pop(key, None)
    return {**added, **entry_env}


def _first_set(source: Mapping[str, str], *names: str) -> str | None:
    return next((source[name] for name in names if source.get(name)), None)


def _uv_dir(source: Mapping[str, str], kind: str) -> str | None:
    """What ``uv {cache,tool,python} dir`` reports in ``source``'s environment, if uv runs."""
    scripts = sysconfig.get_path("scripts")
    uv = shutil.which("uv", path=source.get("PATH", os.defpath)) or shutil.which("uv", path=scripts)
    if uv is None:
        return None
    try:
        done = subprocess.run(
            [uv, kind, "dir"], env=dict(source), capture_output=True, text=True, timeout=_UV_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        logger.debug("uv %s dir failed: %s", kind, error)
        return None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        logger.debug("uv %s dir exited %d: %s", kind, done.returncode, done.stderr.strip()[:200])
        return None
    return lines[-1].strip()
