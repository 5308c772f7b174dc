"""Settings shared by the index, the copilot server and the CLIs (prefix ``COPILOT_``)."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

import platformdirs
from pydantic import Field, ValidationError, field_validator
from pydantic_core import PydanticUseDefault
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from index.errors import ConfigError


def make_private_directory(path: Path) -> None:
    """``path`` and every missing directory above it, each made 0700 (logs and children's files:
    private when made here). ``mkdir(parents=True)`` gives the parents the umask's mode: making
    ``logs/children`` first left ``logs/``, which holds the trajectories, at 0755 (0777 under umask 000)."""
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current) and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    if not missing:
        path.mkdir(mode=0o700, exist_ok=True)  # an existing path: fails as mkdir does when it is no directory


def check_writable_directory(path: Path, setting: str, what: str) -> None:
    """Create ``path`` and write a file in it now, so an unusable one is one error at start
    (naming ``setting``) rather than a failure on every request that would use it."""
    try:
        make_private_directory(path)
        probe = path / f".copilot-write-check-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        reason = directory_problem(path, error)
        raise ConfigError(f"{setting}: cannot use {path} for {what} ({reason}); set {setting} to a writable directory.") from None


def check_working_directory() -> None:
    """A command started in a directory that was removed since (a shell still in a deleted
    temporary directory) fails at once with the fix, not with a traceback from the first relative
    path or a fatal error of torch's libraries."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise ConfigError(
            "the current directory no longer exists (it was removed after this shell entered it); "
            "cd to an existing directory and run the command again."
        ) from None


def directory_problem(path: Path, error: OSError) -> str:
    """What is wrong with ``path`` as a directory: mkdir says "File exists" for a symlink loop or a
    link to nothing, which sends a reader looking for a file that is not there."""
    if isinstance(error, FileExistsError):
        try:
            path.stat()
        except FileNotFoundError:
            return "a symbolic link to a path that does not exist"
        except OSError as stat_error:
            return stat_error.strerror or str(stat_error)  # "Too many levels of symbolic links"
        return "not a directory"
    return error.strerror or str(error)

PACKAGE_DIR = Path(__file__).resolve().parent
#: The repository checkout (editable installs) -- where the project's ``servers.json`` lives.
PROJECT_DIR = PACKAGE_DIR.parent
#: The project's own crawl of ``servers.json``, committed so a fresh install can build the index.
DEFAULT_CATALOG = PACKAGE_DIR / "data" / "catalog.json"
#: A user's own crawl (``index crawl`` of an installed package), read instead of the bundled snapshot.
OWN_CATALOG = "catalog.json"
#: The project's ``servers.json`` as installed with the package (in a checkout, a link to it): an
#: installed wheel has no checkout to find it in.
BUNDLED_SERVERS = PACKAGE_DIR / "data" / "servers.json"
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
#: How the model's weights compute: int8 (dynamically quantized feed-forward layers) or float32.
EmbeddingPrecision = Literal["int8", "float32"]
DEFAULT_EMBEDDING_PRECISION: EmbeddingPrecision = "int8"


#: Chroma's rule for collection names (3-512 characters of these, alphanumeric at both ends), with room
#: for the ``-servers`` suffix of the server collection made beside it (index.storage.store).
_COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,502}[A-Za-z0-9]")


def _is_ip_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _default_home() -> Path:
    return Path(platformdirs.user_data_dir("mcp-copilot", appauthor=False))


def _default_model_cache() -> Path:
    return Path(platformdirs.user_cache_dir("mcp-copilot", appauthor=False)) / "models"


class CopilotSettings(BaseSettings):
    """Read from ``COPILOT_*`` environment variables (and a ``.env`` file)."""

    model_config = SettingsConfigDict(env_prefix="COPILOT_", env_file=".env", extra="ignore")

    home: Path = Field(default_factory=_default_home, description="Index, logs and child work dirs.")
    servers: Path | None = Field(default=None, description="servers.json (Claude-Desktop form).")
    catalog: Path | None = Field(default=None, description="Tool catalog snapshot to build from.")
    embedding_model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        description="Name of a bundled model or a local sentence-transformers model directory.",
    )
    embedding_precision: EmbeddingPrecision = Field(
        default=DEFAULT_EMBEDDING_PRECISION,
        description="int8 (quantized feed-forward layers: ~2x faster on CPU, same rankings within noise) or float32.",
    )
    model_cache: Path = Field(
        default_factory=_default_model_cache,
        description="Where the embedding model's verified traced encoder is kept, so later processes load it in "
        "about a second instead of importing sentence-transformers (index.models.compiled), and the document vectors "
        "builds made with it (index.models.vector_cache).",
    )
    chroma_url: str | None = Field(default=None, description="Use a Chroma server instead of the embedded store.")
    collection: str = Field(default="tools", description="Chroma collection name.")
    log_dir: Path | None = Field(default=None, description="Trajectory logs (default: HOME/logs).")
    usage_prior: Path | None = Field(
        default=None, description="The usage prior route adds (default: HOME/usage-prior.json; python -m index usage)."
    )
    usage_prior_weight: float = Field(
        default=0.5,
        ge=0.0,
        le=10.0,
        description="route adds weight x log(1 + trajectories that ran the tool without error) to a tool's score; "
        "0 turns the usage prior off.",
    )
    session_prior_weight: float = Field(
        default=2.0,
        ge=0.0,
        le=10.0,
        description="route adds this to the score of every tool of the servers the session last ran a tool of "
        "without error (index.search.session_prior); 0 turns the session prior off.",
    )
    # Here, not in the server's settings: every process that starts children (the copilot, a
    # crawl, the benchmark runner) keeps its secrets from them (index.children.containment.secrecy).
    protect_process: bool = Field(
        default=True,
        description="On Linux, mark the copilot non-dumpable so its children cannot read its environment or memory "
        "through /proc; false only to attach a debugger or profiler.",
    )
    isolate_children: bool = Field(
        default=True,
        description="On Linux with Landlock (5.13+), run each child server in a Landlock domain of its own, so it "
        "cannot read another process's environment or memory through /proc, attach to it or (Linux 6.12+) signal "
        "it; an entry's \"isolated\": false exempts one server.",
    )

    @field_validator(
        "home", "servers", "catalog", "embedding_model", "embedding_precision", "model_cache", "chroma_url", "collection",
        "log_dir", "usage_prior", "usage_prior_weight", "session_prior_weight", mode="before",
    )
    @classmethod
    def _empty_means_unset(cls, value: Any) -> Any:
        """``COPILOT_HOME=`` (an empty line in ``.env``, ``VAR=$UNSET`` in a script) is the default, as
        ``${VAR:-default}`` would be: as a path it would be the working directory (an index under
        ``./index``, ``.`` read as the server list) and as a name an error that does not say why."""
        if isinstance(value, str) and not value.strip():
            raise PydanticUseDefault()
        return value

    @field_validator("collection")
    @classmethod
    def _chroma_collection_name(cls, value: str) -> str:
        # Checked here, not when Chroma refuses it: a build would embed every tool first (a minute).
        if not _COLLECTION_NAME.fullmatch(value) or ".." in value or _is_ip_address(value):
            raise ValueError(
                "must be 3-504 characters of letters, digits, '.', '_' and '-', begin and end with a letter or "
                "digit, and contain no '..' (Chroma's rule for collection names; '<name>-servers' is made beside it)"
            )
        return value

    @classmethod
    def load(cls, flags: Mapping[str, str] | None = None, **values: Any) -> Self:
        """The settings from the environment (and ``.env``), with ``values`` on top.

        The one way every entry point reads settings: a bad value is a :class:`ConfigError` that
        names what the user typed -- the flag (``flags`` maps field -> flag) when the value came
        from one, else the ``COPILOT_*`` variable -- never a pydantic traceback or a field name.
        """
        try:
            return cls(**values)
        except ValidationError as error:
            raise ConfigError(describe_settings_error(cls, error, values, flags or {})) from None
        except SettingsError as error:  # a complex value whose JSON does not parse
            match = re.search(r'field "([^"]+)"', str(error))
            name = setting_name(cls, match.group(1)) if match else "settings"
            raise ConfigError(f"{name}: not valid JSON ({error.__cause__ or error}).") from None

    @property
    def index_dir(self) -> Path:
        return self.home / "index"

    @property
    def chroma_dir(self) -> Path:
        """The embedded Chroma store's directory (unused with ``chroma_url``)."""
        return self.index_dir / "chroma"

    @property
    def logs_dir(self) -> Path:
        return self.log_dir if self.log_dir is not None else self.home / "logs"

    @property
    def usage_prior_file(self) -> Path:
        return self.usage_prior if self.usage_prior is not None else self.home / "usage-prior.json"

    def servers_file(self) -> Path:
        """The server list in use: ``COPILOT_SERVERS``, else ``./servers.json``, else the project's
        (the checkout's, or the copy installed with the package)."""
        if self.servers is not None:
            return self.servers
        local = Path.cwd() / "servers.json"
        if local.is_file():
            return local
        project = PROJECT_DIR / "servers.json"
        return project if project.is_file() else BUNDLED_SERVERS

    def catalog_file(self) -> Path:
        """The catalog in use: ``COPILOT_CATALOG``, else (installed, not a checkout) the user's own
        crawl in ``COPILOT_HOME`` when there is one, else the bundled snapshot."""
        if self.catalog is not None:
            return self.catalog
        own = self.home / OWN_CATALOG
        return own if not in_checkout() and own.is_file() else DEFAULT_CATALOG

    def crawl_output(self) -> Path:
        """Where ``index crawl`` writes by default: ``COPILOT_CATALOG``; in a checkout the bundled
        snapshot (refreshing it is a maintainer's job); installed, ``COPILOT_HOME/catalog.json``
        -- it overwrote the installed package's snapshot, which an upgrade then silently restored."""
        if self.catalog is not None:
            return self.catalog
        return DEFAULT_CATALOG if in_checkout() else self.home / OWN_CATALOG


def in_checkout() -> bool:
    """Whether the packages run from the project's checkout (an editable install), not an installed wheel."""
    return (PROJECT_DIR / "pyproject.toml").is_file()


def livemcpbench_dir() -> Path:
    """The public LiveMCPBench release, read in place (tests and benchmarks skip without it).

    ``COPILOT_LIVEMCPBENCH_DIR`` wins; otherwise ``shared/livemcpbench`` beside the checkout.
    """
    import os

    configured = os.environ.get("COPILOT_LIVEMCPBENCH_DIR")
    if configured:
        return Path(configured)
    return PROJECT_DIR.parent / "shared" / "livemcpbench"


def setting_name(cls: type[BaseSettings], field: str) -> str:
    """The environment variable a settings field is read from (``http_port`` -> ``COPILOT_HTTP_PORT``)."""
    info = cls.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if isinstance(alias, str):
        return alias.upper()
    return f"{cls.model_config.get('env_prefix', '')}{field}".upper()


def describe_settings_error(
    cls: type[BaseSettings], error: ValidationError, values: Mapping[str, Any], flags: Mapping[str, str]
) -> str:
    """One line per problem, joined: ``COPILOT_CALL_TIMEOUT: must be greater than 0 (got '-5')``."""
    problems = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        name = flags[field] if field in values and field in flags else setting_name(cls, field)
        message = str(item["msg"]).removeprefix("Value error, ")
        if message.startswith("Input should"):
            message = message.replace("Input should", "should", 1)
        shown = item.get("input")
        secret = any(word in field for word in ("token", "secret", "password", "key"))
        if isinstance(shown, str | int | float) and not secret and len(str(shown)) <= 200:
            message += f" (got {shown!r})"
        # A check across settings (no one field) says in its message which settings it read.
        problems.append(f"{name}: {message}" if field else message)
    return "; ".join(problems)
