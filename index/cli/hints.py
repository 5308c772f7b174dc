"""Commands quoted in error messages, written so the user can paste them where they are.

A bare ``python`` may be another interpreter without the project installed, so messages name this
interpreter: relative to the current directory when it lies inside it (``.venv/bin/python`` from
the checkout), else its absolute path. Settings that came from the environment and change what the
command does (``COPILOT_HOME``, the catalog, the model, the Chroma server) are put in front of it,
because the shell the user types into may not have them (a host's ``env`` block set them).
Settings left at their defaults are not repeated.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from index.settings import CopilotSettings

#: Settings an ``index`` command depends on, as the variables that set them.
_INDEX_VARIABLES = {
    "home": "COPILOT_HOME",
    # The servers file decides what ``index crawl`` crawls and what ``index build`` keeps: without
    # it the pasted command would crawl the project's pool instead of the one the copilot serves.
    "servers": "COPILOT_SERVERS",
    "catalog": "COPILOT_CATALOG",
    "embedding_model": "COPILOT_EMBEDDING_MODEL",
    "embedding_precision": "COPILOT_EMBEDDING_PRECISION",
    "chroma_url": "COPILOT_CHROMA_URL",
    "collection": "COPILOT_COLLECTION",
}


def interpreter() -> str:
    """This Python, as the user should type it from the current directory."""
    executable = Path(sys.executable)
    try:
        relative = executable.relative_to(Path.cwd())
    except ValueError:
        return str(executable)
    return str(relative) if relative.parts and relative.parts[0] != ".." else str(executable)


def python_command(*args: str) -> str:
    """``.venv/bin/python ARGS...``, shell-quoted."""
    return shlex.join([interpreter(), *args])


def index_command(settings: CopilotSettings | None, *args: str) -> str:
    """``[COPILOT_HOME=...] .venv/bin/python -m index ARGS...`` for the index ``settings`` describe."""
    prefix = []
    if settings is not None:
        for field, variable in _INDEX_VARIABLES.items():
            value = getattr(settings, field, None)
            if field in settings.model_fields_set and value is not None:
                # A relative path was relative to the copilot's directory, not the user's shell's.
                shown = value.absolute() if isinstance(value, Path) else value
                prefix.append(f"{variable}={shlex.quote(str(shown))}")
    return " ".join([*prefix, python_command("-m", "index", *args)])


def create_catalog_commands(settings: CopilotSettings | None, path: Path) -> str:
    """The commands that create the catalog at ``path``: a crawl or LiveMCPBench's import, each with
    ``--out path`` (without it they write their default catalog, and following the advice would
    overwrite that one and leave ``path`` missing)."""
    crawl = index_command(settings, "crawl", "--out", str(path))
    imported = index_command(settings, "import-livemcpbench", "PATH/tools.json", "--out", str(path))
    return f"{crawl} -- or: {imported}"
