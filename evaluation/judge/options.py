"""The judge's options: one pydantic model, and the argparse options that fill it.

The benchmark runner adds the same options with a prefix (``add_judge_arguments(parser,
prefix="judge-")``) and reads them back with ``JudgeOptions.from_args(args, prefix="judge-")``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Collection
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluation.judge.outputs import VERDICTS_FILE as VERDICTS_FILE  # re-exported: where callers look for it
from evaluation.judge.prompting.prompts import PROMPT_KINDS, PROMPT_VERSIONS, PromptKind
from evaluation.llm import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, LLMSettings, resolve_llm_settings
from index.cli.console import argv_text
from index.errors import CopilotError

DEFAULT_CONCURRENCY = 8
DEFAULT_PARSE_RETRIES = 2


class JudgeError(CopilotError):
    """Judging cannot start or produced nothing (bad paths, nothing to judge, unwritable output)."""


class NoTrajectoriesError(JudgeError):
    """The paths hold no trajectory at all: for a repeat of a run, one that has not run yet."""


class JudgeOptions(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: LLMSettings
    tasks_file: Path | None = None
    human_labels: Path | None = None
    tools_file: Path | None = None
    prompt: PromptKind = "livemcpeval"
    auto_key_points: bool = False
    #: Ask the first judge model about the unsuccessful tasks the log cannot classify.
    taxonomy_llm: bool = False
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1)
    parse_retries: int = Field(default=DEFAULT_PARSE_RETRIES, ge=0)
    #: Default: ``<first path>/judge`` (beside the logs).
    out_dir: Path | None = None
    #: Default: ``$COPILOT_HOME/judge-cache``.
    cache_dir: Path | None = None
    use_cache: bool = True
    show_progress: bool = True
    write_reports: bool = True
    #: The prefix of the command-line options these came from (``judge-`` in the runner), so an
    #: error names the option the user typed: ``--judge-out``, not ``--out``.
    option_prefix: str = ""

    def option(self, name: str) -> str:
        """The command-line spelling of option ``name`` (``out`` -> ``--judge-out`` in the runner)."""
        return f"--{self.option_prefix}{name}"

    @classmethod
    def from_args(cls, args: argparse.Namespace, prefix: str = "", **overrides: object) -> JudgeOptions:
        """Read options added by :func:`add_judge_arguments` with the same ``prefix``."""
        dest = prefix.replace("-", "_")

        def get(name: str, default: object = None) -> object:
            return getattr(args, dest + name, default)

        env_names = _env_names(prefix)
        _check_endpoint_limits(prefix, get("timeout"), get("max_retries"))
        llm = resolve_llm_settings(
            get("base_url"),  # type: ignore[arg-type]
            get("api_key"),  # type: ignore[arg-type]
            get("model"),  # type: ignore[arg-type]
            timeout=get("timeout"),  # type: ignore[arg-type]
            max_retries=get("max_retries"),  # type: ignore[arg-type]
            env_names=env_names,
            model_flag=f"--{prefix}model",
        )
        values: dict[str, object] = {
            "llm": llm,
            "tasks_file": get("tasks"),
            "human_labels": get("human_labels"),
            "tools_file": get("tools"),
            "prompt": get("prompt", "livemcpeval"),
            "auto_key_points": bool(get("auto_key_points", False)),
            "taxonomy_llm": bool(get("taxonomy_llm", False)),
            "concurrency": get("concurrency", DEFAULT_CONCURRENCY),
            "parse_retries": get("parse_retries", DEFAULT_PARSE_RETRIES),
            "out_dir": get("out"),
            "cache_dir": get("cache_dir"),
            "use_cache": not get("no_cache", False),
            "show_progress": not get("no_progress", False),
            "option_prefix": prefix,
        }
        values.update(overrides)
        try:
            return cls.model_validate({key: value for key, value in values.items() if value is not None})
        except ValidationError as error:
            first = error.errors()[0]
            option = "--" + prefix + str(first["loc"][0]).replace("_", "-")
            raise JudgeError(f"{option}: {first['msg']} (got {first.get('input')!r}).") from None

    def config_hash(self) -> str:
        """What a verdict depends on besides the trajectory: judges, prompt, key-point mode."""
        payload = {
            "models": self.llm.models,
            "prompt": self.prompt,
            "auto_key_points": self.auto_key_points,
            "version": PROMPT_VERSIONS[self.prompt],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def judge_name(self) -> str:
        models = self.llm.models
        return models[0] if len(models) == 1 else f"jury({','.join(models)})"


def _check_endpoint_limits(prefix: str, timeout: object, max_retries: object) -> None:
    """Refuse limits the ``openai`` client would misread: a timeout of 0 or less made the probe
    say "did not answer within -5 s", NaN and a negative retry count ended in tracebacks."""
    if isinstance(timeout, float) and not (math.isfinite(timeout) and timeout > 0):
        raise JudgeError(f"--{prefix}timeout: must be a positive number of seconds (got {timeout:g}).")
    if isinstance(max_retries, int) and max_retries < 0:
        raise JudgeError(f"--{prefix}max-retries: must be 0 or more (got {max_retries}).")


def _env_names(prefix: str) -> dict[str, tuple[str, ...]]:
    if not prefix:
        return {}
    upper = prefix.replace("-", "_").upper()
    return {
        "base_url": (f"{upper}BASE_URL", "OPENAI_BASE_URL"),
        "api_key": (f"{upper}API_KEY", "OPENAI_API_KEY"),
        "model": (f"{upper}MODEL",),
    }


_Option = tuple[str, dict]


def _input_options() -> list[_Option]:
    return [
        (
            "tasks",
            {
                "type": Path,
                "metavar": "FILE",
                "help": "task list (LiveMCPBench all_annotations.json): the denominator, questions and annotated key points",
            },
        ),
        (
            "human-labels",
            {
                "type": Path,
                "metavar": "FILE",
                "help": "human verdicts (JSON list of {task_id, task_success}) to measure the judge against",
            },
        ),
        (
            "tools",
            {
                "type": Path,
                "metavar": "FILE",
                "help": "tool descriptions for the prompt: a copilot catalog or LiveMCPBench tools.json (default: the copilot's catalog)",
            },
        ),
    ]


def _endpoint_options(prefix: str) -> list[_Option]:
    env = _env_names(prefix)
    model_env = " / ".join(env.get("model", ("MODEL",)))
    url_env = " / ".join(env.get("base_url", ("OPENAI_BASE_URL",)))
    key_env = " / ".join(env.get("api_key", ("OPENAI_API_KEY",)))
    return [
        ("base-url", {"metavar": "URL", "help": f"OpenAI-compatible endpoint (default: ${url_env})"}),
        ("api-key", {"metavar": "KEY", "help": f"API key (default: ${key_env})"}),
        (
            "model",
            {
                "metavar": "NAME[,NAME...]",
                "type": argv_text,
                "help": f"judge model; a comma-separated list is a jury (default: ${model_env})",
            },
        ),
        (
            "concurrency",
            {
                "type": int,
                "default": DEFAULT_CONCURRENCY,
                "metavar": "N",
                "help": f"parallel LLM requests (default {DEFAULT_CONCURRENCY})",
            },
        ),
        (
            "timeout",
            {
                "type": float,
                "default": DEFAULT_TIMEOUT,
                "metavar": "SECONDS",
                "help": f"per-request timeout (default {DEFAULT_TIMEOUT:g})",
            },
        ),
        (
            "max-retries",
            {
                "type": int,
                "default": DEFAULT_MAX_RETRIES,
                "metavar": "N",
                "help": f"retries with backoff on 429/5xx/timeouts (default {DEFAULT_MAX_RETRIES})",
            },
        ),
    ]


def _judging_options() -> list[_Option]:
    return [
        (
            "prompt",
            {
                "choices": PROMPT_KINDS,
                "default": "livemcpeval",
                "help": "livemcpeval: the paper's judge; evidence: also shows tool outputs and asks per key point for the supporting calls",
            },
        ),
        (
            "auto-key-points",
            {"action": "store_true", "help": "extract key points with the LLM even when annotated Steps exist"},
        ),
        (
            "parse-retries",
            {
                "type": int,
                "default": DEFAULT_PARSE_RETRIES,
                "metavar": "N",
                "help": f"re-asks after an unparseable verdict before recording abstain (default {DEFAULT_PARSE_RETRIES})",
            },
        ),
        (
            "taxonomy-llm",
            {
                "action": "store_true",
                "help": "ask the (first) judge model for the error class of unsuccessful tasks the log cannot decide (cached)",
            },
        ),
    ]


def _output_options() -> list[_Option]:
    return [
        ("out", {"type": Path, "metavar": "DIR", "help": "output directory (default: <first path>/judge)"}),
        ("cache-dir", {"type": Path, "metavar": "DIR", "help": "LLM reply cache (default: $COPILOT_HOME/judge-cache)"}),
        ("no-cache", {"action": "store_true", "help": "neither read nor write the reply cache"}),
        ("no-progress", {"action": "store_true", "help": "no progress bar"}),
    ]


def add_judge_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, prefix: str = "", exclude: Collection[str] = ()
) -> None:
    """The judge's options (not the input paths), in groups: input files, the endpoint, how to
    judge, where results go. ``prefix="judge-"`` gives ``--judge-model`` etc.; ``exclude`` drops
    options the caller defines itself (e.g. ``{"tasks", "out"}``)."""
    options = [*_input_options(), *_endpoint_options(prefix), *_judging_options(), *_output_options()]
    for name, kwargs in options:
        if name in exclude:
            continue
        parser.add_argument(f"--{prefix}{name}", dest=(prefix + name).replace("-", "_"), **kwargs)
