"""Settings of the copilot MCP server (prefix ``COPILOT_``), on top of the shared ones.

Everything here can come from the environment (or ``.env``); ``python -m server`` flags
override the environment. List settings accept JSON (``["a","b"]``) or a comma-separated
string (``time/*,memory``).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from index.cli.console import argv_text  # an environment value is read as an argument is
from index.json_text import parse_json
from index.errors import ConfigError
from index.search.query import MAX_TOP_K
from index.settings import CopilotSettings, check_writable_directory, setting_name
from index.trust.settings import split_list

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def plain_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """``host`` (brackets allowed) as an address, IPv4 for an IPv4-mapped one (``::ffff:127.0.0.1``,
    a dual-stack socket's view of an IPv4 peer); ValueError when it is no address."""
    address = ipaddress.ip_address(host.strip("[]"))
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def is_loopback_host(host: str) -> bool:
    """True when binding ``host`` exposes the server only to this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return plain_address(host).is_loopback
    except ValueError:
        return False


class ServerSettings(CopilotSettings):
    """The copilot server's settings; see the README's table for each ``COPILOT_*`` variable."""

    # Safety -----------------------------------------------------------------------------
    allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Only these servers/tools are routed to and run ('server' or 'server/tool' globs); empty = all.",
    )
    deny: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Servers/tools that are never routed to nor executed (wins over allow)."
    )
    read_only: bool = Field(
        default=False,
        description="Allow only tools that declare readOnlyHint: true (after overrides) or match read_only_allow.",
    )
    read_only_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="'server' or 'server/tool' globs read-only mode allows besides read-only tools."
    )
    confirm: Literal["destructive", "untrusted", "never", "always"] = Field(
        default="destructive", description="Which tools need the user's confirmation (see the Trust section)."
    )
    result_warning: bool = Field(
        default=False,
        description="Prefix tool results that carry injection markers with a warning to the model (always logged).",
    )
    untrusted: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Server names (globs) treated as 'trusted': false: their unannotated tools need confirmation.",
    )
    confirm_ttl: float = Field(default=300.0, gt=0, description="Seconds a confirm token stays valid.")
    max_result_chars: int = Field(
        default=100_000, ge=1000, description="Text of a tool result beyond this many characters is cut."
    )
    max_result_blocks: int = Field(
        default=100, ge=1, description="Content blocks of a tool result beyond this many are dropped (with a note)."
    )
    max_result_bytes: int = Field(
        default=5_000_000,
        ge=1000,
        description="Base64 bytes of images, audio and binary resources one tool result may carry (rest dropped).",
    )
    max_top_k: int = Field(default=20, ge=1, le=MAX_TOP_K, description="Upper bound of route's top_k.")

    # Relaying between host and children ---------------------------------------------------
    roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description=(
            "Directories the user works in, answered to children's roots/list and used as the working directory of "
            "'works_in: roots' servers (os.pathsep-separated or a JSON list); empty = the host's own roots."
        ),
    )
    input_timeout: float = Field(
        default=300.0,
        gt=0,
        description="Seconds a child's question (elicitation, sampling, roots) may wait for the host's answer.",
    )
    child_log_level: str = Field(
        default="warning",
        description="Lowest level of children's log messages forwarded to hosts that never sent logging/setLevel.",
    )

    # HTTP transport ---------------------------------------------------------------------
    http_host: str = Field(default="127.0.0.1", description="Interface the HTTP transport binds to.")
    http_port: int = Field(default=8765, ge=0, le=65535)
    http_token: SecretStr | None = Field(
        default=None, description="Bearer token HTTP clients must send; required when binding beyond loopback."
    )
    http_token_file: Path | None = Field(
        default=None,
        description="File holding the bearer token (first line), so the token is in neither argv nor the environment.",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Browser Origins accepted besides loopback ones (exact, or ending in ':*' for any port).",
    )
    http_session_idle_timeout: float = Field(
        default=1800.0,
        gt=0,
        description="Seconds an HTTP session may stay idle before it is closed (its trajectory gets session_end).",
    )
    http_max_body_bytes: int = Field(
        # As much as the largest message the copilot takes from a child: an execute's params must
        # fit (the SDK's own 4 MiB would refuse a legitimate 5 MB file write).
        default=16 * 1024 * 1024,
        ge=64 * 1024,
        description="Largest HTTP request body accepted; a larger one gets 413 and is not read further.",
    )
    http_max_sessions: int = Field(
        # Sessions a client never ends live until the idle timeout; the SDK's own bound, 10,000,
        # lets them hold some 150 MB (and an initialize of up to 64 KiB each, kept twice).
        default=1000,
        ge=1,
        description="Most handshake-era HTTP sessions open at once; another initialize gets 503 until one ends.",
    )
    http_read_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds an HTTP client may take to send a request's line and headers, or pause while "
        "sending its body, before it gets 408 and is disconnected.",
    )

    # Trajectory logging -------------------------------------------------------------------
    task_id: str | None = Field(default=None, description="Benchmark task id written to session_start.")
    question: str | None = Field(default=None, description="The task's question written to session_start.")
    category: str | None = Field(default=None, description="The task's category written to session_start.")
    log_file: Path | None = Field(
        default=None, description="Write every session's trajectory to this exact file (benchmark runs)."
    )
    log_max_field_chars: int = Field(
        default=100_000, ge=100, description="Longest string (query, param, result text) written to a trajectory."
    )
    log_max_event_chars: int = Field(
        default=1_000_000, ge=1000, description="Most characters of one trajectory event (what is beyond is cut)."
    )

    # Background indexing ------------------------------------------------------------------
    auto_index: bool = Field(default=True, description="Crawl and index servers the index does not know, at startup.")
    warm_index: bool = Field(
        default=True,
        description="Load the search index (embedding model) in the background at startup, not at the first route.",
    )
    route_model_wait: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="Seconds a route arriving while the embedding model loads waits for it before answering by "
        "keywords alone (0: at once). Rankings that must not depend on how fast the model loads (benchmark "
        "runs, tests) set it.",
    )
    crawl_concurrency: int = Field(default=4, ge=1)
    crawl_timeout: float = Field(default=120.0, gt=0, description="Seconds per server while crawling.")

    livemcpbench_alias: bool = Field(
        default=False,
        description="Also publish 'execute-tool', the name LiveMCPBench's prompts use for execute (benchmark runs).",
    )
    fast_relay: bool = Field(
        default=True,
        description="Over stdio pipes, serve execute beside the SDK's dispatcher where that is equivalent (server.stdio.fast).",
    )

    # What hosts see of the children (server.aggregate) ----------------------------------------
    expose: Literal["meta", "routed", "all"] = Field(
        default="meta",
        description="Tools in the copilot's own tools/list: 'meta' (route, execute), 'routed' (plus every tool "
        "route returned in this session, under a namespaced name), 'all' (plus every tool; for small pools).",
    )
    expose_max_tools: int = Field(
        default=50, ge=1, description="'routed' mode: most child tools listed per session (the oldest make room)."
    )
    expose_unprefixed: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Servers (globs) whose tools, prompts and resource URIs keep their own names unless another such "
            "server whose name sorts first has them (the rest are prefixed)."
        ),
    )
    list_page_size: int = Field(
        default=100, ge=1, description="Items per page of tools/list, prompts/list, resources/list (nextCursor)."
    )

    log_level: str = Field(default="INFO", description="Level of the copilot's own log (stderr / log file).")

    @field_validator(
        "allow", "deny", "untrusted", "allowed_origins", "read_only_allow", "expose_unprefixed", mode="before"
    )
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return split_list(value)

    @field_validator("allowed_origins")
    @classmethod
    def _origins_in_lower_case(cls, value: list[str]) -> list[str]:
        # Scheme, host and port are case-insensitive; requests' Origins are compared lowered too.
        return [origin.lower() for origin in value]

    @field_validator("http_token_file", "log_file", "http_host", "http_token", mode="before")
    @classmethod
    def _empty_path_means_unset(cls, value: Any) -> Any:
        # Blank (an empty line in .env) would be the path ".": "Is a directory" instead of the
        # default; as the host, every interface (bind("")) instead of loopback.
        return cls._empty_means_unset(value)

    @field_validator("task_id", "question", "category")
    @classmethod
    def _read_as_utf8(cls, value: str | None) -> str | None:
        # Under a locale that is not UTF-8 an environment value's non-ASCII bytes arrive as lone
        # surrogates, which the trajectory wrote as "?" (t??che-1): the UTF-8 they are.
        return value if value is None else argv_text(value)

    @field_validator("roots", mode="before")
    @classmethod
    def _path_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return parse_json(text)
            return [part for part in text.split(os.pathsep) if part.strip()]
        return value

    @field_validator("roots")
    @classmethod
    def _existing_directories(cls, value: list[Path]) -> list[Path]:
        resolved = [path.expanduser().resolve() for path in value]
        missing = [str(path) for path in resolved if not path.is_dir()]
        if missing:
            raise ValueError(f"not an existing directory: {', '.join(missing)}")
        return resolved

    @field_validator("child_log_level")
    @classmethod
    def _mcp_level(cls, value: str) -> str:
        level = value.strip().lower()
        levels = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
        if level not in levels:
            raise ValueError(f"must be one of {', '.join(levels)}")
        return level

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    @property
    def binds_loopback(self) -> bool:
        return is_loopback_host(self.http_host)

    @model_validator(mode="after")
    def _token_from_file(self) -> ServerSettings:
        if self.http_token is None and self.http_token_file is not None:
            try:
                lines = self.http_token_file.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as error:
                raise ValueError(
                    f"cannot read the token file {self.http_token_file} (--token-file or COPILOT_HTTP_TOKEN_FILE): {error}"
                ) from None
            token = lines[0].strip() if lines else ""
            if not token:
                raise ValueError(
                    f"the token file {self.http_token_file} (--token-file or COPILOT_HTTP_TOKEN_FILE) is empty: put the "
                    "token on its first line"
                )
            self.http_token = SecretStr(token)
        return self

    def check_log_paths(self) -> None:
        """Make sure trajectories can be written before serving (else every request would log the failure)."""
        if self.log_file is None:
            given = "COPILOT_LOG_DIR" if self.log_dir is not None else "COPILOT_HOME"
            check_writable_directory(self.logs_dir, given, "the trajectory logs")
            return
        check_writable_directory(self.log_file.parent, "COPILOT_LOG_FILE", "the trajectory log's directory")
        try:
            with self.log_file.open("a", encoding="utf-8"):
                pass
        except OSError as error:
            raise ConfigError(
                f"COPILOT_LOG_FILE: cannot append to {self.log_file} ({error.strerror or error}); set it to a writable file."
            ) from None

    @property
    def token(self) -> str | None:
        return self.http_token.get_secret_value() if self.http_token else None


#: ``COPILOT_*`` variables read outside the settings classes (by benchmarks, tests' helpers, the
#: LiveMCPBench importer): known, so never reported as typos.
OTHER_VARIABLES = frozenset(
    {
        "COPILOT_LIVEMCPBENCH_DIR", "COPILOT_LIVEMCPBENCH_ALIAS", "COPILOT_CONFORMANCE_CACHE", "COPILOT_WARM_INDEX",
        "COPILOT_REQUIRE_CONFORMANCE", "COPILOT_REQUIRE_BROWSER", "COPILOT_SERVER_DIR",
    }
)


def dotenv_names(path: Path) -> dict[str, str]:
    """The variables a ``.env`` file sets (as the settings read it), or none when it is absent or unreadable."""
    from dotenv import dotenv_values  # noqa: PLC0415 -- only at start-up

    try:
        if not path.is_file():
            return {}
        return {name: value or "" for name, value in dotenv_values(path, encoding="utf-8").items()}
    except (OSError, UnicodeDecodeError):
        return {}


def unknown_variables(environ: Mapping[str, str], *, source: str | None = None) -> list[str]:
    """A warning for each ``COPILOT_*`` variable in ``environ`` that nothing reads (a typo, most
    likely: ``COPILOT_CALL_TIMOUT`` is ignored), naming the nearest variable that is read.
    ``source`` names where they were set (a ``.env`` file) when not in the environment."""
    import difflib  # noqa: PLC0415 -- only at start-up

    from index.trust.settings import TrustSettings  # noqa: PLC0415
    from server.pool.settings import PoolSettings  # noqa: PLC0415

    known = set(OTHER_VARIABLES)
    for cls in (ServerSettings, PoolSettings, TrustSettings):
        known.update(setting_name(cls, field) for field in cls.model_fields)
    warnings = []
    for name in sorted(environ):
        if not name.upper().startswith("COPILOT_") or name.upper() in known:
            continue
        # Compared without the shared prefix, which would make every name look alike.
        suffixes = {variable.removeprefix("COPILOT_"): variable for variable in known}
        nearest = difflib.get_close_matches(name.upper().removeprefix("COPILOT_"), sorted(suffixes), n=1, cutoff=0.8)
        hint = f"; did you mean {suffixes[nearest[0]]}?" if nearest else "; see the README's Configuration table"
        where = f" in {source}" if source else ""
        warnings.append(f"{name} is set{where} but no setting of that name exists, so it is ignored{hint}")
    return warnings
