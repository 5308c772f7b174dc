"""Was a route query about an annotated tool's capability? (Retrieve vs Query errors.)

Two checks, either is enough:

1. the query's tool part (``tool:`` of a ``<tool_assistant>`` block, else the whole query) is
   searched again against the copilot's index with a wide cut-off; if the gold tool ranks among
   the first ``top_n``, the agent asked for the right thing and the retriever ranked it too low;
2. the tool part is compared with the gold tool's own description (cosine similarity of their
   embeddings, the index's model); at or above ``threshold`` the query described that tool.

When neither the index nor the tool descriptions know the gold tool, the check cannot tell
(``None``): the task is ``undecided`` rather than guessed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel

from evaluation.tasks import normalise_tool_name
from index.errors import CopilotError

logger = logging.getLogger(__name__)

#: The gold tool must rank within this many results of the re-run query.
DEFAULT_TOP_N = 20
#: Cosine similarity (all-MiniLM-L6-v2) from which a query is taken to describe a tool; chosen on
#: the labelled set (see ``bench/taxonomy.py``).
DEFAULT_THRESHOLD = 0.5


class CapabilityVerdict(BaseModel):
    right: bool
    #: How it was decided, for the evidence ("ranks 7 of 20 for the query's tool part", …).
    how: str


class CapabilityCheck(Protocol):
    def about(self, query: str, gold_tool: str) -> CapabilityVerdict | None: ...


def tool_part(query: str) -> str:
    """What the query asks of the tool (the ``tool:`` field), as the index would search it."""
    from index.search.query import parse_query  # noqa: PLC0415

    try:
        return parse_query(query).tool
    except (CopilotError, ValueError):
        return " ".join(query.split())


class IndexCapabilityCheck:
    """Both checks, with whatever is available: a built ``index`` (``ToolIndex``), ``descriptions``
    (``(server, tool) -> text``) and an ``embedder`` (``index.models.embedding.Embedder``)."""

    def __init__(
        self,
        index: Any | None,
        descriptions: Mapping[tuple[str, str], str],
        embedder: Any | None,
        *,
        top_n: int = DEFAULT_TOP_N,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> None:
        self.index = index
        self.embedder = embedder
        self.top_n = top_n
        self.threshold = threshold
        self._descriptions: dict[str, list[str]] = {}
        for (_server, tool), text in descriptions.items():
            if text:
                self._descriptions.setdefault(normalise_tool_name(tool), []).append(text)
        if index is not None:
            try:
                for record in index.records().values():
                    if record.description:
                        self._descriptions.setdefault(normalise_tool_name(record.name), []).append(record.description)
            except CopilotError as error:
                logger.info("taxonomy: index unavailable (%s)", error)
                self.index = None
        self._indexed = self._index_names()
        self._search_cache: dict[str, list[str]] = {}
        self._vectors: dict[str, np.ndarray] = {}

    def _index_names(self) -> set[str]:
        if self.index is None:
            return set()
        try:
            return {normalise_tool_name(record.name) for record in self.index.records().values()}
        except CopilotError:
            return set()

    def _ranked(self, text: str) -> list[str]:
        if text not in self._search_cache:
            try:
                hits = self.index.search(text, top_k=self.top_n)  # type: ignore[union-attr]
            except CopilotError as error:
                logger.info("taxonomy: search failed (%s)", error)
                hits = []
            self._search_cache[text] = [normalise_tool_name(hit.tool) for hit in hits]
        return self._search_cache[text]

    def _vector(self, text: str) -> np.ndarray:
        if text not in self._vectors:
            self._vectors[text] = self.embedder.embed_queries([text])[0]  # type: ignore[union-attr]
        return self._vectors[text]

    def about(self, query: str, gold_tool: str) -> CapabilityVerdict | None:
        gold = normalise_tool_name(gold_tool)
        text = tool_part(query)
        if not text:
            return CapabilityVerdict(right=False, how="the query is empty")
        notes = []
        # A rank means something only in a catalogue much larger than the cut-off.
        if self.index is not None and gold in self._indexed and len(self._indexed) > 2 * self.top_n:
            ranked = self._ranked(text)
            if gold in ranked:
                return CapabilityVerdict(
                    right=True, how=f"{gold_tool} ranks {ranked.index(gold) + 1} of {self.top_n} for the query's tool part"
                )
            notes.append(f"{gold_tool} is not in the first {self.top_n} for the query's tool part")
        descriptions = self._descriptions.get(gold, [])
        if descriptions and self.embedder is not None:
            query_vector = self._vector(text)
            similarity = max(float(np.dot(query_vector, self._vector(d[:1000]))) for d in descriptions)
            right = similarity >= self.threshold
            how = f"similarity {similarity:.2f} to {gold_tool}'s description ({'>=' if right else '<'} {self.threshold:g})"
            return CapabilityVerdict(right=right, how="; ".join([*notes, how]) if not right else how)
        if notes:
            return CapabilityVerdict(right=False, how="; ".join(notes))
        return None


def open_capability_check(descriptions: Mapping[tuple[str, str], str], settings: Any | None = None) -> IndexCapabilityCheck:
    """The check with the copilot's own index and model (``COPILOT_HOME``), when there is one."""
    from index.models.embedding import get_embedder  # noqa: PLC0415 -- loads torch
    from index.settings import CopilotSettings  # noqa: PLC0415
    from index.search.tool_index import ToolIndex  # noqa: PLC0415

    settings = settings or CopilotSettings.load()
    try:
        embedder = get_embedder(settings.embedding_model, settings.embedding_precision, settings.model_cache)
    except CopilotError as error:
        logger.warning("taxonomy: no embedding model (%s); queries are checked against the index only", error)
        embedder = None
    index: Any | None = None
    try:
        index = ToolIndex.open(settings, embedder=embedder)
        if not index.built:
            index = None
    except CopilotError as error:
        logger.info("taxonomy: no index (%s)", error)
        index = None
    return IndexCapabilityCheck(index, descriptions, embedder)
