"""OpenAI-compatible endpoints: resolving flags/environment, building clients, probing.

Shared by the judge and the benchmark runner. Endpoint, key and model come from flags, else
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``MODEL``. Retries with backoff on 429/5xx/timeouts
are the ``openai`` client's own (it honours ``Retry-After``), so nothing here re-implements them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import anyio
import httpx
from pydantic import BaseModel, Field

from index.catalog.redact import MASK, Redactor, is_secret_param, redact_text, redact_url
from index.errors import CopilotError
from server.trajectory.records import MAX_TOKENS

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 4
#: Sent when no key is configured: local endpoints (vLLM, llama.cpp, Ollama) accept anything.
PLACEHOLDER_API_KEY = "not-set"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


class LLMError(CopilotError):
    """A call to the LLM endpoint failed after its retries."""


class EndpointError(LLMError):
    """The endpoint cannot serve any request (unreachable, key rejected, unknown model)."""


class LLMSettings(BaseModel):
    """Where and how to reach one OpenAI-compatible endpoint."""

    base_url: str = OPENAI_DEFAULT_URL
    api_key: str | None = None
    models: list[str] = Field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES

    @property
    def model(self) -> str:
        return self.models[0]

    @property
    def shown_url(self) -> str:
        """``base_url`` as messages and reports may show it: a gateway's ``user:pass@`` and ``?api-key=`` masked."""
        return redact_url(self.base_url)


def split_models(value: str | None) -> list[str]:
    """``"a, b,c"`` -> ``["a", "b", "c"]`` (a comma-separated list makes a jury)."""
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def resolve_llm_settings(
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    *,
    timeout: float | None = None,
    max_retries: int | None = None,
    env: Mapping[str, str] | None = None,
    env_names: Mapping[str, tuple[str, ...]] | None = None,
    require_model: bool = True,
    model_flag: str = "--model",
    jury: bool = True,
) -> LLMSettings:
    """Flags win over the environment. ``env_names`` overrides which variables are read, e.g.
    ``{"model": ("JUDGE_MODEL",)}`` so a runner's agent model and judge model stay apart;
    ``model_flag`` and ``jury`` word the error as the command at hand takes its model."""
    env = os.environ if env is None else env
    names = {"base_url": ("OPENAI_BASE_URL",), "api_key": ("OPENAI_API_KEY",), "model": ("MODEL",)}
    names.update(env_names or {})

    def from_env(key: str) -> str | None:
        for name in names[key]:
            if env.get(name):
                return env[name]
        return None

    models = split_models(model or from_env("model"))
    repeated = next((name for index, name in enumerate(models) if name in models[:index]), None)
    if repeated is not None:
        # A jury member listed twice would vote twice: a tie of a,b becomes a majority of a,b,a.
        raise LLMError(f"{model_flag}: {repeated!r} is listed twice; list each model once (each votes once).")
    if require_model and not models:
        hint = " or ".join(names["model"]) or "an environment variable"
        listed = " (a comma-separated list makes a jury)" if jury else ""
        raise LLMError(f"no model given: pass {model_flag} NAME{listed} or set {hint}.")
    return LLMSettings(
        base_url=(base_url or from_env("base_url") or OPENAI_DEFAULT_URL).rstrip("/"),
        api_key=api_key or from_env("api_key"),
        models=models,
        timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
        max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
    )


def make_client(
    base_url: str, api_key: str | None, timeout: float = DEFAULT_TIMEOUT, max_retries: int = DEFAULT_MAX_RETRIES
) -> openai.AsyncOpenAI:
    """An async client whose every request is bounded by ``timeout`` (connect: at most 10 s)."""
    import openai  # on first use: importing it takes a second, and `--help` needs none of it
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key or PLACEHOLDER_API_KEY,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        max_retries=max_retries,
    )


#: The longest the ``openai`` client waits between two attempts: a server's ``Retry-After`` is
#: followed up to two minutes (``openai._constants.MAX_RETRY_AFTER_DELAY``).
RETRY_WAIT_CAP = 120.0


#: The longest the ``openai`` client waits between two attempts when the server names no wait:
#: its own exponential backoff stops growing there (``openai._constants.MAX_RETRY_DELAY``).
BACKOFF_WAIT_CAP = 8.0


#: Seconds an attempt may take beyond twice its timeout (connecting and sending, each bounded by
#: the timeout too, come before the reply is read) before the whole request is given up.
_ATTEMPT_SLACK = 5.0


def request_deadline(timeout: float, max_retries: int, longest_wait: float = RETRY_WAIT_CAP) -> float:
    """Seconds one request may take in all (the client's ``timeout`` bounds each read of the reply,
    not the whole of it): ``2 * timeout + 5`` per attempt, for each of the ``max_retries + 1``
    attempts, plus ``longest_wait`` between two attempts. Generous enough that the client's own
    timeout, whose message is clearer, always comes first for a server that sends nothing.

    The default waits out any ``Retry-After`` the client honours (the judge's bound);
    ``longest_wait=BACKOFF_WAIT_CAP`` counts only the client's own backoff, so the whole bound
    stays tied to ``timeout`` (the built-in agent's ``--llm-timeout``: 10 s gives 157 s, not 605 s)."""
    return (2 * timeout + _ATTEMPT_SLACK) * (max_retries + 1) + longest_wait * max_retries


def client_for(settings: LLMSettings) -> openai.AsyncOpenAI:
    return make_client(settings.base_url, settings.api_key, settings.timeout, settings.max_retries)


async def probe_endpoint(base_url: str, api_key: str | None, timeout: float = 10.0) -> None:
    """One cheap ``GET /models`` so a wrong URL or key fails at once, not after N retries per task.

    Endpoints without ``/models`` (404/405) still count as reachable: the chat call decides.
    """
    import openai
    read_timeout = min(timeout, 10.0)
    client = make_client(base_url, api_key, timeout=read_timeout, max_retries=0)
    url = base_url
    base_url = redact_url(base_url)  # from here on only named: a gateway URL may carry credentials
    # The client's timeout bounds each read, not the request: an endpoint sending a byte now and
    # then held the judge and the runner here for good, before any task was judged or run.
    deadline = request_deadline(read_timeout, 0)
    try:
        with anyio.fail_after(deadline):
            await client.models.list()
    except TimeoutError:
        raise EndpointError(
            f"{base_url} did not finish answering GET /models within {deadline:g} s (it keeps the connection "
            "open, sending little or nothing): is the endpoint up?"
        ) from None
    except openai.AuthenticationError:
        raise EndpointError(
            f"{base_url} rejected the API key (HTTP 401): pass --api-key or set OPENAI_API_KEY."
        ) from None
    except openai.APITimeoutError:
        raise EndpointError(f"{base_url} did not answer within {min(timeout, 10.0):g} s: is the endpoint up?") from None
    except openai.APIConnectionError as error:
        cause = redact_endpoint(str(error.__cause__ or error), url)
        raise EndpointError(
            f"cannot reach {base_url} ({cause}): check --base-url / OPENAI_BASE_URL and that the server is running."
        ) from None
    except openai.APIStatusError as error:
        logger.debug("probe of %s answered HTTP %s; treating the endpoint as reachable", base_url, error.status_code)
    except UNREADABLE_BODY_ERRORS as error:  # it answered: the chat call decides
        logger.debug("probe of %s: %s; treating the endpoint as reachable", base_url, describe_unreadable_body(error, base_url))
    except (AttributeError, TypeError) as error:
        # JSON that is no model list ([], a string, null): openai's page parser fails on it. It answered.
        logger.debug("probe of %s answered no model list (%s); treating the endpoint as reachable", base_url, error)
    finally:
        await client.close()


def reply_field(item: Any, name: str) -> Any:
    """``item.name`` of a parsed reply, or ``item[name]`` where the ``openai`` client kept a part as a
    dict (it keeps what does not fit its model unvalidated)."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def usage_counts(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a reply's ``usage``, (0, 0) without one; ``None`` when a count
    is none a report can sum (negative, absurd, not a number): an endpoint's bad usage must cost
    that usage, not the request (``int("n/a")`` failed it with a traceback)."""
    counts = []
    for name in ("prompt_tokens", "completion_tokens"):
        try:
            count = int((reply_field(usage, name) if usage is not None else 0) or 0)
        except (TypeError, ValueError, OverflowError):
            return None
        if not 0 <= count <= MAX_TOKENS:
            return None
        counts.append(count)
    return counts[0], counts[1]


def redact_endpoint(text: str, base_url: str) -> str:
    """``text`` without the credentials of ``base_url`` (its password, its secret-looking query values),
    wherever they appear: whole, in another URL, or in a path the endpoint quotes back."""
    try:
        parts = urlsplit(base_url)
        password = parts.password
        pairs = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return redact_text(text)
    secrets = {value: MASK for name, value in pairs if is_secret_param(name) and value}
    if password:
        secrets[password] = MASK
    return Redactor(secrets)(text.replace(base_url, redact_url(base_url)) if base_url else text)


def describe_api_error(error: Exception, base_url: str) -> str:
    """A one-line, actionable description of an ``openai`` exception (the URL without its credentials)."""
    return redact_endpoint(_api_error_words(error, redact_url(base_url)), base_url)


def _api_error_words(error: Exception, base_url: str) -> str:
    import openai
    if isinstance(error, openai.APITimeoutError):
        return f"request to {base_url} timed out (after the client's retries)"
    if isinstance(error, openai.APIConnectionError):
        return f"cannot reach {base_url} ({error.__cause__ or error})"
    if isinstance(error, openai.APIStatusError):
        message = error.message if isinstance(error.message, str) else str(error)
        return f"HTTP {error.status_code} from {base_url}: {message}"
    return f"{type(error).__name__}: {error}"


#: What the ``openai`` client raises for a reply body it cannot read as JSON: it parses the body only
#: after its retries, and Python's reader raises ``RecursionError`` for JSON nested too deeply.
UNREADABLE_BODY_ERRORS = (ValueError, RecursionError)


def describe_unreadable_body(error: BaseException, base_url: str) -> str:
    """A reply body that is not valid JSON (cut off by a proxy, an overloaded or broken server)."""
    why = "nested too deeply to read" if isinstance(error, RecursionError) else str(error)
    return redact_endpoint(f"{redact_url(base_url)} answered a body that is not valid JSON ({why})", base_url)
