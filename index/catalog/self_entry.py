"""Recognising the copilot's own entry in a server list, so it never becomes one of its own children.

A Claude Desktop config -- which users are invited to pass as the servers file -- usually holds the
copilot's own entry too. Started as a child it would be crawled (its ``route``/``execute`` indexed as
tools), routed to, and run as a nested copilot writing into another data directory. Two checks:

- *before starting anything* (:func:`launches_copilot`): the entry runs ``mcp-copilot`` (the console
  script), or ``python -m server`` with this copilot's interpreter (same environment) or one inside
  this checkout;
- *at the handshake* (:func:`is_copilot_answer`): whatever the launch (an HTTP ``url`` to the copilot,
  a wrapper script), a child that answers ``initialize`` as ``mcp-copilot`` is the copilot.

Both end in one warning line and the entry being skipped.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from index.settings import PROJECT_DIR

if TYPE_CHECKING:
    from index.catalog.servers import ServerConfig

#: The name the copilot gives itself in ``initialize`` (server and client info).
COPILOT_SERVER_NAME = "mcp-copilot"
#: The module ``python -m`` runs to start the copilot.
_COPILOT_MODULES = frozenset({"server", "server.__main__"})
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?(\.exe)?$", re.IGNORECASE)

SELF_ENTRY_ADVICE = "the copilot cannot be one of its own servers"


def _module_of(args: list[str]) -> str | None:
    """The module of a ``python [options] -m MODULE ...`` command line, if any."""
    for position, arg in enumerate(args):
        if arg == "-m":
            return args[position + 1] if position + 1 < len(args) else None
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:]
        if not arg.startswith("-"):
            return None  # a script or a command comes first: not a module run
    return None


def _resolve(command: str, env: dict[str, str]) -> Path | None:
    if os.sep in command or (os.altsep and os.altsep in command):
        return Path(command).expanduser()
    found = shutil.which(command, path=env.get("PATH") or os.environ.get("PATH"))
    return Path(found) if found else None


def _is_inside(path: Path, directory: Path) -> bool:
    try:
        path.absolute().relative_to(directory)
    except ValueError:
        return False
    return True


def _same_environment(interpreter: Path) -> bool:
    """``interpreter`` is this copilot's Python: the same file, or one in the same environment."""
    ours = Path(sys.executable)
    candidate = interpreter.absolute()
    if candidate == ours.absolute():
        return True
    # A venv's bin/ holds python, python3, python3.11 (links to one base interpreter).
    return candidate.parent == ours.absolute().parent and _PYTHON.match(candidate.name) is not None


def launches_copilot(config: ServerConfig) -> str | None:
    """How ``config`` would start this copilot (its command line), or None when it does not."""
    if not config.command:
        return None
    name = Path(config.command).name.removesuffix(".exe")
    if name == COPILOT_SERVER_NAME:
        return shlex.join([config.command, *config.args])
    if not _PYTHON.match(name) or _module_of(config.args) not in _COPILOT_MODULES:
        return None
    interpreter = _resolve(config.command, config.env)
    if interpreter is None:
        return None
    if _same_environment(interpreter) or _is_inside(interpreter, PROJECT_DIR):
        return shlex.join([config.command, *config.args])
    return None


def is_copilot_answer(initialize_result: Any) -> bool:
    """The child introduced itself as the copilot in its ``initialize`` answer."""
    info = getattr(initialize_result, "server_info", None)
    return getattr(info, "name", None) == COPILOT_SERVER_NAME
