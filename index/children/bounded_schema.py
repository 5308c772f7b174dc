"""JSON Schema checking with bounded cost, for schemas a child wrote and params a host sent.

The copilot checks a child's ``inputSchema`` against its draft's metaschema (listing) and a host's
params against that schema (``execute``), on the event loop. jsonschema's own keywords let either
side make that take minutes: a ``pattern`` is run with Python's backtracking ``re``
(``^(\\w+\\s?)*$`` against 30 characters), ``uniqueItems`` compares every pair of items that do
not sort (8,000 objects: 86 s), and ``anyOf`` chained through ``$ref`` doubles per level (16
levels: 62 s and 483 MB for ``{"x": 1}``). The validators here are jsonschema's with three changes:

- ``pattern``, ``patternProperties`` and ``additionalProperties`` match with the ``regex`` module
  and a time limit (:data:`PATTERN_SECONDS`) inside a bounded check (:func:`bounded_check`), when
  ``regex`` reads the pattern as ``re`` does (else the check stops); outside one, with ``re``;
- ``uniqueItems`` compares items by a canonical key, in linear time (jsonschema's equality:
  ``1 == 1.0``, ``true != 1``);
- every keyword evaluation counts against a budget (:data:`MAX_STEPS`) per check.

A check that runs out of either raises :class:`CheckAbandoned`: the params then go to the child
unchecked (it validates them itself), and a schema check counts the schema as one it cannot use.
"""

from __future__ import annotations

import contextvars
import re
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import regex
from jsonschema import exceptions as schema_errors
from jsonschema import validators
from jsonschema.protocols import Validator

#: Seconds one ``pattern`` may take to match one string, and all of a check's matching together.
PATTERN_SECONDS = 0.05
PATTERN_SECONDS_PER_CHECK = 0.25
#: Keyword evaluations one check may take, and seconds: a tool's real schema and params take tens to
#: thousands of steps and milliseconds.
MAX_STEPS = 100_000
CHECK_SECONDS = 0.5


class CheckAbandoned(Exception):
    """A check stopped before it was done: a pattern too slow to match, or a schema that branches
    past :data:`MAX_STEPS`. The message says which, for a log line."""


class _Budget:
    def __init__(self, steps: int) -> None:
        self.left = steps
        #: A step through ``$ref`` costs ~80 µs: steps alone let a branching schema run for seconds.
        self.deadline = time.perf_counter() + CHECK_SECONDS
        #: Many strings each just under the one-match limit must not add up to minutes.
        self.matching_left = PATTERN_SECONDS_PER_CHECK


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("schema_check_budget", default=None)


@contextmanager
def bounded_check(steps: int = MAX_STEPS) -> Iterator[None]:
    """Run the checks inside with a fresh step budget (checks outside any are counted against none)."""
    token = _BUDGET.set(_Budget(steps))
    try:
        yield
    finally:
        _BUDGET.reset(token)


#: A ``{`` that opens a repeat ``re`` reads (``{2}``, ``{1,3}``, ``{,3}``); any other is literal to
#: ``re`` but may be a fuzzy-matching constraint to ``regex`` (``(?:secret){e<=1}``).
_REPEAT = re.compile(r"\{\d*(?:,\d*)?\}")


def _odd_brace(pattern: str) -> bool:
    position = 0
    while (position := pattern.find("{", position)) >= 0:
        backslashes = len(pattern[:position]) - len(pattern[:position].rstrip("\\"))
        if backslashes % 2 == 0 and _REPEAT.match(pattern, position) is None:
            return True
        position += 1
    return False


@lru_cache(maxsize=1024)
def _matcher(pattern: str) -> Any:
    """``pattern`` compiled by ``regex`` when ``regex`` reads it as ``re`` does; None when it would
    read it otherwise -- what ``re`` warns may change (nested sets, ``[[:alpha:]]``) and braces
    that are no repeat -- so a check never answers other than jsonschema would. ``re``'s own error
    for a pattern it cannot read is raised, as jsonschema raises it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        try:
            re.compile(pattern, re.UNICODE)  # a flag jsonschema does not pass: not answered from re's cache
        except FutureWarning:
            return None
    if _odd_brace(pattern):
        return None
    try:
        return regex.compile(pattern)
    except regex.error:
        return None


def _search(pattern: str, text: str) -> bool:
    budget = _BUDGET.get()
    if budget is None:  # outside a bounded check: exactly what jsonschema does
        return re.search(pattern, text) is not None
    compiled = _matcher(pattern)
    if compiled is None:
        raise CheckAbandoned(f"the pattern {pattern[:80]!r} has syntax the time-limited matcher would read otherwise")
    limit = min(PATTERN_SECONDS, budget.matching_left)
    if limit <= 0:
        raise CheckAbandoned(f"matching the schema's patterns took over {PATTERN_SECONDS_PER_CHECK:g} s in all")
    started = time.perf_counter()
    try:
        return compiled.search(text, timeout=limit) is not None
    except TimeoutError:
        raise CheckAbandoned(
            f"the pattern {pattern[:80]!r} did not match {len(text):,} characters within {limit:g} s"
        ) from None
    finally:
        budget.matching_left -= time.perf_counter() - started


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[schema_errors.ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield schema_errors.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    for name in instance:
        if name not in properties and not any(_search(pattern, name) for pattern in patterns):
            yield name


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        joined = ", ".join(repr(each) for each in sorted(extras, key=str))
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield schema_errors.ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield schema_errors.ValidationError(f"Additional properties are not allowed ({joined} {verb} unexpected)")


def canonical(value: Any) -> Any:
    """A hashable key equal for values JSON Schema calls equal (``1`` and ``1.0``; not ``true`` and ``1``)."""
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, bool):
        return ("b", value)
    if value is None:
        return ("z",)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, Mapping):
        return ("d", frozenset((key, canonical(item)) for key, item in value.items()))
    if isinstance(value, Sequence):
        return ("l", tuple(canonical(item) for item in value))
    return ("o", id(value))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[schema_errors.ValidationError]:
    if unique and validator.is_type(instance, "array"):
        seen: set[Any] = set()
        for item in instance:
            key = canonical(item)
            if key in seen:
                yield schema_errors.ValidationError(f"{instance!r} has non-unique elements")
                return
            seen.add(key)


def _counted(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def step(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _BUDGET.get()
        if budget is not None:
            budget.left -= 1
            if budget.left < 0:
                raise CheckAbandoned(f"the schema took over {MAX_STEPS:,} steps to check (it branches too much)")
            if not budget.left % 256 and time.perf_counter() > budget.deadline:
                raise CheckAbandoned(f"the schema took over {CHECK_SECONDS:g} s to check (it branches too much)")
        return keyword(validator, value, instance, schema)

    return step


_REPLACED = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}


#: The drafts by the names jsonschema registers them under.
_DRAFT_NAMES = {
    validators.Draft4Validator: "draft4",
    validators.Draft6Validator: "draft6",
    validators.Draft7Validator: "draft7",
    validators.Draft201909Validator: "draft2019-09",
    validators.Draft202012Validator: "draft2020-12",
}
_BOUNDED: dict[type[Validator], type[Validator]] = {}
_MADE_HERE: set[type[Validator]] = set()


def bounded(validator_class: type[Validator]) -> type[Validator]:
    """``validator_class`` with the changes of the module docstring, made once per draft.

    It is registered as its draft's validator (``jsonschema.validators.validates``): jsonschema picks
    the class again at every ``$ref`` to a schema that names its draft -- a metaschema's own
    recursion, a child schema's ``{"$ref": "#"}`` -- and went back to its own, unbounded one there.
    Outside a bounded check the changes cost nothing and mean the same (linear ``uniqueItems``, no
    time limits), so other users of jsonschema in the process see no difference.
    """
    if validator_class in _MADE_HERE:
        return validator_class
    made = _BOUNDED.get(validator_class)
    if made is None:
        keywords = {name: _counted(_REPLACED.get(name, keyword)) for name, keyword in validator_class.VALIDATORS.items()}
        made = _BOUNDED[validator_class] = validators.extend(validator_class, keywords)
        made.__name__ = made.__qualname__ = f"Bounded{validator_class.__name__}"
        _MADE_HERE.add(made)
        if (name := _DRAFT_NAMES.get(validator_class)) is not None:
            validators.validates(name)(made)
    return made


def check_schema(validator_class: type[Validator], schema: Mapping[str, Any]) -> None:
    """``validator_class.check_schema(schema)`` with the metaschema's ``uniqueItems`` in linear time
    (a draft-04 ``enum`` of 8,000 objects took 86 s); raises ``SchemaError``.

    No step budget: checking against a metaschema follows the schema's own structure, so it costs
    what the schema's size does (capped by the listing), and a big real schema must not be refused.
    """
    meta_class = bounded(validators.validator_for(validator_class.META_SCHEMA, default=validator_class))
    meta = meta_class(validator_class.META_SCHEMA, format_checker=meta_class.FORMAT_CHECKER)
    for error in meta.iter_errors(schema):
        raise schema_errors.SchemaError.create_from(error)


__all__ = ["CHECK_SECONDS", "MAX_STEPS", "PATTERN_SECONDS", "PATTERN_SECONDS_PER_CHECK", "CheckAbandoned", "bounded", "bounded_check", "canonical", "check_schema"]
