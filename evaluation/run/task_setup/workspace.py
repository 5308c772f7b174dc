"""Per-task workspaces: a private copy of the task files that ``/root/`` is mapped to.

LiveMCPBench tasks read inputs from and write outputs to ``/root/…`` (the paper's Docker image
symlinks every directory of ``annotated_data`` into ``/root``). A benchmark run must not touch the
real ``/root`` nor the shared task files, and concurrent tasks must not see each other's outputs,
so every task gets:

- a workspace directory with a copy of the task files (directories copied, ``*.bundle`` git
  bundles cloned, the annotations file and other non-task files skipped);
- its question rewritten so ``/root`` names the workspace;
- a servers file in which every stdio child runs in the workspace, launch arguments that name
  a root directory (the filesystem server's ``/``, arxiv's ``--storage-path``, an existing
  directory, ``/root/…``) point into it, and each child's ``env`` gets the task's own ``HOME``
  with the package caches kept shared (:mod:`evaluation.run.task_setup.child_home`);
- after the run, the list of files it created, changed or deleted (``WorkspaceChanges``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from index.json_text import parse_json
from evaluation.run.task_setup.child_home import merge_entry_env
from index.errors import ConfigError
from server.trajectory.records import WorkspaceChanges, WorkspaceFile

logger = logging.getLogger(__name__)

#: The directory the tasks' questions and answers refer to.
TASK_ROOT = "/root"
#: Top-level files of a task-files directory that are benchmark metadata, not task inputs.
NON_TASK_FILES = frozenset({"all_annotations.json", "readme.md", "license", "license.txt"})
#: How many changed files a ``workspace`` event lists, and how much of each text file it shows.
MAX_LISTED_FILES = 200
PREVIEW_CHARS = 400
_SNIFF_BYTES = 4096
_GIT_CLONE_TIMEOUT = 120.0

#: Options whose value says where a server's *code* lives (never redirected into the workspace).
_LAUNCHER_OPTIONS = frozenset(
    {
        "--directory", "--project", "--from", "--with", "--with-editable", "--with-requirements",
        "--python", "--prefix", "-C", "--cwd", "--index-url", "--extra-index-url", "--find-links",
        "--cache-dir", "--package", "--registry",
    }
)
#: Options whose value is a directory the server reads or writes data in.
_STORAGE_OPTIONS = frozenset(
    {
        "--storage-path", "--storage", "--storage-dir", "--data-dir", "--data-path", "--root",
        "--root-dir", "--base-dir", "--base-path", "--workspace", "--workspace-dir", "--work-dir",
        "--output-dir", "--allowed-dir", "--allowed-directory", "--allowed-directories", "--dir",
        "--path", "--home", "--notes-dir", "--db-path",
    }
)
#: How :func:`missing_inputs` marks an input path that ``..`` leads out of ``/root``.
OUTSIDE_ROOT = f"(outside {TASK_ROOT})"
_ROOT_IN_TEXT = re.compile(r"(?<![\w.~/-])/root(?![\w-])")


# ---------------------------------------------------------------------------- task files


def copy_task_files(task_files: Path | None, workspace: Path, skip: set[Path] | None = None) -> list[str]:
    """Fill a fresh ``workspace`` from ``task_files``; returns warnings (e.g. a bundle not cloned).

    ``skip`` names paths never copied, nor any directory containing them (the run's ``--out``).

    Copies are writable even when the source is read-only (the shared data is), because tasks
    write next to their inputs.
    """
    if workspace.exists():
        shutil.rmtree(workspace)
    workspace.mkdir(parents=True)
    warnings: list[str] = []
    if task_files is None:
        return warnings
    skipped = {p.resolve() for p in (skip or set())}
    for entry in sorted(task_files.iterdir()):
        resolved = entry.resolve()
        if entry.name.lower() in NON_TASK_FILES or entry.name.startswith("."):
            continue
        if resolved in skipped or any(resolved in path.parents for path in skipped):
            continue  # the task list itself, or the run's own output (never copy a run into itself)
        if entry.is_dir():
            _copy_tree(entry, workspace / entry.name, warnings)
        elif entry.suffix == ".bundle":
            warning = _clone_bundle(entry, workspace / entry.stem)
            if warning:
                warnings.append(warning)
        elif entry.is_file():
            shutil.copyfile(entry, workspace / entry.name)
        else:
            warnings.append(_not_copied(entry))
    return warnings


def _copy_tree(source: Path, target: Path, warnings: list[str], ancestors: frozenset[tuple[int, int]] = frozenset()) -> None:
    """Copy the directory ``source`` to ``target``, following symbolic links as the tasks do.

    A linked directory is copied with its contents, wherever it is (``os.walk`` left one below the
    top level an empty directory, so its files were silently missing); a link back to a directory
    it is inside is not followed again. A dangling link or a special file (a named pipe, a socket)
    is left out with a warning naming it, like a missing input: failing the copy instead failed
    every task of the run -- also those that never read it -- and recorded the data's problem as
    the tasks' failures; a task that names it as an input is still refused as ``missing_files``.
    """
    target.mkdir(parents=True, exist_ok=True)
    try:
        info = source.stat()
        with os.scandir(source) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError as error:
        warnings.append(f"{source}: cannot be read ({error.strerror or error}); its files are not copied")
        return
    here = (info.st_dev, info.st_ino)
    if here in ancestors:
        warnings.append(f"{source}: a symbolic link to a directory it is inside of; not copied again")
        return
    ancestors = ancestors | {here}
    for entry in entries:
        path = Path(entry.path)
        if entry.is_dir():  # (links followed)
            _copy_tree(path, target / entry.name, warnings, ancestors)
        elif entry.is_file():
            # copyfile, not copy2: the shared files are read-only and the copies must not be.
            shutil.copyfile(path, target / entry.name)
        else:
            warnings.append(_not_copied(path))


def _not_copied(path: Path) -> str:
    """The warning for a task-files entry that is neither a directory nor a regular file."""
    if path.is_symlink() and not path.exists():
        return f"{path}: a symbolic link to {os.readlink(path)}, which leads to no file; not copied"
    try:
        kind = file_kind(path.stat().st_mode)
    except OSError as error:
        return f"{path}: cannot be read ({error.strerror or error}); not copied"
    return f"{path}: a special file ({kind.tag}), not a regular file; not copied" if kind else f"{path}: not copied"


@dataclass(frozen=True)
class FileKind:
    """What a file that is not a regular file is: a short ``tag`` (``special:fifo`` in a snapshot)
    and ``words`` for a message."""

    tag: str
    words: str


_FILE_KINDS = (
    (stat.S_ISLNK, FileKind("link", "a symbolic link")), (stat.S_ISDIR, FileKind("directory", "a directory")),
    (stat.S_ISFIFO, FileKind("fifo", "a named pipe")), (stat.S_ISSOCK, FileKind("socket", "a socket")),
    (stat.S_ISCHR, FileKind("char-device", "a character device")), (stat.S_ISBLK, FileKind("block-device", "a block device")),
)  # fmt: skip


def file_kind(mode: int) -> FileKind | None:
    """The kind of a file (its ``st_mode``) that is not a regular file; ``None`` for a regular one."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _FILE_KINDS if test(mode)), FileKind("special", "a special file"))


def _clone_bundle(bundle: Path, target: Path) -> str | None:
    """``git.bundle`` becomes the ``/root/git`` repository, as in LiveMCPBench's setup."""
    git = shutil.which("git")
    if git is None:
        return f"{bundle.name}: not cloned into {target.name}/ because 'git' is not on PATH"
    try:
        completed = subprocess.run(
            [git, "clone", "--quiet", str(bundle), str(target)],
            capture_output=True, text=True, timeout=_GIT_CLONE_TIMEOUT, check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{bundle.name}: 'git clone' took longer than {_GIT_CLONE_TIMEOUT:.0f} s"
    if completed.returncode != 0:
        return f"{bundle.name}: 'git clone' failed: {completed.stderr.strip()[:300]}"
    return None


def missing_inputs(file_name: str, task_files: Path | None) -> list[str]:
    """The task's declared input paths (``/root/…``, comma separated) absent from ``task_files``.

    A path that ``..`` leads out of ``/root`` (``/root/../secret.txt``) is one the workspace can
    never hold: it is missing, said so, whatever exists outside ``task_files``.
    """
    missing = []
    for raw in file_name.split(","):
        path = raw.strip()
        if not path:
            continue
        relative = _relative_to_task_root(path)
        if relative is None:
            continue  # not a /root path: nothing we are responsible for providing
        normal = os.path.normpath(relative)
        if normal == ".." or normal.startswith("../"):
            logger.warning("the task's input %s leads outside %s; counted as missing", path, TASK_ROOT)
            missing.append(f"{path} {OUTSIDE_ROOT}")
        elif task_files is None or not (task_files / normal).exists():
            missing.append(path)
    return missing


def _relative_to_task_root(path: str) -> str | None:
    if path == TASK_ROOT or path == TASK_ROOT + "/":
        return "."
    if path.startswith(TASK_ROOT + "/"):
        return path[len(TASK_ROOT) + 1 :]
    return None


def map_question(question: str, workspace: Path) -> str:
    """Replace ``/root`` (as a path, not inside another word or path) by the workspace path."""
    return _ROOT_IN_TEXT.sub(lambda _match: str(workspace), question)


# ---------------------------------------------------------------------------- servers file


@dataclass
class ServerRewrite:
    """What :func:`rewrite_servers` changed for one server (logged in the task's metadata)."""

    server: str
    args: list[tuple[str, str]] = field(default_factory=list)
    env: list[str] = field(default_factory=list)


class _PathMapper:
    def __init__(self, workspace: Path, task_files: Path | None, base_cwd: Path) -> None:
        self.workspace = workspace
        self.task_files = task_files.resolve() if task_files else None
        self.base_cwd = base_cwd

    def inside(self, relative: str) -> str:
        """``workspace/relative``, never escaping the workspace through ``..``."""
        normal = os.path.normpath(relative)
        if normal == "." or normal.startswith(".."):
            return str(self.workspace)
        return str(self.workspace / normal)

    def map(self, value: str, *, storage: bool) -> str | None:
        """The workspace path ``value`` stands for, or ``None`` to keep it unchanged."""
        if not value or value.startswith("-") or "${" in value or "://" in value:
            return None
        if value == "/":
            return str(self.workspace)
        relative = _relative_to_task_root(value)
        if relative is not None:
            return self.inside(relative)
        path = Path(value).expanduser()
        looks_like_path = path.is_absolute() or value.startswith(("./", "../", "~")) or value in (".", "..")
        parts = Path(value).parts
        if "annotated_data" in parts and not path.is_absolute():
            # LiveMCPBench's configs name its data as ./annotated_data/… relative to its repository.
            rest = parts[parts.index("annotated_data") + 1 :]
            return self.inside(os.path.join(*rest)) if rest else str(self.workspace)
        absolute = path if path.is_absolute() else self.base_cwd / path
        if self.task_files is not None and (looks_like_path or storage):
            resolved = absolute.resolve()
            if resolved == self.task_files or self.task_files in resolved.parents:
                return self.inside(str(resolved.relative_to(self.task_files)))
        if (looks_like_path or storage) and absolute.is_dir():
            return str(self.workspace)
        if storage:
            return str(self.workspace / path.name) if path.name else str(self.workspace)
        if looks_like_path and not path.is_absolute() and absolute.exists():
            # A script named relative to the old working directory keeps working from the new one.
            return str(absolute.resolve())
        return None


def rewrite_args(args: list[str], mapper: _PathMapper) -> tuple[list[str], list[tuple[str, str]]]:
    rewritten: list[str] = []
    changes: list[tuple[str, str]] = []
    previous = ""
    for arg in args:
        new: str | None = None
        if isinstance(arg, str) and previous not in _LAUNCHER_OPTIONS:
            if arg.startswith("--") and "=" in arg:
                option, _, value = arg.partition("=")
                if option not in _LAUNCHER_OPTIONS:
                    mapped = mapper.map(value, storage=option in _STORAGE_OPTIONS)
                    new = f"{option}={mapped}" if mapped is not None else None
            else:
                new = mapper.map(arg, storage=previous in _STORAGE_OPTIONS)
        if new is not None and new != arg:
            changes.append((arg, new))
            rewritten.append(new)
        else:
            rewritten.append(arg)
        previous = arg if isinstance(arg, str) else ""
    return rewritten, changes


def rewrite_servers(
    servers: dict[str, Any],
    workspace: Path,
    task_files: Path | None,
    base_cwd: Path,
    child_env: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[ServerRewrite]]:
    """A copy of a parsed ``servers.json`` with every stdio child confined to ``workspace``.

    ``child_env`` (the task's ``HOME`` and the shared caches, from
    :func:`evaluation.run.task_setup.child_home.child_environment`) is added to every stdio entry's ``env``;
    what an entry sets itself wins. Works on the raw JSON (not the validated models) so every key
    the copilot understands — ``description``, ``enabled``, ``${VAR}`` placeholders, … — passes
    through untouched.
    """
    entries_key = "mcpServers" if isinstance(servers.get("mcpServers"), dict) else "servers"
    entries = servers.get(entries_key)
    if not isinstance(entries, dict):
        raise ConfigError("servers file has no 'mcpServers' object")
    out: dict[str, Any] = {}
    rewrites: list[ServerRewrite] = []
    for name, raw in entries.items():
        if not isinstance(raw, dict) or not raw.get("command"):
            out[name] = raw  # remote servers (and malformed entries, which the copilot reports)
            continue
        entry = dict(raw)
        server_cwd = base_cwd
        if isinstance(raw.get("cwd"), str) and raw["cwd"] and "${" not in raw["cwd"]:
            server_cwd = (base_cwd / Path(raw["cwd"]).expanduser()).resolve()
        mapper = _PathMapper(workspace, task_files, server_cwd)
        rewrite = ServerRewrite(server=name)
        if isinstance(raw.get("args"), list):
            entry["args"], rewrite.args = rewrite_args(list(raw["args"]), mapper)
        if isinstance(raw.get("env"), dict):
            env = dict(raw["env"])
            for key, value in env.items():
                if isinstance(value, str) and (value == "/" or _relative_to_task_root(value) is not None):
                    env[key] = mapper.map(value, storage=True) or value
                    rewrite.env.append(key)
            entry["env"] = env
        if child_env and isinstance(entry.get("env", {}), dict):  # a malformed env is the copilot's to report
            entry["env"] = merge_entry_env(entry.get("env", {}), child_env)
        entry["cwd"] = str(workspace)
        out[name] = entry
        if rewrite.args or rewrite.env:
            rewrites.append(rewrite)
    return {"mcpServers": out}, rewrites


def write_task_servers(
    servers_file: Path,
    target: Path,
    workspace: Path,
    task_files: Path | None,
    base_cwd: Path,
    child_env: Mapping[str, str] | None = None,
    text: str | None = None,
) -> list[ServerRewrite]:
    """Write the per-task servers file derived from ``servers_file``; returns what changed.

    ``text`` is the file as the run read it at its start (checked then): every task is derived from
    it, whatever happens to the file meanwhile. Without it the file is read now.
    """
    if text is None:
        try:
            text = servers_file.read_text(encoding="utf-8-sig")
        except OSError as error:
            raise ConfigError(f"{servers_file}: cannot read server list ({error.strerror}).") from None
    try:
        data = parse_json(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{servers_file}:{error.lineno}:{error.colno}: not valid JSON ({error.msg}).") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{servers_file}:1: expected a JSON object with an 'mcpServers' mapping.")
    try:
        rewritten, rewrites = rewrite_servers(data, workspace, task_files, base_cwd, child_env)
    except ConfigError as error:
        raise ConfigError(f"{servers_file}: {error}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(rewritten, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return rewrites


# ---------------------------------------------------------------------------- changes


@dataclass(frozen=True)
class _FileState:
    size: int
    digest: str


Snapshot = dict[str, _FileState]


def snapshot(workspace: Path) -> Snapshot:
    """Content fingerprints of every file under ``workspace``.

    Excluded: ``.git`` internals, and hidden entries at the top level -- the workspace is also the
    children's ``HOME``, where tools keep their state (``~/.config``, ``~/.local``), not outputs.
    """
    state: Snapshot = {}
    if not workspace.is_dir():
        return state
    for root, dirs, files in os.walk(workspace):
        top = Path(root) == workspace
        dirs[:] = [d for d in dirs if d != ".git" and not (top and d.startswith("."))]
        for name in files:
            if top and name.startswith("."):
                continue
            path = Path(root) / name
            try:
                info = path.lstat()
                if stat.S_ISLNK(info.st_mode):
                    target = os.readlink(path)
                    state[_rel(path, workspace)] = _FileState(0, "link:" + target)
                    continue
                if (kind := file_kind(info.st_mode)) is not None:
                    # Never opened: reading a named pipe nobody writes to blocks forever.
                    state[_rel(path, workspace)] = _FileState(0, "special:" + kind.tag)
                    continue
                state[_rel(path, workspace)] = _FileState(info.st_size, _digest(path))
            except OSError:
                continue  # vanished while walking: a server is still writing; not ours to report
    return state


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (not through a link); ``OSError`` if not.

    ``O_NONBLOCK``: a named pipe put in the file's place after its ``lstat`` is refused at once
    instead of blocking the open until a writer comes, which may be never.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    handle = os.fdopen(descriptor, "rb")
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        handle.close()
        raise OSError(f"{path}: not a regular file")
    return handle


def _digest(path: Path) -> str:
    hasher = hashlib.blake2b(digest_size=16)
    with open_regular(path) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def text_preview(path: Path, limit: int = PREVIEW_CHARS) -> str | None:
    """The first ``limit`` characters of a UTF-8 text file; ``None`` for binary files and
    anything that is not a regular file (a link, a named pipe: never opened)."""
    try:
        with open_regular(path) as handle:
            head = handle.read(_SNIFF_BYTES)
            size = os.fstat(handle.fileno()).st_size
    except OSError:
        return None
    if b"\x00" in head:
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:
        # A multi-byte character cut at the sniff boundary is fine; anything earlier is binary.
        if error.start < len(head) - 4:
            return None
        text = head[: error.start].decode("utf-8")
    return text[:limit] + ("…" if len(text) > limit or size > len(head) else "")


def diff(
    workspace: Path, before: Snapshot, after: Snapshot | None = None, display_root: str | None = TASK_ROOT
) -> WorkspaceChanges:
    """Files created, modified or deleted under ``workspace`` since ``before``.

    Paths are shown as the task names them (``/root/ppt/apple.pptx``) when ``display_root`` is
    set — that is what the question and the judge's key points refer to; ``root`` says where
    they really are.
    """
    after = snapshot(workspace) if after is None else after
    files: list[WorkspaceFile] = []
    for path in sorted(after.keys() | before.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        shown = f"{display_root.rstrip('/')}/{path}" if display_root else path
        if new is None:
            files.append(WorkspaceFile(path=shown, change="deleted"))
            continue
        preview = text_preview(workspace / path) if not new.digest.startswith(("link:", "special:")) else None
        files.append(
            WorkspaceFile(path=shown, change="created" if old is None else "modified", size=new.size, preview=preview)
        )
    extra: dict[str, Any] = {}
    if len(files) > MAX_LISTED_FILES:
        extra["omitted"] = len(files) - MAX_LISTED_FILES
        # Created/modified files matter more to a judge than deletions of scratch files.
        files.sort(key=lambda f: (f.change == "deleted", f.path))
        files = files[:MAX_LISTED_FILES]
    if display_root:
        extra["task_root"] = display_root
    return WorkspaceChanges(root=str(workspace), files=files, **extra)
