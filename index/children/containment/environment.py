"""What a stdio child inherits from the copilot's environment: an allowlist, minus credentials.

A child needs enough of the copilot's environment to run ``npx``/``uvx``: paths, locale, TLS roots,
proxies and package-registry *read* settings. It never needs the copilot's credentials, and the
registry and proxy prefixes (``UV_*``, ``npm_config_*``, ``PIP_*``, ``*_PROXY``) carry plenty of
them: publish tokens (``UV_PUBLISH_TOKEN``), registry passwords (``npm_config__authToken``,
``UV_INDEX_<NAME>_PASSWORD``) and ``user:pass@`` in proxy and index URLs. So, of the allowlist:

- a variable whose *name* says it is a secret (a word such as token, password, secret, auth, key,
  credential; see :func:`looks_secret_name`) is dropped;
- ``user:pass@`` (or ``token@``) is removed from every URL in the remaining *values* (from a proxy
  variable's value also without a scheme, ``user:pass@proxy:3128``, which curl, pip and requests
  accept), and so is the value of a query parameter whose name says it is a secret
  (``?access_token=…``).

A server entry that needs one of these (a private index with a password, an authenticating proxy)
lists the variable names in its ``inherit_env`` key: those are passed unchanged, allowlisted or not.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
import sysconfig
from collections.abc import Iterable, Mapping

#: Inherited by name: enough to run ``npx``/``uvx`` (paths, locale, TLS roots, proxies, pip's index).
INHERITED_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT",
        "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_DEFAULT_TIMEOUT",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "APPDATA", "LOCALAPPDATA", "USERPROFILE",
    }
)  # fmt: skip
#: Inherited by prefix: locale, XDG dirs and the uv / npm / nvm / pyenv settings.
INHERITED_PREFIXES = ("LC_", "XDG_", "UV_", "NPM_CONFIG_", "npm_config_", "NVM_", "PYENV_")

#: Name words that mark a secret on their own (``NPM_CONFIG__AUTH``, ``NPM_CONFIG_KEY``, ``PGPASS``).
_SECRET_WORDS = frozenset(
    {"auth", "key", "keys", "pass", "pwd", "pat", "cookie", "cookies", "secret", "secrets", "token", "tokens"}
)
#: Word endings that mark a secret (``GITHUBTOKEN``, ``UV_PUBLISH_PASSWORD``, ``OPENAI_APIKEY``).
_SECRET_ENDINGS = (
    "token", "tokens", "password", "passwords", "passwd", "secret", "secrets",
    "credential", "credentials", "apikey", "privatekey",
)  # fmt: skip
#: Splits ``npm_config_//registry.npmjs.org/:_authToken`` into npm, config, registry, …, auth, token.
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
#: The userinfo of a URL anywhere in a value (several URLs may share one value, as in ``UV_INDEX``):
#: everything after ``scheme://`` up to the *last* ``@`` before the host (as ``urlsplit`` reads it,
#: ``netloc.rpartition("@")``), so a password holding ``@`` goes whole. The scheme is a fixed-width
#: look-behind and the greedy run cannot cross a ``/`` or a space, so each ``://`` costs one scan to
#: the next of those: linear however many ``@`` a value holds.
_URL_USERINFO = re.compile(r"(?<=[A-Za-z0-9+.-]://)[^/\s]*@")
#: A proxy's userinfo written without a scheme, at the start of the value or of a listed item: up to
#: the last ``@`` of the item followed by a host (the same rule as for URLs).
_BARE_USERINFO = re.compile(r"(?:^|(?<=[,\s]))[^/\s,]+@(?=[^@\s,])")
#: Proxy variables, whose values are ``[scheme://][user:pass@]host[:port]``.
_PROXY_NAME = re.compile(r"(?i)(?:http|https|all|ftp)_proxy")
#: A URL query parameter (its value ends at the next parameter, fragment or space).
_QUERY_PARAMETER = re.compile(r"(?P<lead>[?&;](?P<name>[A-Za-z0-9_.-]+)=)[^&;#\s]*")


def looks_secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential.

    Word-based, so ``TOKENIZERS_PARALLELISM`` and ``npm_config_init_author_name`` are not secrets
    while ``npm_config__authToken``, ``UV_PUBLISH_TOKEN`` and ``GITHUBTOKEN`` are.
    """
    for word in _WORDS.findall(name):
        lowered = word.lower()
        if lowered in _SECRET_WORDS or lowered.endswith(_SECRET_ENDINGS):
            return True
    return False


def strip_url_credentials(value: str, name: str = "") -> str:
    """``value`` (of the variable ``name``) without the credentials in its URLs.

    ``user:pass@`` / ``token@`` go from every URL, and from a proxy variable's value also without a
    scheme (``me@example.com`` elsewhere is an address, not a credential); a query parameter whose
    name says it is a secret keeps its name and loses its value.
    """
    if "@" in value:
        value = _URL_USERINFO.sub("", value)
        if "@" in value and _PROXY_NAME.fullmatch(name):
            value = _BARE_USERINFO.sub("", value)
    if "=" in value:
        value = _QUERY_PARAMETER.sub(
            lambda match: match.group("lead") if looks_secret_name(match.group("name")) else match.group(0), value
        )
    return value


def has_url_credentials(value: str, name: str = "") -> bool:
    return strip_url_credentials(value, name) != value


def _with_own_scripts(path: str) -> str:
    """``path`` ending with the copilot's own scripts directory (``uvx`` from the ``uv`` dependency)."""
    scripts = sysconfig.get_path("scripts")
    entries = [entry for entry in path.split(os.pathsep) if entry]
    if scripts and scripts not in entries:
        entries.append(scripts)
    return os.pathsep.join(entries)


#: Where Linux and the BSDs keep the system's certificate bundle (the places ``openssl-probe``, which
#: uv's TLS stack uses, looks in first).
SYSTEM_TRUST_FILES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Alpine, Arch
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",  # openSUSE
    "/etc/ssl/cert.pem",  # macOS, OpenBSD, Alpine
    "/usr/local/share/certs/ca-root-nss.crt",  # FreeBSD
)
#: Settings by which the user already chose what uv (or everything using OpenSSL) trusts.
_UV_TRUST_SETTINGS = ("UV_SYSTEM_CERTS", "UV_NATIVE_TLS", "SSL_CERT_FILE", "SSL_CERT_DIR")


def system_trust_bundle() -> str | None:
    """The system's certificate bundle file, if it has one where tools look for it."""
    return next((path for path in SYSTEM_TRUST_FILES if os.path.isfile(path)), None)


def with_system_trust(child: dict[str, str], bundle: str | None) -> dict[str, str]:
    """``child`` told to trust the machine's certificate store when fetching packages.

    ``uvx`` verifies TLS with the Mozilla roots uv bundles, and Node with its own: behind a
    TLS-intercepting proxy whose root certificate is only in the system store, every ``uvx`` child
    failed to start (``invalid peer certificate: UnknownIssuer``) whenever the host started the
    copilot without ``SSL_CERT_FILE`` -- and hosts such as Claude Desktop pass only a minimal
    environment. So, when the system has a store (``bundle``) and nothing says otherwise,
    ``UV_SYSTEM_CERTS`` makes uv use it (what uv's documentation advises for a corporate root), and
    ``NODE_EXTRA_CA_CERTS`` adds its certificates to Node's own (they add to, never replace, what
    Node trusts). A choice already made (``UV_SYSTEM_CERTS``/``UV_NATIVE_TLS``, ``SSL_CERT_FILE``,
    ``SSL_CERT_DIR``, ``NODE_EXTRA_CA_CERTS``, by the copilot's environment or the entry) is kept.
    """
    if bundle is None and sys.platform not in ("darwin", "win32"):
        return child  # no store to trust: uv's own roots are all there is
    if not any(child.get(name) for name in _UV_TRUST_SETTINGS):
        child["UV_SYSTEM_CERTS"] = "true"
    if bundle is not None and not child.get("NODE_EXTRA_CA_CERTS"):
        child["NODE_EXTRA_CA_CERTS"] = bundle
    return child


def _listed(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def inherited_environment(source: Mapping[str, str], inherit: Iterable[str] = ()) -> dict[str, str]:
    """The part of ``source`` a child inherits; names matching ``inherit`` (globs) pass unchanged.

    ``PATH`` ends with the copilot's own scripts directory, so ``uvx`` is found even when the
    copilot's virtualenv is not activated.
    """
    inherit = list(inherit)
    child: dict[str, str] = {}
    for key, value in source.items():
        if inherit and _listed(key, inherit):
            child[key] = value
        elif (key in INHERITED_NAMES or key.startswith(INHERITED_PREFIXES)) and not looks_secret_name(key):
            child[key] = strip_url_credentials(value, key)
    child["PATH"] = _with_own_scripts(child.get("PATH", os.defpath))
    return child
