"""Chat completions for the judge: cache first, one endpoint probe, bounded concurrency.

Retries with backoff on 429/5xx/timeouts happen inside the ``openai`` client
(``max_retries``); what reaches us afterwards is either a per-request failure (:class:`LLMError`,
the task stays unjudged and a rerun retries it) or an endpoint that cannot serve anything
(:class:`EndpointError`, the whole run stops at once with the URL).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel

from evaluation.judge.prompting.cache import CachedCompletion, CompletionCache, request_key
from evaluation.llm import (
    UNREADABLE_BODY_ERRORS,
    EndpointError,
    LLMError,
    LLMSettings,
    client_for,
    describe_api_error,
    describe_unreadable_body,
    probe_endpoint,
    reply_field,
    request_deadline,
    usage_counts,
)

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

TEMPERATURE = 0.0
#: Refusals (HTTP 403 or 404) in a row, with no answer between them, that stop the run: one is
#: often about its request (a moderation refusal of one trajectory); several in a row, about the
#: endpoint (a key without access to the model, a model it does not serve).
REFUSALS_THAT_STOP = 3


class Completion(BaseModel):
    text: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    cached: bool = False
    #: The model stopped at its output limit (``finish_reason: length``): the text is cut short.
    cut: bool = False


class CompletionService:
    def __init__(self, settings: LLMSettings, cache: CompletionCache | None, concurrency: int) -> None:
        self.settings = settings
        self.cache = cache
        self.limiter = anyio.CapacityLimiter(max(1, concurrency))
        self.requests = 0
        self._client: openai.AsyncOpenAI | None = None
        self._probe_lock = anyio.Lock()
        self._probed = False
        self._fatal: EndpointError | None = None
        self._refusals_in_a_row = 0

    async def _ensure_reachable(self) -> None:
        """Probe the endpoint before the first network request (never when all is cached)."""
        async with self._probe_lock:
            if self._fatal is not None:
                raise self._fatal
            if not self._probed:
                try:
                    await probe_endpoint(self.settings.base_url, self.settings.api_key, self.settings.timeout)
                except EndpointError as error:
                    self._fatal = error
                    raise
                self._probed = True
                self._client = client_for(self.settings)

    async def complete(self, model: str, messages: list[dict[str, Any]]) -> Completion:
        import openai  # on first use: importing it takes a second, and `--help` needs none of it

        key = request_key(model, messages, temperature=TEMPERATURE)
        # A cached reply without text (stored before such replies counted as failed requests) is asked again.
        if self.cache is not None and (hit := self.cache.get(key)) is not None and hit.text is not None:
            return Completion(
                text=hit.text,
                input_tokens=hit.input_tokens,
                output_tokens=hit.output_tokens,
                latency_ms=hit.latency_ms,
                cached=True,
                cut=hit.cut,
            )
        await self._ensure_reachable()
        assert self._client is not None
        async with self.limiter:
            if self._fatal is not None:
                raise self._fatal
            started = time.perf_counter()
            self.requests += 1
            deadline = request_deadline(self.settings.timeout, self.settings.max_retries)
            try:
                # The client's timeout bounds each read, not the request: a server that sends a
                # byte now and then (a proxy keeping a dead upstream alive) would hold it forever.
                with anyio.fail_after(deadline):
                    response = await self._client.chat.completions.create(
                        model=model,
                        messages=messages,
                        temperature=TEMPERATURE,  # type: ignore[arg-type]
                    )
            except TimeoutError:
                raise LLMError(
                    f"{self.settings.shown_url} did not finish its answer within {deadline:g} s (timeout {self.settings.timeout:g} s "
                    f"for each wait, {self.settings.max_retries} retries); the task stays unjudged (a rerun retries it)"
                ) from None
            except openai.AuthenticationError as error:
                # Every further request would fail the same way: stop the run, keep what is done.
                self._fatal = EndpointError(
                    f"{describe_api_error(error, self.settings.base_url)} (model {model!r}); "
                    "check --base-url, --api-key and --model."
                )
                raise self._fatal from None
            except (openai.PermissionDeniedError, openai.NotFoundError) as error:
                self._refusals_in_a_row += 1
                described = f"{describe_api_error(error, self.settings.base_url)} (model {model!r})"
                if self._refusals_in_a_row >= REFUSALS_THAT_STOP:
                    self._fatal = EndpointError(
                        f"{described}: {self._refusals_in_a_row} requests in a row were refused; check --base-url, "
                        "--api-key and --model."
                    )
                    raise self._fatal from None
                # One refusal may be about this request alone (a moderation refusal): this task
                # stays unjudged and the others go on; the run stopped, and so did every rerun.
                raise LLMError(f"{described}; the task stays unjudged (a rerun retries it)") from None
            except openai.OpenAIError as error:
                raise LLMError(describe_api_error(error, self.settings.base_url)) from None
            except UNREADABLE_BODY_ERRORS as error:
                # A reply declared JSON that is not escaped as a traceback for the whole run. It is
                # one failed request: the task stays unjudged.
                raise LLMError(
                    f"{describe_unreadable_body(error, self.settings.base_url)}; "
                    "the task stays unjudged (a rerun retries it)"
                ) from None
            latency_ms = (time.perf_counter() - started) * 1000
        try:
            text = _reply_text(response, self.settings.shown_url, model)
        except EndpointError as error:
            self._fatal = error  # the URL serves something else: every request would get the same
            raise
        self._refusals_in_a_row = 0
        counts = usage_counts(getattr(response, "usage", None))
        if counts is None:
            logger.warning("the judge model's usage counts are not usable; this reply's tokens are not counted")
        input_tokens, output_tokens = counts or (0, 0)
        choices = getattr(response, "choices", None) or [None]
        completion = Completion(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_ms=latency_ms,
            cut=reply_field(choices[0], "finish_reason") == "length",
        )
        if self.cache is not None:
            self.cache.put(
                key,
                CachedCompletion(
                    model=model,
                    text=text,
                    input_tokens=completion.input_tokens,
                    output_tokens=completion.output_tokens,
                    latency_ms=latency_ms,
                    cut=completion.cut,
                ),
            )
        return completion

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


def _reply_text(response: object, base_url: str, model: str) -> str:
    """The reply's text; :class:`EndpointError` when the answer is no chat completion at all,
    :class:`LLMError` when it is one without text.

    An HTML page (a web UI or proxy at the URL instead of its ``/v1``), a JSON value that is not a
    completion, no choices, or a message without content is a failed request -- never a cached
    reply that reruns would read back as the judge's abstention.
    """
    choices = getattr(response, "choices", None)
    error = getattr(response, "error", None)
    if not choices and error is not None:
        # HTTP 200 with an error object (a gateway whose upstream failed): this request failed.
        message = reply_field(error, "message")
        shown = " ".join(str(message if message is not None else error).split())[:300]
        raise LLMError(
            f"{base_url} answered with an error instead of a completion (model {model!r}): {shown}; "
            "the task stays unjudged (a rerun retries it)"
        )
    if not isinstance(choices, list):
        shown = " ".join(str(response).split())[:120]
        raise EndpointError(
            f"{base_url} answered something that is not a chat completion ({type(response).__name__}: {shown!r}); "
            "check --base-url (an OpenAI-compatible API usually ends in /v1)"
        )
    message = getattr(choices[0], "message", None) if choices else None
    text = getattr(message, "content", None)
    if not isinstance(text, str):
        if not choices:
            what = "no choices"
        elif getattr(message, "tool_calls", None):
            what = "tool calls instead of text"
        else:
            what = "a message without text content"
        raise LLMError(
            f"{base_url} answered a chat completion of model {model!r} with {what}; the task stays unjudged "
            "(a rerun retries it)"
        )
    return text
