"""Server lists in Claude-Desktop ``mcpServers`` form: loading, validation, child environments.

The same loader reads the project's ``servers.json`` and any user's Claude Desktop / Claude
Code / Cursor config: unknown keys are ignored, ``${VAR}`` and ``${VAR:-default}`` expand from
the copilot's environment, and an invalid file fails with file, line, server and what is wrong --
also one that gives a key twice (``json.loads`` would keep the last without a word) or a ``type``
that contradicts the entry's ``command`` or ``url``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, model_validator

from index.json_text import has_lone_surrogate, os_text, parse_json
from index.children.containment.environment import (
    inherited_environment, looks_secret_name, system_trust_bundle, with_system_trust,
)
from index.errors import ConfigError
from index.catalog.redact import Redactor
from index.catalog.self_entry import SELF_ENTRY_ADVICE, launches_copilot
from index.cli.display import printable
from index.trust.overrides import AnnotationOverride

logger = logging.getLogger(__name__)

Transport = Literal["stdio", "streamable-http", "sse"]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _placeholder_part(value: str) -> int:
    """Where the part of ``value`` that can hold a placeholder ends (after its last ``}``): past it the
    default of a ``${A:-`` would scan to the end for a ``}`` from every such start (quadratic time)."""
    return value.rfind("}") + 1

#: Filled in when a child starts, not from the environment: the child's own data directory
#: (``$COPILOT_WORKDIR/<server>``: per copilot, per task in benchmark runs), for servers that would
#: otherwise keep their data inside a shared package cache (the memory server) or the user's home.
SERVER_DIR_VARIABLE = "COPILOT_SERVER_DIR"
#: Also filled in when a child starts: the directory of the user's files a ``works_in: roots`` server
#: works in (the first of the host's roots, or ``COPILOT_ROOTS``); the child's own directory when
#: none is known -- e.g. the filesystem server's allowed directory instead of ``/``.
ROOT_VARIABLE = "COPILOT_ROOT"
_LATE_VARIABLES = frozenset({SERVER_DIR_VARIABLE, ROOT_VARIABLE})
#: A late placeholder as :func:`expand_variables` leaves it: ``${COPILOT_ROOT}`` or ``${COPILOT_ROOT:-default}``.
_LATE_VAR = re.compile(r"\$\{(" + SERVER_DIR_VARIABLE + "|" + ROOT_VARIABLE + r")(?::-([^}]*))?\}")

#: ``type`` values of other hosts' configs by what they launch (compared without case, ``-`` and ``_``):
#: Claude Code and VS Code write stdio / http / sse, Cursor also streamable-http, Cline streamableHttp.
#: Other values are left alone, as before: the entry's ``command`` or ``url`` decides.
_STDIO_TYPES = frozenset({"stdio"})
_REMOTE_TYPES = frozenset({"http", "sse", "streamablehttp"})


def _folded_type(kind: str | None) -> str:
    return (kind or "").lower().replace("-", "").replace("_", "")


def _type_family(kind: str | None) -> Literal["stdio", "remote"] | None:
    folded = _folded_type(kind)
    if folded in _STDIO_TYPES:
        return "stdio"
    if folded in _REMOTE_TYPES:
        return "remote"
    return None


class ServerConfig(BaseModel):
    """One entry of ``mcpServers``: a stdio command or a remote ``url``."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    type: str | None = Field(
        default=None,
        description="Other hosts' transport key: stdio | http | sse | streamable-http; must agree with command/url.",
    )
    description: str = ""
    category: str = ""
    enabled: bool = True
    disabled: bool = False
    reason: str | None = Field(default=None, description="Why the server is disabled.")
    timeout: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="Seconds per call (and per crawl)."
    )
    cwd: str | None = None
    works_in: Literal["own", "roots"] = Field(
        default="own",
        description=(
            "Where the server reads and writes the user's files: 'roots' runs it in the first of the host's roots "
            "(or COPILOT_ROOTS); 'own' in its own work dir. An explicit 'cwd' wins over both."
        ),
    )
    stateful: bool = True
    trusted: bool = True
    isolated: bool = Field(
        default=True,
        description="Run the server in a Landlock domain of its own (Linux; COPILOT_ISOLATE_CHILDREN); false for a "
        "server that must signal or inspect processes it did not start, or needs CAP_SYS_ADMIN.",
    )
    inherit_env: list[str] = Field(
        default_factory=list,
        description="Names (globs) of the copilot's environment variables this child gets unchanged, credentials "
        "included (a private package index with a password, an authenticating proxy).",
    )
    annotations: dict[str, AnnotationOverride] = Field(
        default_factory=dict, description="Annotation overrides per tool name or glob (index.trust.overrides)."
    )
    confirm: list[str] = Field(default_factory=list, description="Tools (names or globs) that always need confirmation.")

    #: Values filled in from the copilot's environment (value -> its ``${VAR}``), shown as placeholders.
    _expanded: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _passable_to_a_process(self) -> ServerConfig:
        """Text a process cannot be given fails here, naming its key, not later as "embedded null byte"."""
        texts = [("command", self.command), ("cwd", self.cwd), *((f"args[{i}]", arg) for i, arg in enumerate(self.args))]
        texts += [(f"env.{key}", value) for key, value in self.env.items()]
        for where, text in texts:
            if text is not None and "\x00" in text:
                raise ValueError(f"'{where}' holds a NUL character, which no process can be given: remove it")
        for key in self.env:
            if not key or "=" in key or "\x00" in key:
                raise ValueError(
                    f"'env' names the variable {json.dumps(key)}, which no environment can hold (a name must not be "
                    "empty, nor hold '=' or a NUL character)"
                )
        return self

    @model_validator(mode="after")
    def _one_launch_method(self, info: ValidationInfo) -> ServerConfig:
        family = _type_family(self.type)
        shown = json.dumps(self.type)
        if self.command and self.url:
            advice = {
                "stdio": f'its "type": {shown} says the copilot starts it: remove \'url\'',
                "remote": f"its \"type\": {shown} says it is remote: remove 'command' (and 'args')",
            }.get(family or "", "remove 'url' for a server the copilot starts, or 'command' (and 'args') for a remote one")
            raise ValueError(f"give either 'command' (stdio) or 'url' (remote), not both: {advice}")
        if not self.command and not self.url:
            raise ValueError("give either 'command' (stdio) or 'url' (remote), not both or neither")
        # Otherwise the launch key would silently win over the type the user wrote.
        if family == "stdio" and self.url:
            raise ValueError(
                f"\"type\": {shown} is for a server the copilot starts with a 'command', but the entry has a 'url' "
                "and no 'command': for a remote server set \"type\" to \"http\" (or \"sse\") or remove it; for a local "
                "one give 'command' and 'args' instead of 'url'"
            )
        if family == "remote" and self.command:
            raise ValueError(
                f"\"type\": {shown} is for a remote server at a 'url', but the entry has a 'command' and no 'url': "
                "for a server the copilot starts set \"type\" to \"stdio\" or remove it; for a remote one give 'url' "
                "instead of 'command'"
            )
        # A disabled server whose url still holds a placeholder (its variable is unset) is never reached.
        if self.url is not None and not (not self.is_enabled and "${" in self.url):
            parsed = urlsplit(self.url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                # Redacted before it is cut short: a secret cut in two would no longer be recognised.
                secrets = (info.context or {}).get("secrets", {}) if isinstance(info.context, dict) else {}
                shown = Redactor(secrets)(self.url)[:80]
                raise ValueError(f"'url' must be an http:// or https:// address of an MCP endpoint (got {shown!r})")
        return self

    @property
    def is_enabled(self) -> bool:
        return self.enabled and not self.disabled

    @property
    def transport(self) -> Transport:
        if self.command:
            return "stdio"
        if _type_family(self.type) is None:  # no type, or one we do not know: the url decides
            return "sse" if self.url and self.url.rstrip("/").endswith("/sse") else "streamable-http"
        return "sse" if _folded_type(self.type) == "sse" else "streamable-http"

    def known_secrets(self) -> dict[str, str]:
        """What this entry must never show (value -> how it is shown): its filled-in ``${VAR}`` values
        and the literal values of its secret-looking ``env`` variables and headers (:func:`literal_secrets`)."""
        return {**literal_secrets(self.env, self.headers), **_with_url_forms(self._expanded)}

    def placeholder_variables(self) -> list[str]:
        """The variables this entry's ``${VAR}`` placeholders took a value from (sorted): a copilot
        started elsewhere with this file (a benchmark task's) needs them to start the server."""
        return sorted({shown[2:-1] for shown in self._expanded.values()})

    def redact(self, text: str) -> str:
        """``text`` with this entry's secrets (:meth:`known_secrets`) and any URL credentials masked."""
        return Redactor(self.known_secrets())(text)

    @property
    def display_command(self) -> str:
        """The launch line as it may be shown to people and models (secrets as placeholders)."""
        return self.redact(" ".join([self.command or "", *self.args]).strip())

    @property
    def display_url(self) -> str:
        return self.redact(self.url or "")

    @property
    def display_target(self) -> str:
        """The launch line of a stdio server, the URL of a remote one; safe to show."""
        return self.display_command if self.command else self.display_url

    def for_workdir(self, workdir: Path, root: Path | None = None) -> ServerConfig:
        """This entry with ``${COPILOT_SERVER_DIR}`` filled in as ``workdir`` (the child's own directory)
        and ``${COPILOT_ROOT}`` as ``root`` (the user's directory it works in). The ``:-default`` form is
        read too: ``${COPILOT_ROOT:-/srv/data}`` is ``/srv/data`` when no root is known (without a
        default, ``workdir``); the server's own directory is always known, so its default is never used."""
        text = json.dumps([self.command, self.args, self.env, self.cwd])
        if _LATE_VAR.search(text) is None:
            return self
        directory = str(workdir)

        def late_value(match: re.Match[str]) -> str:
            if match.group(1) == SERVER_DIR_VARIABLE:
                return directory
            if root is not None:
                return str(root)
            default = match.group(2)
            return default if default is not None else directory

        def fill(value: str) -> str:
            end = _placeholder_part(value)
            return _LATE_VAR.sub(late_value, value[:end]) + value[end:]

        return self.model_copy(
            update={
                "command": fill(self.command) if self.command else self.command,
                "args": [fill(arg) for arg in self.args],
                "env": {key: fill(value) for key, value in self.env.items()},
                "cwd": fill(self.cwd) if self.cwd else self.cwd,
            }
        )

    def launch_hash(self) -> str:
        """Changes exactly when the way to start or reach the server changes."""
        launch = {
            "command": self.command, "args": self.args, "env": self.env,
            "url": self.url, "headers": self.headers, "cwd": self.cwd, "transport": self.transport,
        }
        if self.inherit_env:  # only when set, so existing entries keep their hash
            launch["inherit_env"] = self.inherit_env
        return hashlib.sha256(json.dumps(launch, sort_keys=True).encode()).hexdigest()[:16]

    def child_environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a stdio child starts with: the inherited allowlist plus ``env``.

        Credentials are not inherited (``index.children.containment.environment``): variables whose names say
        token/password/secret/auth/key are dropped and ``user:pass@`` is removed from URLs, except
        for the variables this entry lists in ``inherit_env``. ``PATH`` ends with the copilot's own
        scripts directory, so ``uvx`` from the ``uv`` dependency is found even when the copilot's
        virtualenv is not activated. uv and Node are pointed at the system's certificate store when
        nothing else says what they trust (:func:`~index.children.containment.environment.with_system_trust`).
        """
        child = inherited_environment(os.environ if base is None else base, self.inherit_env)
        child.update(self.env)
        return with_system_trust(child, system_trust_bundle())


#: A literal ``env``/``headers`` value shorter than this is not taken for a secret: masking "true",
#: "3000" or "stdio" in every message would garble them without protecting anything.
MIN_LITERAL_SECRET_LENGTH = 6
#: Name words that mark a secret beyond :func:`looks_secret_name`'s (which decides what children
#: inherit, so it stays narrower): a session id, a private key, an ``Authorization`` header.
_MORE_SECRET_WORDS = frozenset({"session", "sessionid", "private", "authorization", "credential", "credentials", "passphrase"})
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
#: The scheme word before a header's credential (``Bearer sk-…``): the credential alone is a secret too.
_AUTH_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*\s+(?P<credential>\S.*)$")


def looks_secret_key(name: str) -> bool:
    """Whether an entry's ``env`` variable or header ``name`` says its value is a credential."""
    if looks_secret_name(name):
        return True
    return any(word.lower() in _MORE_SECRET_WORDS for word in _NAME_WORDS.findall(name))


def literal_secrets(env: Mapping[str, str], headers: Mapping[str, str]) -> dict[str, str]:
    """The values of an entry's secret-looking ``env`` variables and headers (value -> ``<env NAME>`` /
    ``<header NAME>``): an API key written into the file as it is (Claude Desktop's usual form) that
    the child prints on stderr must not reach the model or the logs. Short values are left alone."""
    found: dict[str, str] = {}
    for kind, values in (("env", env), ("header", headers)):
        for name, value in values.items():
            if not isinstance(value, str) or not looks_secret_key(name):
                continue
            shown = f"<{kind} {name}>"
            candidates = [value.strip()]
            if kind == "header" and (scheme := _AUTH_SCHEME.match(value.strip())) is not None:
                candidates.append(scheme.group("credential"))  # "Bearer sk-…": children print the key alone
            for candidate in candidates:
                if len(candidate) >= MIN_LITERAL_SECRET_LENGTH:
                    found.setdefault(candidate, shown)
    return found


def _with_url_forms(secrets: Mapping[str, str]) -> dict[str, str]:
    """``secrets`` plus each value as a URL carries it percent-encoded (``a b`` as ``a%20b``), for the
    request URLs an HTTP error names."""
    from urllib.parse import quote

    out = dict(secrets)
    for value, shown in secrets.items():
        for encoded in (quote(value, safe=""), quote(value, safe="/")):
            out.setdefault(encoded, shown)
    return out


class ServersFile(BaseModel):
    """A loaded server list; ``servers`` keeps the file's order."""

    path: Path | None = None
    servers: dict[str, ServerConfig]
    #: The file's text as it was read (a benchmark run derives every task's copy from it, so an
    #: edit of the file during the run changes none of them).
    text: str = Field(default="", exclude=True, repr=False)

    def enabled(self) -> dict[str, ServerConfig]:
        return {name: cfg for name, cfg in self.servers.items() if cfg.is_enabled}


def expand_variables(
    value: str,
    environ: Mapping[str, str],
    missing: set[str],
    used: dict[str, str] | None = None,
    keep: frozenset[str] | set[str] = frozenset(),
    undecodable: set[str] | None = None,
) -> str:
    """Expand ``${VAR}`` / ``${VAR:-default}`` (the default also for a variable set to "", as in a
    shell); names that are unset are added to ``missing``, and so are those whose value is not
    UTF-8 text (also to ``undecodable``: a child is given text).

    ``used`` collects the values taken from ``environ`` (value -> ``${VAR}``), to be redacted;
    placeholders of the names in ``keep`` are left as written.
    """

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in _LATE_VARIABLES or name in keep:
            return match.group(0)  # filled in when the child starts (ServerConfig.for_workdir)
        if name in environ and (environ[name] or default is None):
            # Under a locale that is not UTF-8 Python reads non-ASCII bytes as lone surrogates,
            # which no child can be given (the whole file failed to load with a traceback).
            text = os_text(environ[name])
            if text is None:
                missing.add(name)
                if undecodable is not None:
                    undecodable.add(name)
                return ""
            if used is not None and text:
                used[text] = f"${{{name}}}"
            return text
        if default is not None:
            return default  # unset or empty, as the shell's ``:-`` (an empty value gave "", not the default)
        missing.add(name)
        return ""

    end = _placeholder_part(value)
    return _VAR.sub(substitute, value[:end]) + value[end:]


def _expand_entry(
    raw: dict[str, Any], environ: Mapping[str, str], missing: set[str], used: dict[str, str], undecodable: set[str]
) -> dict[str, Any]:
    out = dict(raw)

    def expand(value: str) -> str:
        return expand_variables(value, environ, missing, used, undecodable=undecodable)

    for key in ("command", "url", "cwd"):
        if isinstance(out.get(key), str):
            out[key] = expand(out[key])
    if isinstance(out.get("args"), list):
        out["args"] = [expand(a) if isinstance(a, str) else a for a in out["args"]]
    for key in ("env", "headers"):
        if isinstance(out.get(key), dict):
            out[key] = {k: expand(v) if isinstance(v, str) else v for k, v in out[key].items()}
    return out


def _entry_strings(raw: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], str, str]]:
    """Every string of an entry that launches or reaches its server, as (key path for its line in the
    file, how to name it, the string): ``command``, ``url``, ``cwd``, each ``args`` item, ``env`` and
    ``headers`` values."""
    for key in ("command", "url", "cwd"):
        if isinstance(raw.get(key), str):
            yield (key,), f"'{key}'", raw[key]
    if isinstance(raw.get("args"), list):
        for index, arg in enumerate(raw["args"]):
            if isinstance(arg, str):
                yield ("args",), f"'args[{index}]'", arg
    for key in ("env", "headers"):
        if isinstance(raw.get(key), dict):
            for name, value in raw[key].items():
                if isinstance(value, str):
                    yield (key, name), f"'{key}.{printable(str(name))}'", value


def _lone_surrogate_field(raw: Mapping[str, Any]) -> tuple[tuple[str, ...], str] | None:
    """The first of an entry's strings holding a lone surrogate (a JSON ``"\\ud800"``), in its value or
    its name, as (key path, how to name it), or None: UTF-8 cannot carry it to a child, whose every
    start failed on it."""
    for path, field, value in _entry_strings(raw):
        if has_lone_surrogate(value) or has_lone_surrogate(path[-1]):
            return path, field
    return None


#: The keys whose value says how to start or reach a server: without a value for one of their
#: variables there is no launch to check.
_LAUNCH_KEYS = ("command", "url")


def _launch_variables(raw: Mapping[str, Any]) -> dict[str, set[str]]:
    """The variables each of an entry's launch keys (:data:`_LAUNCH_KEYS`) names (key -> names)."""
    return {
        key: {match.group(1) for match in _VAR.finditer(raw[key], 0, _placeholder_part(raw[key]))}
        for key in _LAUNCH_KEYS
        if isinstance(raw.get(key), str)
    }


def _unset_reason(
    missing: set[str], empty: Mapping[str, set[str]], undecodable: frozenset[str] | set[str] = frozenset()
) -> str:
    """Why a server is disabled: its variables that are unset or not UTF-8 text, and those of its
    launch keys set to ""."""
    reasons = []
    if unset := missing - undecodable:
        reasons.append(f"environment variable(s) not set: {', '.join(sorted(unset))}")
    if undecodable:
        reasons.append(
            f"environment variable(s) not UTF-8 text: {', '.join(sorted(undecodable))} (a child is given text; "
            "set them to UTF-8)"
        )
    if empty:
        names = ", ".join(sorted(set().union(*empty.values())))
        keys = " and ".join(f"'{key}'" for key in empty)
        reasons.append(f"environment variable(s) set to an empty string: {names} (its {keys} needs a value)")
    return "; ".join(reasons)


#: How many malformed placeholders of one entry are named (and looked for).
_MALFORMED_SHOWN = 5


def _malformed_placeholders(value: str) -> list[str]:
    """The ``${`` of ``value`` that are no ``${VAR}`` / ``${VAR:-default}`` placeholder, described.

    They reach the child as written: an unterminated ``${B``, a nested ``${A:-${B}}`` (a default is
    plain text, so its ``${B`` stays and a stray ``}`` follows), a name that is no variable name.
    """
    found: list[str] = []
    end = _placeholder_part(value)
    start = value.find("${")
    while start != -1 and len(found) < _MALFORMED_SHOWN:
        match = _VAR.match(value, start, end)
        if match is None:
            end = value.find("}", start)
            if end == -1:
                found.append(f"'{value[start:start + 40]}' has no closing '}}'")
            else:
                found.append(f"'{value[start:min(end + 1, start + 40)]}' is not a ${{VAR}} or ${{VAR:-default}} placeholder")
            after = start + 2
        else:
            after = match.end()
            if match.group(2) is not None and "${" in match.group(2):
                shown = match.group(0) + ("}" if value[after:after + 1] == "}" else "")
                found.append(f"'{shown[:60]}' nests a placeholder in a default, which is not supported")
                after += len(shown) - len(match.group(0))
        start = value.find("${", after)
    return found


def _entry_malformed_placeholders(
    raw: Mapping[str, Any], lines: Mapping[tuple[str, ...], int], entry: tuple[str, str]
) -> tuple[int, list[str]] | None:
    """The line of the first malformed placeholder of an entry's expanded values and all of them
    (``where: what``), or None."""
    first_line: int | None = None
    found: list[str] = []
    for path, where, value in _entry_strings(raw):
        if "${" not in value or len(found) >= _MALFORMED_SHOWN:
            continue
        problems = _malformed_placeholders(value)
        if problems:
            first_line = first_line if first_line is not None else lines.get((*entry, *path), lines[entry])
            found.extend(f"{where}: {problem}" for problem in problems)
    if first_line is None:
        return None
    return first_line, found[:_MALFORMED_SHOWN]


#: What the key scan needs of JSON text: strings, brackets, colons and line breaks (valid JSON has no
#: line break inside a string, so counting them counts lines).
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:\n]')


@dataclass(frozen=True)
class _Key:
    """One key of one object of a JSON text: where it is and where the same object had it before."""

    path: tuple[str, ...]  # keys of the objects around it, outermost first ("[]" for an array)
    name: str
    line: int
    first_line: int | None  # line of the same key earlier in the same object (None: its first)


@dataclass
class _Open:
    """An object or array the key scan is inside."""

    path: tuple[str, ...]
    seen: dict[str, int] | None  # an object's keys so far (their first lines); None for an array
    last_key: str = ""


def _object_keys(text: str) -> list[_Key]:
    """Every key of every object in ``text`` (valid JSON), in file order.

    ``json.loads`` keeps only the last value of a key given twice in one object; this scan is how
    the first one is found (and the line of any key, for messages).
    """
    keys: list[_Key] = []
    inside: list[_Open] = []
    line = 1
    last_string: tuple[str, int] | None = None
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token == "\n":
            line += 1
        elif token[0] == '"':
            last_string = (json.loads(token), line)
        elif token == ":":  # the string just read was a key (commas and values in between are not tokens)
            current = inside[-1]
            assert current.seen is not None and last_string is not None  # valid JSON
            name, at = last_string
            keys.append(_Key(current.path, name, at, current.seen.get(name)))
            current.seen.setdefault(name, at)
            current.last_key = name
        elif token in "{[":
            outer = inside[-1] if inside else None
            path = () if outer is None else (*outer.path, outer.last_key if outer.seen is not None else "[]")
            inside.append(_Open(path, {} if token == "{" else None))
        else:
            inside.pop()
    return keys


def _key_lines(keys: list[_Key]) -> dict[tuple[str, ...], int]:
    """The line of each key by its full path (``(*path, name)``; a key given twice: its first)."""
    lines: dict[tuple[str, ...], int] = {}
    for key in keys:
        lines.setdefault((*key.path, key.name), key.line)
    return lines


def _duplicate_error(keys: list[_Key], container: str, source: str) -> str | None:
    """The error for a key given twice where it would lose servers or settings, else None.

    The server list itself twice drops every server of the first; a server twice drops its first
    entry; a key twice inside an entry (``command``, ``env``, a variable of ``env``) drops a value
    of it. Other parts of another host's config are not ours to judge.
    """
    twice = [key for key in keys if key.first_line is not None]
    for key in twice:
        if key.path == () and key.name == container:
            return (
                f"{source}:{key.line}: '{container}' is listed twice (also on line {key.first_line}); only the last one "
                f"would be read and the servers of the other lost: merge them into one '{container}' object."
            )
    for key in twice:
        if key.path == (container,):
            return (
                f"{source}:{key.line}: server '{key.name}' is listed twice (also on line {key.first_line}); only one "
                "entry would be used: remove or rename the other."
            )
        if len(key.path) >= 2 and key.path[0] == container:
            where = ".".join([*key.path[2:], key.name])
            return (
                f"{source}:{key.line}: server '{key.path[1]}': '{where}' is listed twice (also on line "
                f"{key.first_line}); only the last would be used: remove the other."
            )
    return None


def _error_line(lines: Mapping[tuple[str, ...], int], entry: tuple[str, str], error: ValidationError) -> int:
    """For the nested ``annotations``/``confirm`` keys, the line of the innermost key of the entry the
    error points at; the entry's own line for every other key."""
    location = error.errors()[0]["loc"]
    line = lines[entry]
    if not location or location[0] not in ("annotations", "confirm"):
        return line
    path: tuple[str, ...] = entry
    for part in location:
        path = (*path, part if isinstance(part, str) else "[]")
        if path in lines:
            line = lines[path]
        elif isinstance(part, str):
            break  # not a key of the file (pydantic's own location parts): the last key found it is
    return line


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        message = str(item["msg"]).removeprefix("Value error, ")
        where = ".".join(str(p) for p in item["loc"])
        parts.append(f"'{where}': {message}" if where else message)
    return "; ".join(parts)


#: How close an unknown key must be to one of ours (difflib ratio) to be taken for a misspelling of it:
#: close enough for 'enabeld', 'timout', 'arg', 'trust'; far enough that other hosts' own keys
#: ('autoApprove', 'envFile', 'disabledTools', 'serverUrl') pass quietly, as the README promises.
_TYPO_CUTOFF = 0.8


def _our_key(key: str) -> str | None:
    """The key of ours ``key`` looks like a misspelling of (case, ``-``/``_`` and camelCase aside), else None."""
    ours = [field for field in ServerConfig.model_fields if field != "name"]
    if key in ours:
        return None
    folded = key.lower().replace("-", "").replace("_", "")
    for field in ours:
        if field.replace("_", "") == folded:
            return field
    close = difflib.get_close_matches(key.lower(), ours, n=1, cutoff=_TYPO_CUTOFF)
    return close[0] if close else None


def _misspelled_keys(raw: Mapping[str, Any]) -> dict[str, str]:
    """Keys of an entry that are not ours but look like ours (``{'enabeld': 'enabled'}``).

    Unknown keys are ignored so other hosts' configs load as they are; a misspelt key of ours
    would be ignored just as quietly -- ``"enabeld": false`` starts a server the user turned off.
    """
    misspelled = {}
    for key in raw:
        if isinstance(key, str) and (ours := _our_key(key)) is not None and ours not in raw:
            misspelled[key] = ours
    return misspelled


def _misspelling_hint(misspelled: Mapping[str, str]) -> str:
    return "; ".join(f"'{key}' is not a known key: did you mean '{ours}'?" for key, ours in misspelled.items())


#: What a server name may hold, for the errors about one that does not.
_NAME_RULE = "use letters, digits, spaces and punctuation of any script, except '/'"


def _name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a server name (control characters, lone surrogates, only dots), or None."""
    if printable(name) != name:
        # Written raw they would recolour or rewrite the crawl's output; a lone surrogate cannot be written at all.
        found = sorted({printable(char) for char in name if printable(char) != char})
        shown = ", ".join(found[:5])
        kept = "".join(char for char in name if printable(char) == char).strip()
        instead = f", e.g. '{kept}'" if kept and "/" not in kept else ""
        return (
            f"a name cannot contain control characters, line separators, bidi overrides or lone surrogates (found "
            f"{shown}) -- names are shown on terminals and name log files; {_NAME_RULE}{instead}"
        )
    if set(name.strip()) == {"."}:
        return f"a name cannot be only dots ('.' and '..' are directories, and a server's name also names its log file); {_NAME_RULE}"
    return None


def server_name_problem(name: str) -> str | None:
    """What makes ``name`` no server name (a sentence naming it and the fix), or None."""
    if not name.strip():
        return "a server with an empty name: give the entry a name (route shows it and execute calls the server by it)."
    if (problem := _name_problem(name)) is not None:
        return f"server '{printable(name)}': {problem}."
    if "/" in name:
        return (
            f"server '{name}': a name cannot contain '/' (tools are named server/tool in route's answers and in "
            f"--allow/--deny patterns); rename it, e.g. '{name.replace('/', '-')}'."
        )
    return None


def parse_servers(
    text: str, source: str = "<servers>", environ: Mapping[str, str] | None = None
) -> ServersFile:
    """Parse a server list from JSON text; ``source`` names the file in error messages."""
    environ = os.environ if environ is None else environ
    try:
        data = parse_json(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{source}:{error.lineno}:{error.colno}: not valid JSON ({error.msg}). "
            "Fix the file; it must be an object with an 'mcpServers' mapping."
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}:1: expected a JSON object with an 'mcpServers' mapping.")
    entries = data.get("mcpServers", data.get("servers"))
    keys = _object_keys(text)
    lines = _key_lines(keys)
    if entries is not None and not isinstance(entries, dict):
        key = "mcpServers" if "mcpServers" in data else "servers"
        raise ConfigError(
            f"{source}:{lines[(key,)]}: '{key}' must be an object mapping each server's name to its entry "
            f'(got {type(entries).__name__}). Expected {{"mcpServers": {{"name": {{"command": ..., "args": [...]}}}}}}.'
        )
    if not isinstance(entries, dict):
        raise ConfigError(
            f"{source}:1: no 'mcpServers' object found (keys present: {sorted(data)[:8]}). "
            'Expected {"mcpServers": {"name": {"command": ..., "args": [...]}}}.'
        )
    container = "mcpServers" if "mcpServers" in data else "servers"
    if "mcpServers" in data and isinstance(data.get("servers"), dict):
        raise ConfigError(
            f"{source}:{lines[('servers',)]}: both 'mcpServers' (line {lines[('mcpServers',)]}) and 'servers' are "
            "given; only 'mcpServers' would be read and the servers under 'servers' lost: move them into "
            "'mcpServers' and remove 'servers'."
        )
    duplicate = _duplicate_error(keys, container, source)
    if duplicate is not None:
        raise ConfigError(duplicate)
    servers: dict[str, ServerConfig] = {}
    for name, raw in entries.items():
        line = lines[(container, name)]
        if (problem := server_name_problem(name)) is not None:
            raise ConfigError(f"{source}:{line}: {problem}")
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}:{line}: server '{name}': expected an object, got {type(raw).__name__}.")
        if (surrogate := _lone_surrogate_field(raw)) is not None:
            path, field = surrogate
            raise ConfigError(
                f"{source}:{lines.get((container, name, *path), line)}: server '{name}': {field} holds a lone UTF-16 "
                "surrogate (an escape such as \\ud800 without its pair), which UTF-8 cannot carry to the child: "
                "remove it or write the whole character."
            )
        missing: set[str] = set()
        undecodable: set[str] = set()
        used: dict[str, str] = {}
        expanded = _expand_entry(raw, environ, missing, used, undecodable)
        misspelled = _misspelled_keys(raw)
        # The entry does not exist yet to redact its own errors, which may quote a filled-in value.
        raw_env, raw_headers = expanded.get("env"), expanded.get("headers")
        secrets = {
            **literal_secrets(
                {k: v for k, v in raw_env.items() if isinstance(v, str)} if isinstance(raw_env, dict) else {},
                {k: v for k, v in raw_headers.items() if isinstance(v, str)} if isinstance(raw_headers, dict) else {},
            ),
            **_with_url_forms(used),
        }
        empty: dict[str, set[str]] = {}  # launch key -> its variables set to "" (when that broke it)
        try:
            config = ServerConfig.model_validate({**expanded, "name": name}, context={"secrets": secrets})
        except ValidationError as error:
            # An unset variable in 'command' or 'url' (or one set to "") leaves no launch to check:
            # such a server is disabled with the reason below, as for one anywhere else in the entry.
            # The entry is checked with those placeholders as written, so a mistake of its own
            # (both 'command' and 'url', a wrong 'type') is still an error.
            launch_variables = _launch_variables(raw)
            unset = set().union(*launch_variables.values()) & missing
            empty = {
                key: {variable for variable in variables if environ.get(variable) == ""}
                for key, variables in launch_variables.items()
            }
            empty = {key: variables for key, variables in empty.items() if variables}
            blank = unset.union(*empty.values())
            kept: ServerConfig | None = None
            if blank:
                unexpanded = {
                    key: expand_variables(raw[key], environ, set(), None, keep=blank) for key in launch_variables
                }
                flags = {key: expanded[key] for key in ("enabled", "disabled") if key in expanded}
                try:
                    user_enabled = ServerConfig.model_validate({"name": name, "command": "-", **flags}).is_enabled
                    # Disabled (with the reason when the user had it enabled): its launch is not checked further.
                    off = {"enabled": False, **({"reason": _unset_reason(missing, empty, undecodable)} if user_enabled else {})}
                    kept = ServerConfig.model_validate(
                        {**expanded, **unexpanded, "name": name, **off}, context={"secrets": secrets}
                    )
                except ValidationError as still:
                    error = still
            if kept is None:
                line = _error_line(lines, (container, name), error)
                hint = f" ({_misspelling_hint(misspelled)})" if misspelled else ""
                shown = Redactor(secrets)(_describe(error))
                raise ConfigError(f"{source}:{line}: server '{name}': {shown}{hint}.") from None
            config = kept
            if user_enabled:
                logger.warning("%s:%d: server '%s' disabled: %s", source, line, name, config.reason)
        config._expanded = used
        launch = launches_copilot(config)
        if launch:
            shown = config.redact(launch)
            logger.warning("%s:%d: skipping server '%s': it is this copilot (%s); %s.", source, line, name, shown, SELF_ENTRY_ADVICE)
            continue
        for key, ours in misspelled.items():
            logger.warning(
                "%s:%d: server '%s': '%s' is not a known key and is ignored: did you mean '%s'?",
                source, lines[(container, name, key)], name, key, ours,
            )
        malformed = _entry_malformed_placeholders(raw, lines, (container, name))
        if malformed is not None:
            at, problems = malformed
            logger.warning(
                "%s:%d: server '%s': placeholder(s) the child gets as written: %s; write ${VAR} or ${VAR:-default} "
                "(a default is plain text, without another placeholder).",
                source, at, name, Redactor(secrets)("; ".join(problems)),
            )
        if missing and config.is_enabled:
            reason = _unset_reason(missing, {}, undecodable)
            logger.warning("%s:%d: server '%s' disabled: %s", source, line, name, reason)
            config = config.model_copy(update={"enabled": False, "reason": reason})
        servers[name] = config
    return ServersFile(servers=servers)


def load_servers(path: str | Path, environ: Mapping[str, str] | None = None) -> ServersFile:
    """Load a ``servers.json`` or Claude-Desktop-style config file."""
    path = Path(path)
    try:
        # utf-8-sig: Windows editors (Notepad, PowerShell 5's Out-File) start UTF-8 files with a BOM.
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: server list not found. Pass --servers FILE or set COPILOT_SERVERS.") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read server list ({error.strerror}).") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: server list is not UTF-8 text ({error.reason} at byte {error.start}).") from None
    loaded = parse_servers(text, source=str(path), environ=environ)
    loaded.path = path
    loaded.text = text
    return loaded
