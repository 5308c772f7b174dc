"""Settings of the child session pool (prefix ``COPILOT_``); the README's pool section lists them."""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from pydantic import Field

from index.children.stream_limits import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_SHUTDOWN_GRACE, MAX_STDERR_LOG_BYTES
from index.catalog.filenames import safe_file_name
from index.settings import CopilotSettings, check_writable_directory

if TYPE_CHECKING:
    from index.catalog.servers import ServerConfig


class PoolSettings(CopilotSettings):
    """How child servers are started, limited, timed out and stopped."""

    call_timeout: float = Field(
        default=60.0, gt=0, description="Seconds per tool call (a server's own 'timeout' in servers.json wins)."
    )
    init_timeout: float = Field(default=60.0, gt=0, description="Seconds a child gets to start and answer initialize.")
    install_timeout: float = Field(
        default=300.0,
        gt=0,
        description="Seconds the first start of a package runner's child (npx, uvx, ...) gets: it downloads its package.",
    )
    idle_timeout: float = Field(default=600.0, gt=0, description="A child unused this many seconds is stopped.")
    max_live_children: int = Field(default=16, ge=1, description="Most children running at once (LRU eviction).")
    per_server_concurrency: int = Field(default=4, ge=1, description="Most calls in flight per child server.")
    restart_backoff: float = Field(
        default=5.0, ge=0, description="Seconds a failed start is reported again without retrying it."
    )
    wait_progress_every: float = Field(
        default=5.0,
        gt=0,
        description=(
            "Seconds between the progress notifications an execute sends while it waits for its server to start "
            "or for a call slot (to a host that gave a progress token)."
        ),
    )
    warm_max_start: float = Field(
        default=10.0,
        ge=0,
        description="route warms a server only if its last start took at most this many seconds.",
    )
    shutdown_grace: float = Field(
        default=DEFAULT_SHUTDOWN_GRACE, ge=0, description="Seconds a child gets to exit after its stdin closes."
    )
    max_message_bytes: int = Field(
        default=DEFAULT_MAX_MESSAGE_BYTES, ge=64 * 1024, description="Largest message accepted from a child."
    )
    workdir: Path | None = Field(default=None, description="Children's working dirs (default: HOME/work/<server>).")
    child_log_dir: Path | None = Field(
        default=None, description="Children's stderr logs (default: HOME/logs/children/<server>.log)."
    )
    child_log_max_bytes: int = Field(
        default=MAX_STDERR_LOG_BYTES,
        ge=64 * 1024,
        description="A running child's stderr log is rotated to <server>.log.1 when it grows past this size.",
    )

    def start_timeout(self, config: ServerConfig) -> float:
        """Seconds ``config``'s child gets to start and answer ``initialize``: ``init_timeout``, or the
        server's own ``timeout`` when that is longer (a slow first ``npx`` install). A shorter one is
        for its calls: it must not cut off a start that takes longer than a call."""
        return max(config.timeout or 0.0, self.init_timeout)

    def work_root(self) -> Path:
        return self.workdir if self.workdir is not None else self.home / "work"

    def log_root(self) -> Path:
        return self.child_log_dir if self.child_log_dir is not None else self.home / "logs" / "children"

    def check_directories(self) -> None:
        """Create the children's work and log roots now, so an unusable one is one error at start.

        Otherwise every child would fail on its first call with the same filesystem error.
        """
        for variable, path, what in (
            ("COPILOT_WORKDIR", self.work_root(), "the children's working directories"),
            ("COPILOT_CHILD_LOG_DIR", self.log_root(), "the children's logs"),
        ):
            given = variable if getattr(self, variable.removeprefix("COPILOT_").lower()) is not None else "COPILOT_HOME"
            check_writable_directory(path, given, what)

    def server_workdir(self, server: str) -> Path:
        return self.work_root() / safe_file_name(server)

    def server_log(self, server: str) -> Path:
        return self.log_root() / f"{safe_file_name(server)}.log"


#: Programs that fetch a package and run it, by the name of their command.
_RUNNERS = frozenset({"npx", "uvx", "bunx", "pnpx"})
#: Programs that do so with a subcommand: program -> its subcommand's words.
_RUNNER_SUBCOMMANDS = {
    "uv": ("tool", "run"),
    "pipx": ("run",),
    "pnpm": ("dlx",),
    "npm": ("exec",),
    "yarn": ("dlx",),
}


def package_runner(config: ServerConfig) -> str | None:
    """How ``config`` launches its server if through a package runner, in words ("npx",
    "uv tool run"), else ``None``.

    A package runner (``npx -y pkg``, ``uvx pkg``, ``uv tool run``, ``pipx run``, ``pnpm dlx``,
    ``npm exec``, ``yarn dlx``, ``bunx``, ``pnpx``) downloads and installs the package on its
    first run, so that start may take minutes. Recognised by the command's file name (a path or a
    Windows ``.cmd``/``.exe`` suffix does not matter) and, for a subcommand, the first arguments
    that are not options.
    """
    if config.command is None:
        return None
    program = PurePath(config.command.replace("\\", "/")).name.lower()
    for suffix in (".cmd", ".exe", ".bat"):
        program = program.removesuffix(suffix)
    if program in _RUNNERS:
        return program
    words = _RUNNER_SUBCOMMANDS.get(program)
    if words is None:
        return None
    given = tuple(arg for arg in config.args if not arg.startswith("-"))[: len(words)]
    return " ".join((program, *words)) if given == words else None
