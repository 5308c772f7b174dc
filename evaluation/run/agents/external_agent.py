"""Any agent as a command (``--agent-cmd``): one process per task, answer from a file or stdout.

The template's placeholders are substituted shell-safely (each value ``shlex.quote``-d), the
command runs under ``/bin/sh`` in the task's workspace, in its own process group, with stdout
and stderr kept in files of bounded size (:mod:`evaluation.run.agents.bounded_log`). A missing program,
a non-zero exit or a timeout is a failed task with the reason, never an exception out of the runner.
"""

from __future__ import annotations

import codecs
import errno
import json
import logging
import os
import re
import shlex
import shutil
import signal
import string
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import psutil
from pydantic import BaseModel, ValidationError

from index.json_text import arguments_for_os, environment_for_os, parse_json, validation_reason
from evaluation.run.agents.agent import stderr_tail
from evaluation.run.agents.bounded_log import DEFAULT_MAX_AGENT_LOG_BYTES, PIPE_DRAIN_SECONDS, BoundedLog, LogCut, pump
from evaluation.run.models import ErrorKind
from evaluation.run.task_setup.workspace import file_kind, open_regular
from index.children.containment.guard import child_guard
from index.children.containment.watchdog import TAG_VARIABLE, tagged
from index.errors import ConfigError
from server.trajectory.records import Usage

logger = logging.getLogger(__name__)

PLACEHOLDERS = ("question", "question_file", "mcp_config", "workspace", "task_id", "answer_file")
#: Seconds the agent's tree gets after SIGTERM (and after SIGKILL) before the runner moves on.
_KILL_GRACE = 5.0
#: Seconds between looks at whether the agent exited (see :func:`_wait_exit`).
_EXIT_POLL = 0.02
#: First words the shell itself handles (or that run the program named after them), so no program
#: of that name need be on PATH: POSIX's special builtins (``set``, ``.``, ``trap``, ``eval`` …),
#: the regular builtins a command line starts with (``ulimit``, ``umask``, ``cd`` …), reserved
#: words, and wrappers such as ``env``/``nohup`` (which exist as programs, but so does what they run).
_SHELL_WORDS = frozenset(
    {
        # special builtins
        ":", ".", "break", "continue", "eval", "exec", "exit", "export", "readonly", "return", "set", "shift",
        "times", "trap", "unset",
        # regular builtins
        "alias", "bg", "cd", "command", "false", "fc", "fg", "getopts", "hash", "jobs", "kill", "pwd", "read",
        "true", "type", "ulimit", "umask", "unalias", "wait",
        # reserved words
        "!", "{", "}", "(", "case", "for", "if", "until", "while",
        # wrappers
        "env", "time", "nice", "timeout", "nohup",
    }
)  # fmt: skip
#: Linux's limit on one argument (MAX_ARG_STRLEN): the whole rendered command is one, ``sh -c``'s.
_MAX_ARGUMENT_BYTES = 131_072
#: Characters that end a word for /bin/sh even without a space (``true;agent``, ``(cd x && agent)``).
_SHELL_OPERATORS = re.compile(r"[;&|<>()]")


class ExternalResult(BaseModel):
    answer: str | None = None
    answer_source: str | None = None  # "answer_file" | "stdout"
    exit_code: int | None = None
    timed_out: bool = False
    error: str | None = None
    error_kind: ErrorKind | None = None
    usage: Usage | None = None
    #: Log file name -> what was cut from it (only logs that passed ``--max-agent-log-bytes``).
    logs_cut: dict[str, LogCut] = {}


def check_template(template: str) -> None:
    """Unknown placeholders fail before any task runs (``{{``/``}}`` are literal braces)."""
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        raise ConfigError(f"--agent-cmd: malformed template ({error}); write literal braces as {{{{ and }}}}.") from None
    unknown = sorted({name for name in fields if name not in PLACEHOLDERS})
    if unknown:
        raise ConfigError(
            f"--agent-cmd: unknown placeholder(s) {', '.join('{' + n + '}' for n in unknown)}; "
            f"known: {', '.join('{' + n + '}' for n in PLACEHOLDERS)}."
        )
    if not template.strip():
        raise ConfigError("--agent-cmd: the command template is empty.")


def render_command(template: str, values: Mapping[str, str]) -> str:
    """The template with every placeholder replaced by its shell-quoted value."""
    return template.format(**{name: shlex.quote(str(values[name])) for name in PLACEHOLDERS})


def missing_program(template: str) -> str | None:
    """Why the command's program cannot run (``None`` when it can, or when the shell decides)."""
    sample = render_command(template, {name: "x" for name in PLACEHOLDERS})
    try:
        words = shlex.split(sample)
    except ValueError as error:
        return f"the command is not valid shell syntax ({error})"
    words = [w for w in words if not ("=" in w and w.split("=", 1)[0].isidentifier())]  # FOO=bar prefixes
    if not words or words[0] in _SHELL_WORDS or words[0].startswith("{"):
        return None
    # shlex does not split at operators: "(cd" opens a subshell, "set;" is the builtin ``set``.
    program = _SHELL_OPERATORS.split(words[0], maxsplit=1)[0]
    if not program or program in _SHELL_WORDS or "()" in words[0]:
        return None  # a subshell, a function definition: the shell decides
    if "/" in program:
        path = Path(program).expanduser()
        if not path.exists():
            return f"agent program {program!r} does not exist"
        if not os.access(path, os.X_OK) or path.is_dir():
            return f"agent program {program!r} is not executable"
        return None
    if shutil.which(program) is None:
        return f"agent program {program!r} is not on PATH"
    return None


async def run_external_agent(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdout_path: Path,
    stderr_path: Path,
    answer_file: Path,
    timeout: float,
    max_log_bytes: int = DEFAULT_MAX_AGENT_LOG_BYTES,
) -> ExternalResult:
    """Run one rendered command to completion or until ``timeout``; never raises for its failures.

    Its stdout and stderr go to ``stdout_path`` and ``stderr_path``, each at most ``max_log_bytes``
    (head and tail, with a note of what was cut between them).
    """
    # The agent runs as the copilot runs its children: under a guardian that dies with the runner
    # (SIGKILL included) and takes the agent's tree with it, registered with the runner's watchdog,
    # and with a tag everything it starts inherits, also what leaves its session (setsid, daemons),
    # which finds those at the end. A killed runner left the agent and its copilot running before:
    # they spent tokens, and wrote into the rerun's trajectory and workspace at the same paths.
    guard = child_guard()
    tag = guard.new_tag()
    env = {**env, TAG_VARIABLE: tag}
    stdout_log = BoundedLog(stdout_path, "stdout", max_log_bytes)
    stderr_log = BoundedLog(stderr_path, "stderr", max_log_bytes)
    try:
        try:
            process = await anyio.open_process(
                arguments_for_os(guard.launch_argv("/bin/sh", ["-c", command])),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=environment_for_os(env),
                start_new_session=True,
            )
        except OSError as error:
            if error.errno == errno.E2BIG:
                # The program exists (check_setup found it); this task's command line does not fit
                # the kernel's limit (128 KiB for one argument), typically a long {question}.
                size = len(command.encode("utf-8", errors="replace"))
                what = (
                    f"the command line is too long ({size:,} bytes; the system allows at most "
                    f"{_MAX_ARGUMENT_BYTES:,} in one argument)"
                    if size > _MAX_ARGUMENT_BYTES
                    else f"the command line ({size:,} bytes) and the environment are too large for the system"
                )
                return ExternalResult(
                    error=f"cannot start the agent command: {what}; pass {{question_file}} instead of {{question}} in --agent-cmd",
                    error_kind="agent_failed",
                )
            return ExternalResult(error=f"cannot start the agent command: {error}", error_kind="agent_not_found")
        guard.register(process.pid, tag)
        try:
            timed_out = await _supervise(process, stdout_log, stderr_log, timeout, tag)
        finally:
            guard.unregister(process.pid)
    finally:
        # Also on cancellation (Ctrl-C): the logs get their tails and the note of what was cut.
        cuts = {log.path.name: cut for log in (stdout_log, stderr_log) if (cut := log.close()) is not None}
    result = ExternalResult(exit_code=process.returncode, timed_out=timed_out, logs_cut=cuts)
    unread = _read_answer(result, answer_file, stdout_path, cuts.get(stdout_path.name))
    tail = stderr_tail(stderr_path, lines=3, chars=400, cut=cuts.get(stderr_path.name))
    if timed_out:
        result.error, result.error_kind = f"the agent did not finish within {timeout:g} s (--task-timeout)", "timeout"
    elif process.returncode == 127:
        result.error = f"the agent command was not found by the shell (exit 127){': ' + tail if tail else ''}"
        result.error_kind = "agent_not_found"
    elif process.returncode != 0:
        result.error = f"the agent exited with status {process.returncode}{': ' + tail if tail else ''}"
        result.error_kind = "agent_failed"
    elif result.answer is None:
        result.error = f"the agent exited without an answer ({unread + ';' if unread else 'no answer file,'} empty stdout)"
        result.error_kind = "no_answer"
    return result


async def _supervise(
    process: anyio.abc.Process, stdout_log: BoundedLog, stderr_log: BoundedLog, timeout: float, tag: str
) -> bool:
    """Copy the agent's output into its logs until it exits or ``timeout``, then stop its whole
    tree; whether it timed out."""
    try:
        async with anyio.create_task_group() as pumps:
            pumps.start_soon(pump, process.stdout, stdout_log)
            pumps.start_soon(pump, process.stderr, stderr_log)
            try:
                with anyio.move_on_after(timeout) as scope:
                    await _wait_exit(process)
            finally:
                # Also on cancellation (Ctrl-C): no agent, copilot or child server may outlive the task.
                with anyio.CancelScope(shield=True):
                    await _kill_tree(process.pid, process, tag)
                # With the tree gone the pipes end and the pumps finish; something that escaped even
                # the tag and still holds a pipe must not keep the task waiting (as for the copilot's
                # stderr pipe: the same drain).
                pumps.cancel_scope.deadline = anyio.current_time() + PIPE_DRAIN_SECONDS
    finally:
        with anyio.CancelScope(shield=True):
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    await stream.aclose()
            # Closes the pipe transports now, while the event loop runs: left to the garbage
            # collector (a process that escaped still holds the write end), they would be closed
            # after the loop, printing "Exception ignored … Event loop is closed". The shell has
            # exited (or was killed), so waiting for it is short; bounded all the same.
            with anyio.move_on_after(_KILL_GRACE):
                await process.aclose()
    return scope.cancelled_caught


async def _wait_exit(process: anyio.abc.Process) -> None:
    """Until the agent's shell exited. Polls ``returncode``: asyncio's ``wait()`` also waits for the
    pipes to close, which anything the agent left running (holding its stdout) would delay."""
    while process.returncode is None:
        await anyio.sleep(_EXIT_POLL)


#: Most bytes of an agent's stdout read as its answer: a flooding agent must not make the
#: runner hold (or log) all of it; the end is kept, where an answer is printed.
MAX_STDOUT_ANSWER_BYTES = 1_000_000


def _read_bounded(path: Path, limit: int, cut: LogCut | None = None) -> str:
    """The end of the agent's stdout, at most ``limit`` bytes, saying how much came before it.

    A capped log (``cut``) is read from its kept tail only: the note and the head before it are
    the runner's, not the end of what the agent wrote.
    """
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        keep = min(limit, size if cut is None else cut.tail)
        handle.seek(size - keep)
        tail = handle.read(keep).decode("utf-8", errors="replace")
    written = size if cut is None else cut.written
    return tail if written <= keep else f"[... the first {written - keep:,} bytes of the agent's output omitted ...]\n{tail}"


def _read_answer_file(path: Path, limit: int) -> tuple[str, str | None]:
    """The agent's answer file (its first ``limit`` bytes, saying how much came after them) and why
    it was not read, if it was not.

    Only a regular file is read. A named pipe would block the runner forever (the agent that
    could write to it is gone), a device could be endless; a symbolic link is refused too,
    because the runner would read whatever it names with its own rights (``/proc/self/environ``:
    the runner's API keys) into the trajectory. ``O_NOFOLLOW | O_NONBLOCK`` and the check on the
    opened descriptor keep that so when something swaps the file after the ``lstat``.
    """
    try:
        kind = file_kind(os.lstat(path).st_mode)
        if kind is not None:
            return "", f"its answer file is {kind.words}, not a regular file, so it was not read"
        handle = open_regular(path)
    except FileNotFoundError:
        return "", None
    except OSError as error:
        return "", f"its answer file cannot be read ({error.strerror or error})"
    with handle:
        info = os.fstat(handle.fileno())
        head = handle.read(limit)
    # A character cut at the limit is dropped (and counted as omitted), not shown garbled.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(head, final=info.st_size <= len(head))
    shown = len(head) - len(decoder.getstate()[0])
    if info.st_size > shown:
        text += f"\n[... the last {info.st_size - shown:,} bytes of the answer file omitted ...]"
    return text, None


def _read_answer(result: ExternalResult, answer_file: Path, stdout_path: Path, cut: LogCut | None = None) -> str | None:
    """Set the answer from the answer file, else from stdout; why the answer file was not read."""
    written, problem = _read_answer_file(answer_file, MAX_STDOUT_ANSWER_BYTES)
    written = written.strip()
    if problem:
        logger.warning("the agent left %s, but %s; its stdout is the answer, if any", answer_file, problem)
    if written:
        result.answer, result.answer_source = written, "answer_file"
        return problem
    if result.exit_code != 0 or result.timed_out:
        return problem  # a crashed agent's partial stdout is not an answer
    stdout = _read_bounded(stdout_path, MAX_STDOUT_ANSWER_BYTES, cut).strip()
    if not stdout:
        return problem
    parsed = _headless_json(stdout)
    if parsed is not None:
        answer, usage, is_error = parsed
        if is_error:
            result.error, result.error_kind = f"the agent reported an error: {answer[:300]}", "agent_failed"
        result.answer, result.answer_source, result.usage = answer or None, "stdout", usage
        return problem
    result.answer, result.answer_source = stdout, "stdout"
    return problem


def _headless_json(stdout: str) -> tuple[str, Usage | None, bool] | None:
    """Claude Code's ``--output-format json`` result object: answer, usage and cost."""
    try:
        data: Any = parse_json(stdout)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("result"), str):
        return None
    usage = None
    raw = data.get("usage")
    if isinstance(raw, dict):
        models = data.get("modelUsage")
        try:
            input_tokens = sum(int(raw.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
            usage = Usage(
                model=next(iter(models), None) if isinstance(models, dict) and models else None,
                input_tokens=input_tokens,
                output_tokens=int(raw.get("output_tokens") or 0),
                cost=float(data["total_cost_usd"]) if isinstance(data.get("total_cost_usd"), (int, float)) else None,
            )
        except ValidationError as error:  # NaN, negative or absurd numbers: the answer still counts
            logger.warning("the agent's usage report is not usable, so none is logged: %s", validation_reason(error))
        except (TypeError, ValueError, OverflowError) as error:  # token counts that are no numbers
            logger.warning("the agent's usage report is not usable, so none is logged: %s", error)
    return data["result"], usage, bool(data.get("is_error"))


async def _kill_tree(pid: int, process: Any, tag: str | None = None) -> None:
    """Stop the agent's process group and every descendant (the copilot and its children).

    Runs after every task, not only on timeout: an agent that exits while its copilot is still
    running must not leave processes behind.
    """
    members = await anyio.to_thread.run_sync(_tree_and_group, pid, tag)
    _signal_all(pid, members, signal.SIGTERM)
    with anyio.move_on_after(_KILL_GRACE):
        await _wait_exit(process)
    alive = [p for p in members if _alive(p)]
    if alive:
        _, alive = await anyio.to_thread.run_sync(lambda: psutil.wait_procs(alive, timeout=_KILL_GRACE))
    if alive or process.returncode is None:
        _signal_all(pid, alive, signal.SIGKILL)
        with anyio.move_on_after(_KILL_GRACE):
            await _wait_exit(process)


def _tree_and_group(pid: int, tag: str | None = None) -> list[psutil.Process]:
    """Descendants of ``pid``, everything still in its process group (orphans included) and every
    process carrying ``tag`` (those that left the group and the tree)."""
    found: dict[int, psutil.Process] = {p.pid: p for p in tagged(tag)} if tag else {}
    try:
        for child in psutil.Process(pid).children(recursive=True):
            found[child.pid] = child
    except psutil.Error:
        pass
    for candidate in psutil.process_iter():
        try:
            if candidate.pid != pid and os.getpgid(candidate.pid) == pid:
                found[candidate.pid] = candidate
        except (OSError, psutil.Error):
            continue
    for member in list(found.values()):
        try:
            for child in member.children(recursive=True):
                found.setdefault(child.pid, child)
        except psutil.Error:
            continue
    return [p for p in found.values() if _alive(p)]


def _signal_all(pgid: int, processes: list[psutil.Process], signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass
    for child in processes:
        try:
            child.send_signal(signum)
        except psutil.Error:
            pass


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
