"""Keeping secrets out of what people and models read: launch lines, URLs, error messages, logs.

A server entry's ``${VAR}`` placeholders are filled from the copilot's environment, so an API key
can end up inside a child's ``args`` or ``url``. Wherever a launch line or URL is shown -- errors
sent to the model, trajectory logs, the copilot's stderr, the child's own log -- the filled-in
values are shown as their placeholders again, and URL credentials and secret-looking query
parameters are masked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"

#: Query parameters whose values are secrets in practice (matched case-insensitively, as substrings).
_SECRET_PARAM_PARTS = ("token", "key", "secret", "password", "passwd", "pwd", "auth", "sig", "credential", "session")

#: Values shorter than this are not hunted for in free text: masking "1" or "on" everywhere would
#: garble messages without protecting anything.
MIN_SECRET_LENGTH = 4

_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def is_secret_param(name: str) -> bool:
    lowered = name.lower()
    return any(part in lowered for part in _SECRET_PARAM_PARTS)


def redact_url(url: str) -> str:
    """``url`` with its password (``user:pass@``) and secret-looking query values masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_param(name) for name, _ in pairs):
            query = urlencode([(name, MASK if is_secret_param(name) else value) for name, value in pairs], safe="*")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Redactor:
    """Replaces known secret values by their placeholders, and masks credentials in URLs."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        items = [(value, shown) for value, shown in (secrets or {}).items() if len(value) >= MIN_SECRET_LENGTH]
        self._secrets = sorted(items, key=lambda item: len(item[0]), reverse=True)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __call__(self, text: str) -> str:
        for value, shown in self._secrets:
            if value in text:
                text = text.replace(value, shown)
        return _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)


def redact_text(text: str) -> str:
    """Mask URL credentials in ``text`` (for messages with no server entry at hand)."""
    return Redactor()(text)
