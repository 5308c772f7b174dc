"""``ToolIndex``: the search API the copilot server (``route``) and the CLIs use.

Opening is cheap; the first search (or :meth:`ToolIndex.warm`, which the server calls from a
background thread) loads the embedding model and copies the index from Chroma into memory:
tool and server embedding matrices (numpy) and a BM25 index. Chroma stays the store of record;
an index rebuilt by another process is picked up within a few seconds. Until the model is in
(or while it fails to load, see :mod:`index.search.model_loading`) the copilot's routes are
answered by BM25 alone.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ValidationError

from index.storage.build_report import BuildReport
from index.models.embedding import Embedder, get_embedder
from index.search.confidence import judge, weak_keywords
from index.errors import CatalogError, IndexNotBuiltError, QueryError
from index.cli.hints import index_command
from index.search.lexical import LexicalIndex
from index.search.model_loading import LEXICAL_MODES, LoadFailure, ModelLoader
from index.search.providers import InputLink, ServerLinks
from index.search.query import ParsedQuery, check_top_k, parse_query
from index.search.ranking import (
    HYBRID,
    PROVIDER_CAP,
    Method,
    SearchSpace,
    Weights,
    best_of,
    compute_signals,
    fuse,
    keyword_scores,
    operation_signals,
    similarities,
    top_indices,
    with_providers,
)
from index.catalog.records import RECORD_KINDS, RecordKind, ToolRecord
from index.settings import DEFAULT_EMBEDDING_MODEL, CopilotSettings
from index.storage.store import ChromaStore, IndexState, StoredTool
from index.storage.read_copy import StoreContents, load_read_copy, save_read_copy
from index.storage.write_lock import settings_write_lock
from index.cli.suggest import nearest_names
from index.search.text import DOCUMENT_VERSION, server_document, tokenize, tool_document
from index.search.session_prior import session_boost
from index.usage.prior import UsagePriorFile

logger = logging.getLogger(__name__)

#: How often a long-lived index looks for a rebuild made by another process.
STALE_CHECK_SECONDS = 5.0

#: Query embeddings remembered per index (384 floats each: ~1.5 MB at this size).
QUERY_CACHE_SIZE = 1024

#: Rounds of asking a route's ``hide`` about its best tools before asking about every tool.
_HIDE_ROUNDS = 4

#: ``progress(done, total)`` while embedding during a sync.
Progress = Callable[[int, int], None]


class SearchHit(BaseModel):
    server: str
    tool: str
    kind: RecordKind = "tool"
    uri: str | None = None
    mime_type: str | None = None
    title: str | None = None
    description: str
    input_schema: dict[str, Any]
    required: list[str]
    annotations: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    score: float
    #: Tools ranked in the same answer that take an input this one gives (call this one first).
    input_for: list[InputLink] = []
    #: Tools of its server that give this one a required input (its best-scoring few, in or out of the
    #: answer): where a value it needs comes from.
    input_from: list[InputLink] = []


SearchMode = Literal["hybrid", "dense", "bm25", "two-level", "lexical-startup", "lexical-fallback"]


class SearchResult(BaseModel):
    """Hits plus what the caller should tell the model about them."""

    hits: list[SearchHit]
    #: ``lexical-startup``: the embedding model was still loading, so only BM25 ranked these (and
    #: only hits sharing a word with the query are kept); ``lexical-fallback``: the same because the
    #: model failed to load (``model_failure`` says why and when it is retried).
    mode: SearchMode = "hybrid"
    model_failure: LoadFailure | None = None
    #: The query was longer than ``MAX_QUERY_CHARS``: only its beginning was searched.
    truncated: bool = False
    #: The best match scored low on every signal: the pool probably has no tool for this (while
    #: answering by keywords: only common words matched, so the best hit is probably not it).
    weak: bool = False
    #: Hits left out because they scored far below the best one (fewer than top_k returned).
    trimmed: int = 0
    #: Servers (best first) whose description is closest to the query, for a weak answer.
    related_servers: list[str] = []
    related_categories: list[str] = []
    #: The operations a query listed, each also searched on its own (empty for one operation).
    operations: list[str] = []
    #: How many operations the query listed (``operations`` holds the ones searched on their own).
    operations_listed: int = 0
    #: The session's servers whose tools were lifted (see :mod:`index.search.session_prior`).
    session_servers: list[str] = []
    #: Tools among the best that the caller's ``hide`` kept out of the answer, by its reason.
    hidden: dict[str, int] = {}


@dataclass(frozen=True)
class _Snapshot:
    state: IndexState
    space: SearchSpace
    servers: list[str]  # server of each tool, aligned with space.ids
    records_json: list[str]
    position: dict[str, int]
    server_index: dict[str, int]
    kinds: np.ndarray  # kind of each record ("tool", "prompt", ...), aligned with space.ids
    kind_set: frozenset[str]
    server_first: dict[str, int]  # a position of each server's tools (its category and description)
    parsed: dict[int, ToolRecord] = field(default_factory=dict)
    providers: ServerLinks = field(init=False)  # each tool's input providers, found per server on first need

    def __post_init__(self) -> None:
        object.__setattr__(self, "providers", ServerLinks(self.space.tool_servers, self.kinds, self._stored_tool))

    def record(self, position: int) -> ToolRecord:
        """The full record, parsed on first use (a dict write is atomic, so threads may race harmlessly)."""
        record = self.parsed.get(position)
        if record is None:
            record = self.parsed[position] = ToolRecord.model_validate_json(self.records_json[position])
        return record

    def _stored_tool(self, position: int) -> ToolRecord | None:
        """The record for finding input links, or None when it no longer reads as one (left out of the
        links, not a reason to refuse every search; showing it as a hit says what is wrong). Not kept:
        a server's links read all its tools, and a long session would end up holding every record."""
        try:
            return self.parsed.get(position) or ToolRecord.model_validate_json(self.records_json[position])
        except ValidationError as error:
            logger.debug("a stored tool does not read as a record: %s", error)
            return None


@dataclass(frozen=True)
class _Scored:
    scores: np.ndarray
    dense: np.ndarray | None = None
    lexical: np.ndarray | None = None
    server_scores: np.ndarray | None = None  # one per server (for suggestions)


def _best_signal(values: list[np.ndarray | None]) -> np.ndarray | None:
    """One raw signal's best value over the whole query and its operations (for the weak-match verdict)."""
    present = [v for v in values if v is not None]
    return best_of(present) if present else None


def _skipped_after(
    held: Mapping[str, Mapping[str, str]],
    given: Mapping[str, Mapping[str, str]] | None,
    scope: set[str] | None,
    indexed: Collection[str],
) -> dict[str, dict[str, str]]:
    """The skipped tools a sync leaves: ``given`` replaces ``held`` for the servers it covers (every
    server without a scope), and a tool that has a record now is no longer skipped."""
    merged = {server: dict(tools) for server, tools in held.items()}
    if given is not None:
        if scope is None:
            merged = {}
        for server in (scope or set()) | set(given):
            merged.pop(server, None)
        merged.update({server: dict(tools) for server, tools in given.items()})
    return {
        server: kept
        for server, tools in sorted(merged.items())
        if (kept := {name: why for name, why in sorted(tools.items()) if f"{server}/{name}" not in indexed})
    }


def _build_id() -> str:
    return uuid.uuid4().hex[:12]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_advice(settings: CopilotSettings) -> str:
    """The exact command that builds the index ``settings`` describe (crawling first without a catalog)."""
    build = index_command(settings, "build")
    if settings.catalog_file().exists():
        return f"build it with: {build}"
    return (
        f"there is no catalog at {settings.catalog_file()} to build it from; crawl the servers, then build: "
        f"{index_command(settings, 'crawl')} && {build}"
    )


class ToolIndex:
    """Thread-safe search over the built index; see the module docstring for the life cycle."""

    def __init__(self, settings: CopilotSettings, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self._embedder = embedder
        self._store = ChromaStore(settings)
        self._usage = UsagePriorFile(settings.usage_prior_file, settings.usage_prior_weight)
        self._lock = threading.RLock()
        self._snapshot: _Snapshot | None = None
        self._checked_at = 0.0
        #: The store's signature when the snapshot was read (None: unknown, so it is read again).
        self._signature: str | None = None
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._model_loader = ModelLoader(lambda: self.embedder.load())
        self._cache_lock = threading.Lock()

    @classmethod
    def open(cls, settings: CopilotSettings | None = None, *, embedder: Embedder | None = None) -> ToolIndex:
        """Cheap: validates the model setting, loads neither the model nor Chroma."""
        index = cls(settings or CopilotSettings.load(), embedder=embedder)
        _ = index.embedder  # an unusable COPILOT_EMBEDDING_MODEL fails here, not on the first query
        return index

    # -- properties --------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder(
                self.settings.embedding_model, self.settings.embedding_precision, self.settings.model_cache
            )
        return self._embedder

    @property
    def model_name(self) -> str:
        return self.embedder.label

    @property
    def model_loader(self) -> ModelLoader:
        """Loads the embedding model in the background for lexical-first routes (and retries a failure)."""
        return self._model_loader

    @property
    def location(self) -> str:
        return self._store.location

    @property
    def tool_count(self) -> int:
        """Number of indexed tools (0 when nothing is built yet)."""
        snapshot = self._current(required=False)
        return snapshot.space.size if snapshot else 0

    @property
    def built(self) -> bool:
        return self._current(required=False) is not None

    def ensure_built(self) -> None:
        """Raise :class:`IndexNotBuiltError` (saying how to build) when nothing is built."""
        self._current(required=True)

    def state(self) -> IndexState | None:
        """Which model/catalog built the index, or None when nothing is built."""
        snapshot = self._current(required=False)
        return snapshot.state if snapshot else None

    # -- loading -----------------------------------------------------------------------------

    def warm(self) -> None:
        """Load the model and the in-memory search structures, so the first query is fast. With no
        index built there is nothing to search: the model (~3 s of CPU, ~200 MB) loads with the
        build or the first route after it, not for a copilot that may only ever execute. jieba's
        dictionary is loaded only when some indexed text is Chinese (see ``LexicalIndex.has_chinese``)."""
        snapshot = self._current(required=False)
        if snapshot is None:
            logger.debug("no index is built: nothing to warm")
            return
        # Through the loader, so a failure here is what routes report (not "still loading").
        self._model_loader.load()
        self.embedder.embed_queries(["warm up"])
        if snapshot.space.lexical.has_chinese:
            tokenize("预热")  # loads jieba's dictionary now rather than during a query

    def _current(self, *, required: bool) -> _Snapshot | None:
        snapshot = self._snapshot
        now = time.monotonic()
        if snapshot is not None and now - self._checked_at < STALE_CHECK_SECONDS:
            return snapshot
        # A sync (the copilot re-indexing a changed server) holds the lock while it embeds and
        # reloads: searches keep answering from the current snapshot instead of waiting for it.
        if not self._lock.acquire(blocking=snapshot is None):
            return snapshot
        try:
            snapshot = self._snapshot
            if snapshot is None or time.monotonic() - self._checked_at >= STALE_CHECK_SECONDS:
                snapshot = self._snapshot = self._fresh(snapshot)
                self._checked_at = time.monotonic()
        finally:
            self._lock.release()
        if snapshot is None and required:
            raise IndexNotBuiltError(f"no tool index at {self.location}: {build_advice(self.settings)}")
        return snapshot

    def _fresh(self, snapshot: _Snapshot | None) -> _Snapshot | None:
        """What the store holds now: ``snapshot`` while the store's signature says nothing wrote it,
        else the read copy kept for that signature (no Chroma), else the store read through Chroma."""
        signature = self._store.signature()
        if signature is not None and snapshot is not None and signature == self._signature:
            return snapshot
        copy = load_read_copy(self.settings, signature) if signature is not None else None
        if copy is not None:
            self._store.note_read_elsewhere(copy.state)
            self._signature = signature
            if snapshot is not None and snapshot.state.build_id == copy.state.build_id:
                return snapshot
            logger.debug("loaded %d tools from the read copy of %s", len(copy.tools.ids), self.location)
            return self._snapshot_of(copy)
        state = self._store.read_state()
        if state is None:
            self._signature = None
            return None
        if snapshot is not None and snapshot.state.build_id == state.build_id:
            self._signature = signature
            return snapshot
        return self._load(state, signature)

    def _load(self, state: IndexState, signature: str | None) -> _Snapshot:
        return self._snapshot_of(self._read_through_chroma(state, signature))

    def _read_through_chroma(self, state: IndexState, signature: str | None) -> StoreContents:
        """The whole index read through Chroma (``signature``: the store's before reading, when known),
        keeping a read copy for the next reader when nothing wrote the store meanwhile."""
        started = time.perf_counter()
        contents = StoreContents(state, self._store.load_tools(), *self._store.load_servers())
        logger.debug("loaded %d tools from %s in %.2f s", len(contents.tools.ids), self.location, time.perf_counter() - started)
        self._signature = signature if signature is not None and self._store.signature() == signature else None
        if self._signature is not None:
            save_read_copy(self.settings, self._signature, contents)
        return contents

    def _snapshot_of(self, contents: StoreContents) -> _Snapshot:
        state, loaded = contents.state, contents.tools
        ids, tool_vectors = loaded.ids, loaded.vectors
        server_names, server_vectors = contents.server_names, contents.server_vectors
        server_index = {name: i for i, name in enumerate(server_names)}
        missing = sorted(set(loaded.servers) - server_index.keys())
        if missing:
            # A server without an embedded description still ranks by its tools (zero server signal).
            logger.warning("index has no server entry for %s", ", ".join(missing[:5]))
            dimension = tool_vectors.shape[1] if tool_vectors.size else server_vectors.shape[1]
            server_names = server_names + missing
            server_vectors = np.vstack([server_vectors.reshape(-1, dimension), np.zeros((len(missing), dimension), np.float32)])
            server_index = {name: i for i, name in enumerate(server_names)}
        space = SearchSpace(
            ids=ids,
            tool_vectors=tool_vectors,
            tool_servers=np.asarray([server_index[s] for s in loaded.servers], dtype=np.int32),
            server_names=server_names,
            server_vectors=server_vectors,
            lexical=LexicalIndex(loaded.tokens),
        )
        return _Snapshot(
            state=state,
            space=space,
            servers=loaded.servers,
            records_json=loaded.records_json,
            position={tool_id: i for i, tool_id in enumerate(ids)},
            server_index=server_index,
            kinds=np.asarray(loaded.kinds, dtype=object),
            kind_set=frozenset(loaded.kinds),
            server_first={name: i for i, name in reversed(list(enumerate(loaded.servers)))},
        )

    def _replace_snapshot(self, state: IndexState) -> None:
        """After a sync: an index in use is reloaded right away (searches meanwhile use the old
        snapshot, see ``_current``); an unused one is loaded by its first search -- from the read
        copy this leaves, so the first copilot start after ``index build`` needs no Chroma either
        (the build has it open; a reader would have imported it for this alone)."""
        with self._lock:
            contents = self._read_through_chroma(state, self._store.signature())
            self._snapshot = self._snapshot_of(contents) if self._snapshot is not None else None
            self._checked_at = time.monotonic() if self._snapshot is not None else 0.0

    # -- reading -----------------------------------------------------------------------------

    def records(self) -> dict[str, ToolRecord]:
        """id -> record of every indexed tool (empty when nothing is built)."""
        snapshot = self._current(required=False)
        if snapshot is None:
            return {}
        return {tool_id: snapshot.record(i) for i, tool_id in enumerate(snapshot.space.ids)}

    def records_of(self, kinds: Collection[str] = RECORD_KINDS, *, server: str | None = None) -> list[ToolRecord]:
        """Records of these kinds (e.g. ``{"prompt"}``), of one ``server`` if given, in id order;
        only those are parsed."""
        snapshot = self._current(required=False)
        if snapshot is None:
            return []
        wanted = set(kinds)
        return [
            snapshot.record(i)
            for i, kind in enumerate(snapshot.kinds)
            if kind in wanted and (server is None or snapshot.servers[i] == server)
        ]

    def kinds_offered(self, servers: Collection[str] | None = None) -> dict[str, int]:
        """How many records of each kind (tool, prompt, resource, ...) ``servers`` hold (all servers
        when None); nothing is parsed."""
        snapshot = self._current(required=False)
        if snapshot is None:
            return {}
        kinds = snapshot.kinds
        if servers is not None:
            wanted = [snapshot.server_index[name] for name in servers if name in snapshot.server_index]
            kinds = kinds[np.isin(snapshot.space.tool_servers, np.asarray(wanted, dtype=np.int32))]
        names, counts = np.unique(kinds.astype(str), return_counts=True) if kinds.size else ([], [])
        return {str(name): int(count) for name, count in zip(names, counts, strict=True)}

    def get(self, server: str, tool: str) -> ToolRecord | None:
        return self.find(f"{server}/{tool}")

    def find(self, record_id: str) -> ToolRecord | None:
        """The record of this id (``server/tool``, ``prompt:server/name``, ...), or None."""
        snapshot = self._current(required=False)
        if snapshot is None:
            return None
        position = snapshot.position.get(record_id)
        return snapshot.record(position) if position is not None else None

    def skipped_tools(self, server: str) -> dict[str, str]:
        """Tools of ``server`` left out of the index for a broken definition: name -> what is wrong."""
        snapshot = self._current(required=False)
        return dict(snapshot.state.skipped_tools.get(server, {})) if snapshot is not None else {}

    def server_names(self) -> list[str]:
        snapshot = self._current(required=False)
        return sorted(set(snapshot.servers)) if snapshot else []

    # -- search ------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        top_k: int = 5,
        server: str | None = None,
        servers: Collection[str] | None = None,
        *,
        method: Method = "hybrid",
        kinds: Collection[str] = ("tool",),
    ) -> list[SearchHit]:
        """Best tools for ``query`` (plain text or a ``<tool_assistant>`` block).

        ``server`` restricts to one server (an unknown name is a :class:`QueryError` with
        suggestions); ``servers`` restricts to a set (names not in the index are ignored);
        ``kinds`` to tools (the default), prompts, resources and/or resource templates.
        Always ``top_k`` hits (when the index has them); :meth:`route` is the copilot's variant.
        """
        return self.route(
            query, top_k, server, servers, method=method, kinds=kinds, trim=False, wait_for_model=True
        ).hits

    def route(
        self,
        query: str,
        top_k: int = 5,
        server: str | None = None,
        servers: Collection[str] | None = None,
        *,
        method: Method = "hybrid",
        kinds: Collection[str] = ("tool",),
        trim: bool = True,
        wait_for_model: bool = True,
        model_wait: float = 0.0,
        weights: Weights = HYBRID,
        session_servers: Collection[str] = (),
        hide: Callable[[ToolRecord], str | None] | None = None,
    ) -> SearchResult:
        """:meth:`search` plus what ``route`` tells the model: weak matches, trimmed hits, start-up mode.

        ``hide`` says why a tool may not be shown (the caller's allow/deny and read-only rules), or
        ``None``: such tools are left out *before* the answer is judged weak or trimmed, so the
        verdicts are about the tools it can show (a denied best match made the answer look strong).

        ``trim`` drops hits scoring far below the best (see :mod:`index.search.confidence`);
        ``wait_for_model=False`` answers with BM25 alone while the embedding model is still
        loading (the load is started in the background) or failed to load (retried in the
        background after a delay) instead of waiting for it; ``model_wait`` seconds first, when
        positive, for a load starting or in progress (a failed one is not retried before its delay).
        ``session_servers`` are the servers the caller's session ran a tool of without error: their
        tools are lifted (:mod:`index.search.session_prior`; not while answering by keywords).
        """
        parsed = parse_query(query)
        top_k = check_top_k(top_k)
        snapshot = self._current(required=True)
        assert snapshot is not None
        if snapshot.state.model != self.model_name:
            raise IndexNotBuiltError(
                f"the index at {self.location} was built with the embedding model {snapshot.state.model!r}, "
                f"but COPILOT_EMBEDDING_MODEL and COPILOT_EMBEDDING_PRECISION now mean {self.model_name!r}; "
                f"rebuild it with: {index_command(self.settings, 'build')}"
            )
        mask = self._mask(snapshot, server, servers)
        if not snapshot.kind_set <= set(kinds):  # an index of tools only needs no mask for tools
            by_kind = np.isin(snapshot.kinds, list(kinds))
            mask = by_kind if mask is None else mask & by_kind
        if snapshot.space.size == 0 or (mask is not None and not mask.any()):
            return SearchResult(hits=[], mode=method, truncated=parsed.truncated)
        mode: SearchMode = method
        failure: LoadFailure | None = None
        if method != "bm25" and not wait_for_model and not self.embedder.loaded and model_wait > 0:
            self.load_model_in_background()
            self._model_loader.wait(model_wait)
        if method != "bm25" and not wait_for_model and not self.embedder.loaded:
            failure = self._model_loader.failure  # read before a retry starts (it may clear the failure)
            self.load_model_in_background()
            mode = "lexical-startup" if failure is None else "lexical-fallback"
        lexical_only = mode in LEXICAL_MODES
        # The hybrid (also while it answers lexically at start-up) searches each listed operation too.
        operations = list(parsed.operations) if method == "hybrid" else []
        # What the answer says was lifted is exactly what scoring lifts.
        lifted = self._lifted(snapshot, session_servers, mask) if method == "hybrid" and not lexical_only else []
        scored = self._scores(snapshot, parsed, "bm25" if lexical_only else method, mask, weights, operations, lifted)
        positions = top_indices(scored.scores, top_k, mask)
        hidden: Counter[str] = Counter()
        if hide is not None:
            positions, mask = self._without_hidden(snapshot, scored.scores, top_k, mask, positions, hide, hidden)
        result = SearchResult(
            hits=[], mode=mode, model_failure=failure, operations=operations, truncated=parsed.truncated,
            session_servers=lifted, operations_listed=parsed.operations_listed if operations else 0,
            hidden=dict(hidden),
        )
        if lexical_only:
            # Keywords alone: a tool sharing no word with the query scores 0 and its rank is
            # arbitrary, so it is no answer (none left: the caller says nothing matched by keywords).
            positions = [p for p in positions if scored.scores[p] > 0]
            # Judged on the tools it may show, as the hybrid's verdict is (no related servers: those
            # come from the model's server similarities).
            if positions and weak_keywords(float(scored.scores[positions[0]]), snapshot.space.lexical.one_rare_word_score):
                result.weak = True
        if method == "hybrid" and mode == "hybrid" and positions:
            verdict = judge(scored.scores, scored.dense, scored.lexical, positions, mask)
            if trim:
                result.trimmed = len(positions) - verdict.keep
                positions = positions[: verdict.keep]
            # The weak threshold is calibrated for the bundled model's similarities only (both precisions).
            if verdict.weak and self.embedder.name == DEFAULT_EMBEDDING_MODEL:
                result.weak = True
                allowed = None if mask is None else {snapshot.servers[i] for i in np.flatnonzero(mask)}
                result.related_servers = self._related_servers(snapshot, scored.server_scores, allowed)
                result.related_categories = list(
                    dict.fromkeys(c for c in (self._category(snapshot, s) for s in result.related_servers) if c)
                )
        result.hits = [self._hit(snapshot, position, scored.scores, positions) for position in positions]
        return result

    @staticmethod
    def _without_hidden(
        snapshot: _Snapshot,
        scores: np.ndarray,
        top_k: int,
        mask: np.ndarray | None,
        positions: list[int],
        hide: Callable[[ToolRecord], str | None],
        hidden: Counter[str],
    ) -> tuple[list[int], np.ndarray | None]:
        """The best ``top_k`` positions ``hide`` lets through, and the mask that leaves out the ones
        it did not. Only the best are asked about (a few rounds), not every tool of the index: a
        rule rarely hides many of them, and asking costs a glob match per tool."""
        for _round in range(_HIDE_ROUNDS):
            gone = {position: why for position in positions if (why := hide(snapshot.record(position))) is not None}
            if not gone:
                return positions, mask
            hidden.update(gone.values())
            mask = np.ones(scores.size, dtype=bool) if mask is None else mask.copy()
            mask[list(gone)] = False
            positions = top_indices(scores, top_k, mask)
        # Still hiding after those rounds (a rule hiding most of the index): ask about every tool left.
        assert mask is not None
        for position in np.flatnonzero(mask):
            if (why := hide(snapshot.record(int(position)))) is not None:
                mask[position] = False
                if position in positions:
                    hidden[why] += 1
        return top_indices(scores, top_k, mask), mask

    @staticmethod
    def _input_for(snapshot: _Snapshot, position: int, answer: Sequence[int]) -> list[InputLink]:
        return [
            InputLink(tool=snapshot.record(consumer).name, parameter=provision.parameter)
            for consumer in answer
            for provider, provision in snapshot.providers.of(consumer)
            if provider == position
        ]

    @staticmethod
    def _input_from(snapshot: _Snapshot, position: int, scores: np.ndarray) -> list[InputLink]:
        found = sorted(snapshot.providers.of(position), key=lambda link: (-float(scores[link[0]]), link[0]))
        return [
            InputLink(tool=snapshot.record(provider).name, parameter=provision.parameter)
            for provider, provision in found[:PROVIDER_CAP]
        ]

    @classmethod
    def _hit(cls, snapshot: _Snapshot, position: int, scores: np.ndarray, answer: Sequence[int] = ()) -> SearchHit:
        record = snapshot.record(position)
        return SearchHit(
            server=record.server,
            tool=record.name,
            kind=record.kind,
            uri=record.uri,
            mime_type=record.mime_type,
            title=record.title,
            description=record.description,
            input_schema=record.input_schema,
            required=record.required,
            annotations=record.annotations,
            output_schema=record.output_schema,
            score=round(float(scores[position]), 4),
            input_for=cls._input_for(snapshot, position, answer),
            input_from=cls._input_from(snapshot, position, scores),
        )

    def model_state(self) -> dict[str, Any]:
        """Whether searches rank with the model now (``python -m server status`` shows it): ``loaded``,
        ``loading``, ``not loaded`` (nothing asked for it yet) or ``failed`` with why and when the next
        attempt may start; until it is loaded, ``route`` answers by keywords."""
        if self.embedder.loaded:
            return {"state": "loaded"}
        if self._model_loader.running:
            return {"state": "loading"}
        failure = self._model_loader.failure
        if failure is not None:
            return {
                "state": "failed", "reason": failure.reason, "attempts": failure.attempts,
                "retry_in_s": round(failure.retry_in(), 1),
            }
        return {"state": "not loaded"}

    def load_model_in_background(self) -> None:
        """Start loading the embedding model in a daemon thread, unless it is in, loading, or failed
        too recently (see :mod:`index.search.model_loading`); searches meanwhile are lexical."""
        if not self.embedder.loaded:
            self._model_loader.start()

    def _scores(
        self,
        snapshot: _Snapshot,
        parsed: ParsedQuery,
        method: Method,
        mask: np.ndarray | None,
        weights: Weights,
        operations: list[str],
        lifted: Collection[str] = (),
    ) -> _Scored:
        space = snapshot.space
        if method == "bm25":
            lexical = keyword_scores(space.lexical, parsed.tool, operations)
            return _Scored(scores=lexical, lexical=lexical)
        if parsed.server:
            tool_vector, server_vector = self._query_vectors([parsed.tool, parsed.server])
        else:
            tool_vector = server_vector = self._query_vectors([parsed.tool])[0]
        if method in ("dense", "two-level"):
            dense = similarities(space.tool_vectors, tool_vector)
            if method == "dense":
                return _Scored(scores=dense, dense=dense)
            server = similarities(space.server_vectors, server_vector)[space.tool_servers] if space.server_names else np.zeros_like(dense)
            return _Scored(scores=np.clip(dense, 0.0, None) * np.clip(server, 0.0, None), dense=dense)
        whole = compute_signals(
            space, tool_vector=tool_vector, server_vector=server_vector, lexical_text=parsed.tool, weights=weights
        )
        signals = [whole, *operation_signals(whole, space.lexical, operations, weights)]
        server_scores = similarities(space.server_vectors, server_vector) if space.server_names else None
        # Providers are lifted last, so a tool's input provider follows it whatever raised the tool.
        scores = self._with_priors(snapshot, best_of([fuse(s, weights, mask) for s in signals]), lifted)
        return _Scored(
            scores=with_providers(scores, snapshot.providers, mask),
            dense=whole.dense,
            lexical=_best_signal([s.lexical for s in signals]),
            server_scores=server_scores,
        )

    def _with_priors(self, snapshot: _Snapshot, scores: np.ndarray, lifted: Collection[str]) -> np.ndarray:
        """``scores`` plus the usage prior's boost (:mod:`index.usage.prior`) and the session's for
        the ``lifted`` servers (:mod:`index.search.session_prior`), each when there is one."""
        for boost in (
            self._usage.boost(snapshot.space.ids, snapshot.kinds),
            session_boost(
                snapshot.space.tool_servers, snapshot.server_index, lifted, self.settings.session_prior_weight
            ),
        ):
            if boost is not None:
                scores = scores + boost
        return scores

    def _lifted(self, snapshot: _Snapshot, session_servers: Collection[str], mask: np.ndarray | None) -> list[str]:
        """The session's servers a hybrid ranking lifts, when the prior is on: those in the index
        whose tools this search may return (a server filter or a removed server lifts nothing)."""
        if self.settings.session_prior_weight <= 0 or not session_servers:
            return []
        positions = [(name, snapshot.server_index.get(name)) for name in session_servers]
        if mask is None:
            return [name for name, position in positions if position is not None]
        searched = np.zeros(len(snapshot.server_index), dtype=bool)  # per server: any tool in the mask
        searched[snapshot.space.tool_servers[mask]] = True
        return [name for name, position in positions if position is not None and searched[position]]

    def usage_prior_info(self) -> dict[str, Any] | None:
        """The usage prior ``route`` adds (file, trajectories, tools, weight), or None."""
        return self._usage.info()

    @staticmethod
    def _related_servers(
        snapshot: _Snapshot, server_scores: np.ndarray | None, allowed: set[str] | None, count: int = 3
    ) -> list[str]:
        if server_scores is None or not len(server_scores):
            return []
        present = set(snapshot.servers) if allowed is None else allowed
        order = np.argsort(-server_scores, kind="stable")
        return [snapshot.space.server_names[i] for i in order if snapshot.space.server_names[i] in present][:count]

    @staticmethod
    def _category(snapshot: _Snapshot, server: str) -> str:
        position = snapshot.server_first.get(server)
        return snapshot.record(position).category if position is not None else ""

    def _query_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Embeddings of query texts; agents repeat queries, so recent ones are remembered."""
        with self._cache_lock:
            found = {text: self._query_cache.get(text) for text in texts}
            for text, vector in found.items():
                if vector is not None:
                    self._query_cache.move_to_end(text)
        missing = [text for text, vector in found.items() if vector is None]
        if missing:
            vectors = self.embedder.embed_queries(missing)
            with self._cache_lock:
                for text, vector in zip(missing, vectors, strict=True):
                    vector.setflags(write=False)
                    found[text] = self._query_cache[text] = vector
                while len(self._query_cache) > QUERY_CACHE_SIZE:
                    self._query_cache.popitem(last=False)
        return [found[text] for text in texts]  # type: ignore[misc]

    def _mask(self, snapshot: _Snapshot, server: str | None, servers: Collection[str] | None) -> np.ndarray | None:
        allowed: set[int] | None = None
        if servers is not None:
            allowed = {snapshot.server_index[s] for s in servers if s in snapshot.server_index}
        if server is not None:
            if server not in snapshot.server_index:
                raise QueryError(self._unknown_server_message(snapshot, server))
            wanted = {snapshot.server_index[server]}
            allowed = wanted if allowed is None else allowed & wanted
        if allowed is None:
            return None
        return np.isin(snapshot.space.tool_servers, np.fromiter(allowed, dtype=np.int32, count=len(allowed)))

    @staticmethod
    def _unknown_server_message(snapshot: _Snapshot, server: str) -> str:
        names = sorted(set(snapshot.servers))
        close = nearest_names(server, names)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        return f"no server named {server!r} in the index.{hint} ({len(names)} servers are indexed.)"

    # -- writing -----------------------------------------------------------------------------

    def sync(
        self,
        records: Sequence[ToolRecord],
        *,
        servers: Collection[str] | None = None,
        catalog: str = "",
        catalog_digest: str = "",
        progress: Progress | None = None,
        skipped: Mapping[str, Mapping[str, str]] | None = None,
    ) -> BuildReport:
        """Make the index hold ``records``: embed new/changed ones, delete the ones that disappeared.

        With ``servers``, only tools of those servers are deleted when absent from ``records``
        (a partial crawl must not drop everything else). The model is loaded only when
        something needs embedding.

        ``skipped``: per server, the tools its crawl or listing left out for a broken definition
        (name -> what is wrong), kept so ``execute`` of one can say why. They replace what the index
        held for those servers (for every server when ``servers`` is None); None keeps what it held.
        A tool indexed now is no longer skipped.
        """
        started = time.perf_counter()
        wanted: dict[str, ToolRecord] = {}
        for record in records:
            if record.id in wanted:
                raise CatalogError(f"tool {record.id!r} appears twice in the catalog; tool names must be unique per server.")
            wanted[record.id] = record
        with settings_write_lock(self.settings), self._lock:
            report = BuildReport(model=self.model_name, location=self.location)
            state = self._store.read_state()
            if state is not None and (state.model != self.model_name or state.document_version != DOCUMENT_VERSION):
                logger.info("index was built with %s (documents v%s); re-embedding everything", state.model, state.document_version)
                self._store.reset()
                state = None
                report.full_rebuild = True
            stored = self._store.stored_tools()
            scope = set(servers) if servers is not None else None
            to_embed = [r for r in wanted.values() if (old := stored.get(r.id)) is None or old.content_hash != r.content_hash]
            to_delete = [s.id for s in stored.values() if s.id not in wanted and (scope is None or s.server in scope)]
            report.added = sum(1 for r in to_embed if r.id not in stored)
            report.updated = len(to_embed) - report.added
            report.removed = len(to_delete)
            report.unchanged = len(wanted) - len(to_embed)

            server_docs, remaining_servers = self._server_documents(wanted, stored, set(to_delete))
            stored_servers = self._store.stored_servers()
            servers_to_embed = {n: d for n, d in server_docs.items() if stored_servers.get(n) != _hash(d)}
            servers_to_delete = sorted(n for n in stored_servers if n not in remaining_servers)
            report.servers_embedded = len(servers_to_embed)
            report.servers_removed = len(servers_to_delete)

            total = len(to_embed) + len(servers_to_embed)
            done = 0

            def advance(count: int) -> None:
                nonlocal done
                done += count
                if progress is not None:
                    progress(done, total)

            if progress is not None:
                progress(0, total)
            if to_embed:
                documents = [tool_document(r) for r in to_embed]
                vectors = self.embedder.embed(documents, progress=advance)
                self._store.upsert_tools(to_embed, documents, vectors)
            self._store.delete_tools(to_delete)
            if servers_to_embed:
                names = sorted(servers_to_embed)
                documents = [servers_to_embed[n] for n in names]
                vectors = self.embedder.embed(documents, progress=advance)
                self._store.upsert_servers(names, documents, [_hash(d) for d in documents], vectors)
            self._store.delete_servers(servers_to_delete)

            report.total = len(stored) + report.added - report.removed
            if state is not None and not catalog:
                # A partial sync (the copilot indexing new servers) keeps the last build's catalog.
                catalog, catalog_digest = state.catalog, state.catalog_digest
            indexed = (stored.keys() - set(to_delete)) | wanted.keys()
            left_out = _skipped_after(state.skipped_tools if state is not None else {}, skipped, scope, indexed)
            # Other processes reload on a new build id: a change of the skipped tools alone needs one too.
            new_build = report.changed or state is None or left_out != state.skipped_tools
            if new_build or state.catalog != catalog or state.catalog_digest != catalog_digest:
                new_state = IndexState(
                    model=self.model_name,
                    document_version=DOCUMENT_VERSION,
                    catalog=catalog,
                    catalog_digest=catalog_digest,
                    built_at=_now(),
                    build_id=_build_id() if new_build else state.build_id,
                    tool_count=report.total,
                    skipped_tools=left_out,
                )
                self._store.write_state(new_state)
                self._replace_snapshot(new_state)
            elif self._snapshot is not None and self._snapshot.state.build_id != state.build_id:
                # Another process wrote these very records first: nothing to write, but this
                # process's searches still read the build before theirs (for up to
                # STALE_CHECK_SECONDS route said the server just indexed was not in the index).
                self._replace_snapshot(state)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    @staticmethod
    def _server_documents(
        wanted: dict[str, ToolRecord], stored: dict[str, StoredTool], deleted: set[str]
    ) -> tuple[dict[str, str], set[str]]:
        """(documents of the servers this sync describes, every server that still has tools)."""
        tool_names: dict[str, set[str]] = {}
        for item in stored.values():
            if item.id not in deleted:
                tool_names.setdefault(item.server, set()).add(item.tool)
        describing: dict[str, ToolRecord] = {}
        for record in wanted.values():
            tool_names.setdefault(record.server, set()).add(record.name)
            describing.setdefault(record.server, record)
        documents = {
            name: server_document(name, record.server_description, record.category, sorted(tool_names[name]))
            for name, record in describing.items()
        }
        return documents, set(tool_names)
