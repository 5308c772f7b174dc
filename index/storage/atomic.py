"""Small files of the copilot's own: replaced atomically, so a reader in another process never
sees half of one, and read back as their pydantic model."""

from __future__ import annotations

import os
import threading
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from index.json_text import JSONFileError, read_json_model

Model = TypeVar("Model", bound=BaseModel)


class UnusableFile(Exception):
    """A kept file that cannot be read (``unreadable``) or is not what its model says; the message says why."""

    def __init__(self, reason: str, *, unreadable: bool) -> None:
        super().__init__(reason)
        self.unreadable = unreadable


def read_model(path: Path, model: type[Model]) -> Model | None:
    """``model`` as kept in ``path``; None when there is no such file, :class:`UnusableFile` when
    it cannot be read or does not validate (the caller decides how loudly to ignore it)."""
    try:
        return read_json_model(path, model)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UnusableFile(str(error), unreadable=True) from None
    except JSONFileError as error:
        reason = str(error) if error.field else f"the file: {error}"
        raise UnusableFile(reason, unreadable=error.undecodable) from None


def _temporary_beside(path: Path) -> Path:
    """A name for the temporary file a writer renames over ``path``, its own: writers in other
    processes or threads saving the same file at once each rename their own (a shared name made
    all but one fail with "No such file or directory")."""
    return path.with_name(f"{path.name}.tmp{os.getpid()}-{threading.get_ident()}")


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to a temporary file beside ``path``, then rename it over
    ``path`` (raises OSError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary_beside(path)
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
        tmp.replace(path)
    finally:
        with suppress(OSError):  # the directory may be what failed
            tmp.unlink(missing_ok=True)
