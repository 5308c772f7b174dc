"""The project's exception hierarchy.

Every message is written for whoever has to act on it -- a person at a terminal or a
model calling ``route``/``execute`` -- so it says what was wrong and what to do instead.
Packages derive their own errors from :class:`CopilotError`; callers at the edges
(CLIs, MCP tools) catch ``CopilotError`` and show ``str(error)``, never a traceback.
"""

from __future__ import annotations


class CopilotError(Exception):
    """Base class of every error the copilot reports to a user or a model."""


class ConfigError(CopilotError):
    """A configuration file or setting is invalid (the message names file, line and key)."""


class CatalogError(CopilotError):
    """A tool catalog snapshot is missing or malformed."""


class IndexNotBuiltError(CopilotError):
    """The search index has not been built yet (the message says how to build it)."""


class QueryError(CopilotError):
    """A search query is empty or unusable."""


class CrawlError(CopilotError):
    """A server could not be started or listed while crawling."""
