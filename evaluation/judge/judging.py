"""One task's verdict: key points (annotated, or extracted by the LLM), then one vote per judge
model, parsed strictly, combined by majority when several judges form a jury."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence

import anyio
from pydantic import BaseModel

from evaluation.judge.prompting.completions import CompletionService
from evaluation.judge.options import JudgeOptions
from evaluation.judge.prompting.prompts import (
    KEY_POINTS_RETRY_MESSAGE,
    RETRY_MESSAGE,
    described_tools,
    judge_messages,
    key_point_messages,
    prompt_hash,
)
from evaluation.judge.tool_descriptions import ToolDescriptions
from evaluation.judge.verdict_log import JudgeVote, Verdict, VerdictRecord
from evaluation.judge.prompting.verdicts import THOUGHTS_LIMIT, parse_key_points, parse_verdict
from evaluation.llm import EndpointError, LLMError
from evaluation.trajectories import Trajectory

logger = logging.getLogger(__name__)


class Job(BaseModel):
    task_id: str
    question: str
    #: The trajectory's own question when it differs from ``question`` (recorded with the verdict).
    trajectory_question: str | None = None
    category: str
    steps: list[str]
    trajectory: Trajectory

    def inputs_hash(self, descriptions: ToolDescriptions, trajectory_hash: str | None = None) -> str:
        """Identifies everything the judge is given for this task: the trajectory (``trajectory_hash``
        when the caller has it), and the task list's question and key points and the tool
        descriptions, which can change without it."""
        payload = {
            "trajectory": trajectory_hash or self.trajectory.content_hash(),
            "question": self.question,
            "steps": self.steps,
            "tools": described_tools(self.trajectory.calls, descriptions),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def majority(votes: Sequence[Verdict]) -> Verdict:
    """Jury rule: success needs more success votes than failure votes; abstains do not vote;
    a tie is a failure; all abstaining is an abstain."""
    successes = votes.count("success")
    failures = votes.count("failure")
    if successes == 0 and failures == 0:
        return "abstain"
    return "success" if successes > failures else "failure"


class Judge:
    def __init__(self, options: JudgeOptions, service: CompletionService, descriptions: ToolDescriptions) -> None:
        self.options = options
        self.service = service
        self.descriptions = descriptions

    async def key_points(self, job: Job) -> tuple[list[str], str]:
        if job.steps and not self.options.auto_key_points:
            return job.steps, "annotated"
        # One extraction per task with the first judge model, shared by a jury so all judges
        # see the same key points; the reply cache makes it a one-time cost per task.
        conversation = key_point_messages(job.question)
        for _ in range(1 + self.options.parse_retries):
            completion = await self.service.complete(self.options.llm.model, conversation)
            # A reply cut at the output limit lists only some key points: asked again, never used.
            points = [] if completion.cut else parse_key_points(completion.text)
            if points:
                return points, "extracted"
            conversation = [
                *conversation,
                # Its own reply in full is no help to parse and could be megabytes, sent again per retry.
                {"role": "assistant", "content": (completion.text or "")[-THOUGHTS_LIMIT:]},
                {"role": "user", "content": KEY_POINTS_RETRY_MESSAGE},
            ]
        logger.warning("task %s: no key points could be extracted; judging against the task itself", job.task_id)
        return [job.question], "fallback"

    async def vote(self, model: str, messages: list[dict[str, str]]) -> JudgeVote:
        vote = JudgeVote(model=model, verdict="abstain", prompt_hash=prompt_hash(messages), cached=True, attempts=0)
        conversation = list(messages)
        cut = False
        for _ in range(1 + self.options.parse_retries):
            completion = await self.service.complete(model, conversation)
            vote.attempts += 1
            vote.input_tokens += completion.input_tokens
            vote.output_tokens += completion.output_tokens
            vote.latency_ms += completion.latency_ms
            vote.cached = vote.cached and completion.cached
            # A reply cut at the output limit may end mid-sentence after a "Status:" it would have
            # taken back: asked again, never used.
            parsed = None if completion.cut else parse_verdict(completion.text)
            if parsed is not None:
                vote.verdict = parsed.status
                vote.thoughts = parsed.thoughts
                vote.key_point_verdicts = parsed.key_points
                return vote
            conversation = [
                *conversation,
                # Its own reply in full is no help to parse and could be megabytes, sent again per retry.
                {"role": "assistant", "content": (completion.text or "")[-THOUGHTS_LIMIT:]},
                {"role": "user", "content": RETRY_MESSAGE},
            ]
            vote.unparsed_reply = (completion.text or "")[-2000:]
            cut = completion.cut
        vote.thoughts = f"no parseable verdict in {vote.attempts} replies" + (
            " (the last one cut at the model's output limit)" if cut else ""
        )
        return vote

    async def judge(self, job: Job) -> VerdictRecord:
        key_points, source = await self.key_points(job)
        messages = judge_messages(self.options.prompt, job.trajectory, job.question, key_points, self.descriptions)
        votes: list[JudgeVote | None] = [None] * len(self.options.llm.models)
        failures: list[LLMError] = []

        async def cast(index: int, model: str) -> None:
            # Errors are collected, not raised, so one failing judge does not surface as an
            # exception group; the task is then left unjudged as a whole.
            try:
                votes[index] = await self.vote(model, messages)
            except EndpointError as error:
                failures.append(error)
            except LLMError as error:
                # Which member of a jury failed: the one to drop or fix (the message named none).
                named = len(self.options.llm.models) > 1 and repr(model) not in str(error)
                failures.append(LLMError(f"judge {model!r}: {error}") if named else error)

        async with anyio.create_task_group() as group:
            for index, model in enumerate(self.options.llm.models):
                group.start_soon(cast, index, model)
        if failures:
            raise next((error for error in failures if isinstance(error, EndpointError)), failures[0])
        cast_votes = [vote for vote in votes if vote is not None]
        verdict = majority([vote.verdict for vote in cast_votes])
        if len(cast_votes) == 1:
            thoughts = cast_votes[0].thoughts
        else:
            thoughts = "\n\n".join(f"[{vote.model}: {vote.verdict}] {vote.thoughts}" for vote in cast_votes)
        return VerdictRecord(
            task_id=job.task_id,
            category=job.category,
            question=job.question,
            trajectory_question=job.trajectory_question,
            verdict=verdict,
            key_points=key_points,
            key_points_source=source,  # type: ignore[arg-type]
            thoughts=thoughts,
            judge_model=self.options.judge_name,
            prompt=self.options.prompt,
            prompt_hash=prompt_hash(messages),
            input_tokens=sum(vote.input_tokens for vote in cast_votes),
            output_tokens=sum(vote.output_tokens for vote in cast_votes),
            latency_ms=max((vote.latency_ms for vote in cast_votes), default=0.0),
            judges=cast_votes,
            config_hash=self.options.config_hash(),
            trajectory_hash=(trajectory_hash := job.trajectory.content_hash()),
            inputs_hash=job.inputs_hash(self.descriptions, trajectory_hash),
            sources=job.trajectory.sources,
        )

