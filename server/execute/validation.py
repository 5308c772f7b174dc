"""Checking ``execute`` params against a tool's input schema, and "did you mean" suggestions.

Messages are written for the model that made the call: they name every missing, unknown or
mistyped parameter, list the parameters the tool expects (with types), and suggest the
nearest valid names -- the paper's "Tool Error" class becomes a one-step fix.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import exceptions as schema_errors
from rapidfuzz import fuzz, process
from referencing import Registry
from referencing.exceptions import Unresolvable

from index.json_text import has_lone_surrogate, parse_json
from index.children.bounded_schema import CheckAbandoned, bounded_check
from index.children.tool_listing import schema_validator_class
from server.bounded import shown_name
from server.errors import InvalidParamsError

logger = logging.getLogger(__name__)

#: rapidfuzz WRatio score (0-100) below which a name is not worth suggesting.
SUGGESTION_CUTOFF = 60.0
#: Problems listed one by one in an invalid-params message; the rest are counted by kind, so a
#: model that sends hundreds of wrong keys gets a message it can read, not one as long as its call.
MAX_LISTED_PROBLEMS = 10
#: Parameters described in "Expected parameters" (route's answer carries the whole schema).
MAX_DESCRIBED_PARAMETERS = 40
#: Names longer than this are not compared (fuzzy matching is quadratic in the name's length).
MAX_SUGGESTED_NAME = 256
_VALUE_PREVIEW = 60


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[_\-./:\s]+")


def _words(name: str) -> str:
    """``getCurrentTime`` / ``get_current-time`` -> ``get current time``."""
    return " ".join(_SEPARATORS.split(_CAMEL.sub(" ", name))).strip().casefold()


def _similarity(a: str, b: str, **_: Any) -> float:
    """Edit similarity, or word overlap for names of 3+ characters (``time`` ~ ``get_current_time``).

    Plain WRatio is too generous with short names (it matches ``tag`` with ``a``).
    """
    score = fuzz.ratio(a, b)
    if min(len(a), len(b)) >= 3:
        score = max(score, 0.9 * fuzz.token_set_ratio(a, b))
    return score


def suggest(name: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """The candidates closest to ``name`` (case-insensitive, identifier-aware), best first."""
    unique = list(dict.fromkeys(c for c in candidates if c))
    if not name or not unique or len(name) > MAX_SUGGESTED_NAME:
        return []
    folded = name.casefold()
    exact = [c for c in unique if c.casefold() == folded]
    if exact:
        return exact[:limit]
    matches = process.extract(
        name, unique, scorer=_similarity, processor=_words, limit=limit, score_cutoff=SUGGESTION_CUTOFF
    )
    return [match[0] for match in matches]


def did_you_mean(names: list[str]) -> str:
    if not names:
        return ""
    quoted = " or ".join(f"'{n}'" for n in names)
    return f" Did you mean {quoted}?"


#: Deepest nesting of ``params`` passed on: the copilot reads JSON-RPC messages to 200 levels, and
#: a child's message wraps the params in a few more.
MAX_PARAMS_DEPTH = 190


def coerce_params(params: Any) -> dict[str, Any]:
    """``params`` as a dict: ``None`` is ``{}``, a JSON object in a string is parsed.

    Models often send ``params`` as a JSON string; accepting it costs nothing and saves a turn.
    Params JSON cannot carry to the child (NaN, a lone surrogate, nesting past
    :data:`MAX_PARAMS_DEPTH`) are refused here, however they came.
    """
    coerced = _coerced(params)
    if (problem := _unsendable(coerced)) is not None:
        raise InvalidParamsError(f"'params' {problem}; nothing was sent to the tool.")
    return coerced


def _unsendable(params: dict[str, Any]) -> str | None:
    """What in ``params`` cannot reach a child as it is, else ``None``: NaN and Infinity were sent
    as ``null`` without a word, and a JSON string's lone surrogate as ``?``, its deep nesting to a
    child whose every reply the copilot then refused to read (after the call had run)."""
    stack: list[tuple[Any, str, int]] = [(params, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        where = f" at '{shown_name(path)}'" if path else ""
        if depth > MAX_PARAMS_DEPTH:
            return f"nest deeper than the {MAX_PARAMS_DEPTH} levels the copilot passes on{where}"
        if isinstance(value, float) and not math.isfinite(value):
            shown = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            return f"hold {shown}{where}, which JSON cannot carry: pass a finite number, or the value as a string"
        if isinstance(value, str) and has_lone_surrogate(value):
            return f"hold a lone UTF-16 surrogate{where}, which UTF-8 cannot carry: pass the text without it"
        if isinstance(value, Mapping):
            for key, item in value.items():
                inner = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and has_lone_surrogate(key):
                    return f"hold a lone UTF-16 surrogate in a name at '{shown_name(inner)}', which UTF-8 cannot carry"
                stack.append((item, inner, depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value))
    return None


def _coerced(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if isinstance(params, Mapping):
        return dict(params)
    if isinstance(params, str):
        text = params.strip()
        if not text:
            return {}
        try:
            parsed = parse_json(text)
        except json.JSONDecodeError as error:
            raise InvalidParamsError(
                f"'params' must be a JSON object of the tool's arguments; the string given is not valid JSON "
                f'({error.msg} at character {error.pos}). Pass an object such as {{"name": "value"}}.'
            ) from None
        if isinstance(parsed, str) and parsed.lstrip().startswith("{"):
            # Encoded twice (a JSON string holding the object's JSON): models do this too.
            try:
                parsed = parse_json(parsed)
            except json.JSONDecodeError:
                pass
        if isinstance(parsed, Mapping):
            return dict(parsed)
        params = parsed
    raise InvalidParamsError(
        f"'params' must be a JSON object of the tool's arguments, got {json_type_name(params)}. "
        'Pass an object such as {"name": "value"} (or omit it for tools without parameters).'
    )


@dataclass(frozen=True)
class ParamProblem:
    """One thing wrong with ``params``; ``path`` is ``""`` for the params object itself."""

    kind: str  # missing | unknown | wrong_type | invalid
    path: str
    message: str


def json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _preview(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _VALUE_PREVIEW else text[: _VALUE_PREVIEW - 1] + "…"


def describe_type(schema: Any) -> str:
    """A short human name of the type a (sub)schema accepts, e.g. ``integer``, ``array of string``."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "one of " + ", ".join(_preview(v) for v in schema["enum"][:8])
    if "const" in schema:
        return f"exactly {_preview(schema['const'])}"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        items = schema.get("items")
        return f"array of {describe_type(items)}" if isinstance(items, Mapping) else "array"
    if isinstance(kind, str):
        return kind
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            names = [describe_type(o) for o in options]
            return " or ".join(dict.fromkeys(n for n in names if n != "null")) or "null"
    if "$ref" in schema:
        return "object"
    if "properties" in schema:
        return "object"
    return "any"


def _properties(schema: Mapping[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return dict(props) if isinstance(props, Mapping) else {}


def _required(schema: Mapping[str, Any]) -> list[str]:
    required = schema.get("required")
    return [str(r) for r in required] if isinstance(required, list) else []


def _accepts_unknown(schema: Mapping[str, Any]) -> bool:
    """Whether names outside ``properties`` are part of the tool's contract.

    Most tool schemas leave ``additionalProperties`` unset, and their servers silently drop
    unknown arguments -- so a misspelt optional parameter would be lost without a word. We
    report unknown names unless the schema explicitly accepts extra ones (or lists none).
    """
    extra = schema.get("additionalProperties")
    if extra is True or isinstance(extra, Mapping):
        return True
    if schema.get("patternProperties"):
        return True
    return not _properties(schema)


def describe_expected(schema: Mapping[str, Any]) -> str:
    """``a (integer, required), b (string, optional: what b is)`` -- the parameters a tool takes."""
    props = _properties(schema)
    if not props:
        return "no parameters"
    required = set(_required(schema))
    parts = []
    for name, sub in list(props.items())[:MAX_DESCRIBED_PARAMETERS]:
        need = "required" if name in required else "optional"
        text = f"{name} ({describe_type(sub)}, {need})"
        description = sub.get("description") if isinstance(sub, Mapping) else None
        if isinstance(description, str) and description.strip():
            short = " ".join(description.split())
            text += f": {short[:120]}{'…' if len(short) > 120 else ''}"
        parts.append(text)
    if len(props) > MAX_DESCRIBED_PARAMETERS:
        parts.append(f"… and {len(props) - MAX_DESCRIBED_PARAMETERS} more (route's answer has the full input schema)")
    return "; ".join(parts)


def _path_of(error: schema_errors.ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _describe_error(error: schema_errors.ValidationError) -> ParamProblem:
    path = _path_of(error)
    where = f"'{shown_name(path)}'" if path else "params"
    kind = "invalid"
    # null is its own type's only value: "got null", not "got null null".
    shown = "" if error.instance is None else f" {_preview(error.instance)}"
    got = f"got {json_type_name(error.instance)}{shown}"
    if error.validator in ("anyOf", "oneOf"):
        if not error.context:  # oneOf, matched by more than one of its forms
            message = (
                f"{where} matches more than one of the forms it may take ({describe_type(error.schema)}), "
                f"{got}; change it so that it matches exactly one"
            )
            return ParamProblem(kind=kind, path=path, message=message)
        # A value of a type the schema allows fails inside a form: what is wrong there is the fix
        # ("should be object, got object" said nothing). Otherwise its type is what is wrong.
        inside = [e for e in error.context if not (e.validator == "type" and e.absolute_path == error.absolute_path)]
        if inside:
            return _describe_error(schema_errors.best_match(inside))
    if error.validator in ("type", "anyOf", "oneOf"):
        kind = "wrong_type"
        message = f"{where} should be {describe_type(error.schema)}, {got}"
    elif error.validator == "enum":
        message = f"{where} must be {describe_type(error.schema)}; got {_preview(error.instance)}"
    elif error.validator == "required":
        kind = "missing"
        message = f"{where}: {_short_message(error)}"
    elif error.validator == "additionalProperties":
        kind = "unknown"
        message = f"{where}: {_short_message(error)}"
    else:
        message = f"{where}: {_short_message(error)}"
    return ParamProblem(kind=kind, path=path, message=message)


#: Characters of a jsonschema message kept, from both ends (its verdict is at the end).
_MESSAGE_CHARS = 300


def _short_message(error: schema_errors.ValidationError) -> str:
    """jsonschema's message, which begins with the whole value it judged (2 MB for a 2 MB string
    over its ``maxLength``), with the value shortened and the rest kept to both ends."""
    message = error.message
    whole = repr(error.instance)
    if message.startswith(whole):
        message = _preview(error.instance) + message[len(whole) :]
    if len(message) <= _MESSAGE_CHARS:
        return message
    return f"{message[: _MESSAGE_CHARS - 100]}…{message[-99:]}"


#: Validators by schema (JSON text): checking a schema costs more than validating params with it.
_VALIDATORS: dict[str, Any] = {}
#: The same, by the identity of a schema object the caller keeps (a live tool list): no JSON per call.
#: Least recently used first; each entry holds its schema (so its id is not reused) and its size.
_BY_IDENTITY: OrderedDict[int, tuple[Mapping[str, Any], Any, int]] = OrderedDict()
_VALIDATOR_CACHE_SIZE = 4096
#: Characters (of JSON) of the schemas the identity cache may hold. Every restart of a child lists
#: its tools afresh, new schema objects each time: a crashing server with an 88 KB schema added
#: ~200 KB per call, kept until 4,096 entries (about 440 MB). The least recently used go first.
_BY_IDENTITY_CHARS = 16_000_000
_by_identity_chars = 0
_WARNED: set[str] = set()


def _schema_key(schema: Mapping[str, Any]) -> str:
    try:
        return json.dumps(schema, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(schema)


def _warn_once(schema: Mapping[str, Any], message: str, *args: Any, exc_info: bool = False) -> None:
    key = _schema_key(schema)
    if key in _WARNED:
        return
    if len(_WARNED) >= _VALIDATOR_CACHE_SIZE:
        _WARNED.clear()
    _WARNED.add(key)
    title = schema.get("title") if isinstance(schema.get("title"), str) else None
    logger.warning(message + (f" (schema {title!r})" if title else ""), *args, exc_info=exc_info)


def validator_for_schema(schema: Mapping[str, Any]) -> Any | None:
    """A validator of the draft ``schema`` declares (``$schema``) or implies, or ``None`` if it fits none.

    Without ``$schema`` the newest draft that accepts the schema is used, so a draft-04 schema is
    validated as draft-04 instead of being skipped. A schema that no draft accepts is not held
    against the caller: it is logged once and params pass, so the child server gets to decide.
    """
    global _by_identity_chars
    known = _BY_IDENTITY.get(id(schema))
    if known is not None and known[0] is schema:
        _BY_IDENTITY.move_to_end(id(schema))
        return known[1]
    key = _schema_key(schema)
    chosen = _by_content(schema, key)
    if known is not None:  # an id reused by another schema: the old entry goes
        _by_identity_chars -= _BY_IDENTITY.pop(id(schema))[2]
    _BY_IDENTITY[id(schema)] = (schema, chosen, len(key))  # holding the schema keeps its id from being reused
    _by_identity_chars += len(key)
    while _BY_IDENTITY and (len(_BY_IDENTITY) > _VALIDATOR_CACHE_SIZE or _by_identity_chars > _BY_IDENTITY_CHARS):
        _by_identity_chars -= _BY_IDENTITY.popitem(last=False)[1][2]
    return chosen


def _by_content(schema: Mapping[str, Any], key: str) -> Any | None:
    if key in _VALIDATORS:
        return _VALIDATORS[key]
    validator_class, problem = schema_validator_class(schema)
    # An empty registry: a ``$ref`` resolves within the schema and the drafts' bundled metaschemas
    # only. jsonschema's default fetched any other URL -- on the event loop, with no timeout, from a
    # schema the child wrote (a host inside the network, a file:// path) -- as the SDK's own
    # output-schema check already refuses to.
    chosen = validator_class(schema, registry=Registry()) if validator_class is not None else None
    if chosen is None:
        _warn_once(schema, "a tool's input schema fits no JSON Schema draft, its params are not checked: %s", problem)
    elif len(_VALIDATORS) >= _VALIDATOR_CACHE_SIZE:
        _VALIDATORS.clear()
    _VALIDATORS[key] = chosen
    return chosen


def find_problems(schema: Mapping[str, Any], params: Mapping[str, Any]) -> list[ParamProblem]:
    """Everything wrong with ``params`` under ``schema``; empty when they are valid.

    A schema that is itself invalid (it happens) is not held against the caller: it is
    logged and the params pass, so the child server gets to decide.
    """
    problems: list[ParamProblem] = []
    props = _properties(schema)
    for name in _required(schema):
        if name not in params:
            problems.append(
                ParamProblem("missing", name, f"missing required parameter '{name}' ({describe_type(props.get(name))})")
            )
    if not _accepts_unknown(schema):
        for name in params:
            if name not in props:
                hint = did_you_mean(suggest(name, props))
                problems.append(
                    ParamProblem("unknown", name, f"unknown parameter '{shown_name(name)}'{'.' + hint if hint else ''}")
                )

    validator = validator_for_schema(schema)
    if validator is None:
        return problems
    try:
        # Bounded (index.children.bounded_schema): the schema is the child's, the params the host's,
        # and either could make the check run for minutes on the event loop.
        with bounded_check():
            if validator.is_valid(params):
                return problems
            errors = sorted(
                validator.iter_errors(dict(params)), key=lambda e: (list(map(str, e.absolute_path)), e.validator)
            )
    except CheckAbandoned as error:
        _warn_once(schema, "params passed to the child unchecked: %s", error)
        return problems
    except Unresolvable as error:
        _warn_once(
            schema, "params passed to the child unchecked: its input schema's $ref %r is outside the schema "
            "(the copilot fetches no schema from elsewhere)", shown_name(str(getattr(error, "ref", error))),
        )
        return problems
    except Exception:  # noqa: BLE001 -- unresolvable $ref etc.: never block a call on our own checker
        _warn_once(schema, "could not check params against the tool's input schema", exc_info=True)
        return problems

    for error in errors:
        top_level = not error.absolute_path
        # Root-level required / unknown names were reported above with better wording.
        if top_level and error.validator in ("required", "additionalProperties"):
            continue
        problem = _describe_error(error)
        if problem not in problems:
            problems.append(problem)
    return problems


_KIND_NAMES = {"missing": "missing", "unknown": "unknown", "wrong_type": "mistyped", "invalid": "invalid"}


def _count_by_kind(problems: list[ParamProblem]) -> str:
    """``3 more problem(s): 2 unknown, 1 mistyped parameter(s)`` -- what was left out of the list."""
    counts: dict[str, int] = {}
    for problem in problems:
        counts[problem.kind] = counts.get(problem.kind, 0) + 1
    kinds = ", ".join(f"{count} {_KIND_NAMES.get(kind, kind)}" for kind, count in counts.items())
    return f"{len(problems)} more problem(s): {kinds} parameter(s)"


def _nested_hint(schema: Mapping[str, Any], params: Mapping[str, Any]) -> str | None:
    """A hint when the tool's arguments were wrapped in one more object (``params={"params": {...}}``).

    Only for an unknown key whose value is an object made of the tool's own parameter names: then
    the fix is certain, and saying it saves the model from guessing from the list of problems.
    """
    props = _properties(schema)
    for key, value in params.items():
        if key in props or not isinstance(value, Mapping) or not value:
            continue
        if all(isinstance(name, str) and name in props for name in value):
            return (
                f"The tool's arguments are nested one level too deep, inside '{shown_name(key)}': pass them "
                f"directly as params, e.g. params={_preview(dict(value))}."
            )
    return None


def check_params(server: str, tool: str, schema: Mapping[str, Any] | None, params: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidParamsError` naming every problem and the expected parameters."""
    if not isinstance(schema, Mapping):
        return
    problems = find_problems(schema, params)
    if not problems:
        return
    lines = [f"Invalid params for {server}/{tool}:"]
    lines += [f"- {problem.message}" for problem in problems[:MAX_LISTED_PROBLEMS]]
    if len(problems) > MAX_LISTED_PROBLEMS:
        lines.append(f"- … and {_count_by_kind(problems[MAX_LISTED_PROBLEMS:])}")
    nested = _nested_hint(schema, params)
    if nested:
        lines.append(nested)
    lines.append(f"Expected parameters: {describe_expected(schema)}.")
    lines.append(
        f'Call execute again with server_name="{server}", tool_name="{tool}" and params that match this schema.'
    )
    error = InvalidParamsError("\n".join(lines))
    error.problems = problems  # type: ignore[attr-defined]
    raise error
