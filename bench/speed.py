"""Search-index speed: route latency, build times, and a synthetic 100,000-tool catalog.

``python -m bench speed`` (or ``python -m bench.speed [--scale 100000] [--rounds 3]``;
``--only build [--repeat 5]`` times only the builds, the no-change one ``--repeat`` times)

1. Route latency on the 527-tool LiveMCPBench index, warm, over the 95 task questions:
   the hybrid ``ToolIndex.search`` against baselines measured in the same run and interleaved
   query by query -- plain dense brute force (embed + one matrix product), Chroma's own HNSW
   query, the same hybrid with the model in float32 (``COPILOT_EMBEDDING_PRECISION``; the
   shipped model is int8, see :mod:`index.models.quantized`), and the same hybrid with its
   forward pass on torch's own number of threads and on one thread instead of the cores left free
   (:mod:`index.models.torch_threads`); those three again while another process keeps one core busy.
2. Build time of that index from the snapshot, as a user runs it (``python -m index build`` in a
   fresh process): cold into an empty store (and cold in float32, the baseline), then again with
   nothing changed (answered from the build manifest), then once more without the manifest
   (every stored tool compared).
3. With ``--scale N``: N synthetic tools (real tool texts with varied names and extra words,
   vectors = the real tool's vector plus noise) written straight into a Chroma store, then
   load time, memory (RSS) and route latency -- again against dense brute force and Chroma --
   and what the input links cost when a route first needs a server's, against finding them all
   at load.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import index.search.tool_index as tool_index_module
from bench.args import existing_file, positive_int
from bench.retrieval import route_queries
from bench.retrieval.sets import read_annotations
from index.cli.console import HelpFormatter
from index.errors import CopilotError
from index.models import torch_threads
from index.catalog.livemcpbench import load_livemcpbench
from index.catalog.records import Catalog, ToolRecord, load_catalog
from index.settings import DEFAULT_CATALOG, PROJECT_DIR, CopilotSettings, livemcpbench_dir
from index.storage.store import ChromaStore, IndexState
from index.search.providers import ServerLinks, input_providers, provider_positions
from index.search.text import DOCUMENT_VERSION, server_document, tool_document
from index.search.tool_index import ToolIndex

SHARED = livemcpbench_dir()
DEFAULT_TOOLS = SHARED / "tools" / "LiveMCPTool" / "tools.json"
DEFAULT_ANNOTATIONS = SHARED / "annotated_data" / "all_annotations.json"
DEFAULT_TRAJECTORIES = SHARED / "sample_trajectories.json"
FALLBACK_QUERIES = [
    "convert a word document to pdf", "weather forecast for tomorrow", "search the web", "read a file",
    "generate a bar chart", "current time in Tokyo", "stock price history", "find papers on arXiv",
    "<tool_assistant>\nserver: maps\ntool: driving directions\n</tool_assistant>", "必应搜索",
]


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) * 1000.0


def row(label: str, value: str, baseline: str = "", ratio: str = "", target: str = "") -> str:
    return f"{label:<44} {value:>12} {baseline:>22} {ratio:>9} {target:>12}"


def header() -> str:
    return row("measure", "value", "baseline", "ratio", "target") + "\n" + "-" * 103


def load_queries(path: Path) -> list[str]:
    """The task questions of a LiveMCPBench annotation list (:data:`FALLBACK_QUERIES` without one).

    A file that is not such a list is a :class:`ConfigError` naming the file and the entry."""
    if not path.exists():
        return FALLBACK_QUERIES
    return [task["Question"][:2000] for task in read_annotations(path)]


def data_note(annotations: Path, tools_json: Path, trajectories: Path) -> str:
    """What this run measures in place of LiveMCPBench's data it did not find ("" when all is there)."""
    missing = [path for path in (annotations, tools_json, trajectories) if not path.exists()]
    if not missing:
        return ""
    instead = []
    if not annotations.exists():
        instead.append(f"{len(FALLBACK_QUERIES)} built-in questions for the task questions")
    if not tools_json.exists():
        instead.append("the bundled catalog for LiveMCPBench's 527 tools")
    if not trajectories.exists():
        instead.append("no agent-query rows")
    return (
        f"LiveMCPBench data not found ({', '.join(str(path) for path in missing)}): measuring "
        + "; ".join(instead) + " (set COPILOT_LIVEMCPBENCH_DIR to use it)"
    )


def load_agent_queries(path: Path) -> list[str]:
    """The ``route`` queries the paper's agent wrote (short ``<tool_assistant>`` blocks)."""
    return [query for _, query in route_queries(path)]


def snapshot_catalog(tools_json: Path, workdir: Path) -> Path:
    """The 527-tool LiveMCPBench catalog (or the project's own catalog when the data is absent)."""
    if tools_json.exists():
        return load_livemcpbench(tools_json).save(workdir / "livemcpbench-catalog.json")
    return DEFAULT_CATALOG


def time_build(catalog: Path, home: Path, precision: str | None = None) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPILOT_")}
    env["COPILOT_HOME"] = str(home)
    if precision:
        env["COPILOT_EMBEDDING_PRECISION"] = precision
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "index", "build", "--catalog", str(catalog)],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=1800,
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise CopilotError(f"python -m index build failed: {result.stderr.strip()[-500:]}")
    summary = next((line for line in result.stdout.splitlines() if line.startswith("tools:")), "")
    return elapsed, summary


def build_rows(catalog: Path, home: Path, tools: int, repeat: int, float32_home: Path) -> list[str]:
    """A cold build into ``home`` (and one in float32 into ``float32_home``, the baseline), then
    ``repeat`` builds with nothing changed, each a fresh process."""
    cold, cold_summary = time_build(catalog, home)
    cold_float32, _ = time_build(catalog, float32_home, "float32")
    again = [time_build(catalog, home) for _ in range(repeat)]
    print(f"cold build: {cold_summary}\nno-change build: {again[-1][1]}", file=sys.stderr)
    seconds = sorted(elapsed for elapsed, _ in again)
    median = statistics.median(seconds)
    value = f"{median:.2f} s" if repeat == 1 else f"{median:.2f} s ({seconds[0]:.2f}-{seconds[-1]:.2f})"
    label = "build, nothing changed (new process)" + (f", median of {repeat}" if repeat > 1 else "")
    lines = [
        row(f"build {tools} tools, cold (new process)", f"{cold:.1f} s", f"float32 {cold_float32:.1f} s", f"{cold / cold_float32:.2f}x", "<= 30 s"),
        row(label, value, f"cold {cold:.1f} s", f"{median / cold:.3f}x", "<= 2 s"),
    ]
    manifest = home / "index" / "build-manifest.json"
    if manifest.exists():
        # Without the last build's manifest the build compares every stored tool (what a changed
        # servers file or a copilot's partial re-index also cause).
        manifest.unlink()
        compared, _ = time_build(catalog, home)
        lines.append(row("build, nothing changed, store compared in full", f"{compared:.2f} s", f"cold {cold:.1f} s", f"{compared / cold:.3f}x"))
    load = f"; load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return [*lines, f"(builds timed as fresh 'python -m index build' processes{load})"]


#: Baselines of the shipped thread policy, free cores (index/models/torch_threads.py): every forward
#: pass on torch's own number of threads (as before), and on one thread.
TORCH_THREADS = "hybrid, torch's own threads"
ONE_THREAD = "hybrid, one thread"
#: A process that keeps one core busy while it lasts: the copilot's children, the agent, another
#: task's copilot. It ends by itself when this benchmark is gone, killed or not, and after 10 minutes.
_BUSY_PROCESS = "import os, time\nparent, end = os.getppid(), time.monotonic() + 600\nwhile os.getppid() == parent and time.monotonic() < end: pass"


def with_thread_policy(index: ToolIndex, top_k: int, policy: torch_threads.ThreadPolicy) -> Callable[[str], object]:
    """The shipped hybrid with its forward pass under another thread policy."""

    def run(query: str) -> object:
        torch_threads.POLICY = policy
        try:
            return index.search(query, top_k=top_k)
        finally:
            torch_threads.POLICY = "free-cores"

    return run


def busy_rows(index: ToolIndex, queries: Sequence[str], rounds: int) -> list[str]:
    """Route latency while another process keeps one core busy, against the other thread policies."""
    neighbour = subprocess.Popen([sys.executable, "-c", _BUSY_PROCESS])
    try:
        timings = measure_latency(index, None, queries, rounds)
    finally:
        neighbour.kill()
        neighbour.wait(timeout=30)
    return report_latency(f"route, {index.tool_count} tools, questions, one core busy,", timings, 15)


def chroma_query(store: ChromaStore, index: ToolIndex, k: int) -> Callable[[str], object]:
    collection = store.tools()
    assert collection is not None

    def run(query: str) -> object:
        vector = index.embedder.embed_queries([query])
        return collection.query(query_embeddings=vector, n_results=k, include=["metadatas"])

    return run


def measure_latency(
    index: ToolIndex,
    store: ChromaStore | None,
    queries: Sequence[str],
    rounds: int,
    top_k: int = 5,
    float32: ToolIndex | None = None,
) -> dict[str, list[float]]:
    """Interleaved per query, so machine noise hits every method alike (without a ``store``: the
    hybrid against the same under the other thread policies only)."""
    methods: dict[str, Callable[[str], object]] = {"hybrid": lambda q: index.search(q, top_k=top_k)}
    if store is not None:
        methods["dense brute force"] = lambda q: index.search(q, top_k=top_k, method="dense")
        methods["chroma HNSW"] = chroma_query(store, index, top_k)
    methods[TORCH_THREADS] = with_thread_policy(index, top_k, "own")
    methods[ONE_THREAD] = with_thread_policy(index, top_k, "one")
    if float32 is not None:
        methods["hybrid float32"] = lambda q: float32.search(q, top_k=top_k)
    for query in queries[:5]:  # warm every path once
        for run in methods.values():
            run(query)
    timings: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(rounds):
        for query in queries:
            for name, run in methods.items():
                started = time.perf_counter()
                run(query)
                timings[name].append(time.perf_counter() - started)
    return timings


def report_latency(title: str, timings: dict[str, list[float]], target_ms: float) -> list[str]:
    hybrid = timings["hybrid"]
    lines = []
    for stat, q in (("p50", 50), ("p95", 95)):
        value = percentile(hybrid, q)
        for baseline in ("dense brute force", "chroma HNSW", TORCH_THREADS, ONE_THREAD, "hybrid float32"):
            if baseline not in timings:
                continue
            base = percentile(timings[baseline], q)
            lines.append(
                row(
                    f"{title} hybrid {stat}",
                    f"{value:.1f} ms",
                    f"{baseline} {base:.1f} ms",
                    f"{value / base:.2f}x",
                    f"<= {target_ms:.0f} ms" if stat == "p50" else "",
                )
            )
    return lines


def synthetic_records(base: list[ToolRecord], count: int, seed: int = 7) -> list[ToolRecord]:
    rng = random.Random(seed)
    vocabulary = sorted({w for r in base for w in r.description.split() if w.isalpha() and len(w) > 3})
    records = []
    per_server = 20
    for i in range(count):
        source = base[i % len(base)]
        server = f"synthetic-{i // per_server:05d}"
        extra = " ".join(rng.choice(vocabulary) for _ in range(6))
        records.append(
            source.model_copy(
                update={
                    "server": server,
                    "name": f"{source.name}_{i}",
                    "description": f"{source.description} {extra}",
                    "server_description": f"{source.server_description} (synthetic server {i // per_server})",
                }
            )
        )
    return records


def write_synthetic_index(home: Path, base_index: ToolIndex, count: int) -> float:
    """Write ``count`` synthetic tools straight into Chroma (embedding 100k texts would take an hour here)."""
    base_records = list(base_index.records().values())
    snapshot = base_index._current(required=True)  # noqa: SLF001 -- the bench reuses the base vectors
    assert snapshot is not None
    base_vectors = snapshot.space.tool_vectors
    rng = np.random.default_rng(7)
    records = synthetic_records(base_records, count)
    store = ChromaStore(CopilotSettings(home=home))
    started = time.perf_counter()
    step = 5000
    for start in range(0, count, step):
        chunk = records[start : start + step]
        vectors = base_vectors[np.arange(start, start + len(chunk)) % len(base_records)]
        vectors = vectors + rng.normal(0, 0.03, vectors.shape).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.upsert_tools(chunk, [tool_document(r) for r in chunk], vectors.astype(np.float32))
        print(f"  wrote {start + len(chunk)}/{count} synthetic tools", file=sys.stderr, flush=True)
    servers: dict[str, ToolRecord] = {}
    for record in records:
        servers.setdefault(record.server, record)
    names = sorted(servers)
    server_vectors = rng.normal(0, 1, (len(names), base_vectors.shape[1])).astype(np.float32)
    server_vectors /= np.linalg.norm(server_vectors, axis=1, keepdims=True)
    documents = [server_document(n, servers[n].server_description, servers[n].category, []) for n in names]
    store.upsert_servers(names, documents, ["synthetic"] * len(names), server_vectors)
    store.write_state(
        IndexState(model=base_index.model_name, document_version=DOCUMENT_VERSION, catalog="synthetic", build_id="synthetic", tool_count=count)
    )
    return time.perf_counter() - started


def link_rows(index: ToolIndex, routes: int = 50, depth: int = 10) -> list[str]:
    """What the input links cost: found for every tool when the index loads (as before they were
    found per server), against a route's first need of the servers of ``depth`` tools it has not
    met (random tools, a fresh set of links: the worst case, every server new)."""
    snapshot = index._current(required=True)  # noqa: SLF001 -- the links of the loaded snapshot
    assert snapshot is not None
    started = time.perf_counter()
    everything = provider_positions(snapshot.space.ids, input_providers(
        ToolRecord.model_validate_json(text) for text, kind in zip(snapshot.records_json, snapshot.kinds) if kind == "tool"
    ))
    up_front = time.perf_counter() - started
    # A fresh set of links reading records as the snapshot's own does.
    links = ServerLinks(snapshot.space.tool_servers, snapshot.kinds, snapshot._stored_tool)  # noqa: SLF001
    rng = np.random.default_rng(7)
    firsts = []
    for _ in range(routes):
        positions = rng.choice(len(snapshot.space.ids), size=min(depth, len(snapshot.space.ids)), replace=False)
        started = time.perf_counter()
        found = [links[int(p)] for p in positions]
        firsts.append(time.perf_counter() - started)
        assert found == [everything[int(p)] for p in positions]  # the same links either way
    first = statistics.median(firsts)
    return [
        row(f"input links of {len(snapshot.space.ids)} tools, found up front at load", f"{up_front:.2f} s"),
        row(
            f"input links, a route's first need ({depth} tools of servers not met yet, p50 of {routes})",
            f"{first * 1000:.1f} ms (max {max(firsts) * 1000:.1f})",
            f"{up_front:.2f} s up front",
            f"{first / up_front:.4f}x",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.speed", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=HelpFormatter)
    parser.add_argument("--tools-json", type=existing_file, default=DEFAULT_TOOLS)
    parser.add_argument("--annotations", type=existing_file, default=DEFAULT_ANNOTATIONS)
    parser.add_argument("--trajectories", type=existing_file, default=DEFAULT_TRAJECTORIES)
    parser.add_argument("--rounds", type=positive_int, default=3, help="passes over the queries (default 3)")
    parser.add_argument("--scale", type=positive_int, default=0, metavar="N", help="also measure N synthetic tools (e.g. 100000)")
    parser.add_argument("--skip-build", action="store_true", help="skip the cold/no-change build timing")
    parser.add_argument("--only", choices=["build"], help="only the builds: cold once, then nothing changed --repeat times")
    parser.add_argument("--repeat", type=positive_int, default=1, metavar="N", help="no-change builds to time (default 1; median and range shown)")
    args = parser.parse_args(argv)
    # Every query is measured embedding included: the per-index query cache would hide it.
    tool_index_module.QUERY_CACHE_SIZE = 0
    try:
        import psutil

        process = psutil.Process()
        queries = load_queries(args.annotations)
        agent_queries = load_agent_queries(args.trajectories)  # up front: a wrong file is refused before the build
        note = data_note(args.annotations, args.tools_json, args.trajectories)
        if note:
            print(f"note: {note}", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="bench-speed-") as tmp:
            workdir = Path(tmp)
            catalog_path = snapshot_catalog(args.tools_json, workdir)
            catalog: Catalog = load_catalog(catalog_path)
            home, float32_home = workdir / "home", workdir / "home-float32"
            lines = [header()]
            if not args.skip_build or args.only == "build":
                lines += build_rows(catalog_path, home, len(catalog.tools), max(1, args.repeat), float32_home)
                if args.only == "build":
                    print("\n".join(lines), flush=True)
                    return 0
            else:
                ToolIndex.open(CopilotSettings(home=home)).sync(catalog.tools)
                ToolIndex.open(CopilotSettings(home=float32_home, embedding_precision="float32")).sync(catalog.tools)
            index = ToolIndex.open(CopilotSettings(home=home))
            started = time.perf_counter()
            index.warm()
            # With --skip-build the sync above loaded the model in this process already: the row is
            # then the tools alone (it read "model + tools" at 0.1 s).
            warmed = f"{index.tool_count} tools into memory; the model was loaded by the sync" if args.skip_build else f"model + {index.tool_count} tools into memory"
            lines.append(row(f"warm-up ({warmed})", f"{time.perf_counter() - started:.1f} s"))
            float32 = ToolIndex.open(CopilotSettings(home=float32_home, embedding_precision="float32"))
            float32.warm()
            store = ChromaStore(CopilotSettings(home=home))
            timings = measure_latency(index, store, queries, args.rounds, float32=float32)
            lines += report_latency(f"route, {index.tool_count} tools, questions,", timings, 15)
            lines += busy_rows(index, queries, args.rounds)
            if agent_queries:
                agent_timings = measure_latency(index, store, agent_queries, max(args.rounds, 10), float32=float32)
                lines += report_latency(f"route, {index.tool_count} tools, agent queries,", agent_timings, 15)
            print("\n".join(lines), flush=True)

            if args.scale:
                big_home = workdir / "big"
                print(f"\nwriting {args.scale} synthetic tools into Chroma ...", file=sys.stderr, flush=True)
                write_seconds = write_synthetic_index(big_home, index, args.scale)
                rss_before = process.memory_info().rss
                big = ToolIndex.open(CopilotSettings(home=big_home))
                started = time.perf_counter()
                big.warm()
                load_seconds = time.perf_counter() - started
                rss_after = process.memory_info().rss
                big_timings = measure_latency(big, ChromaStore(CopilotSettings(home=big_home)), queries, 1)
                scale_lines = [header()]
                scale_lines.append(row(f"write {args.scale} tools to Chroma (no embedding)", f"{write_seconds:.0f} s"))
                scale_lines.append(row(f"load {big.tool_count} tools into memory", f"{load_seconds:.1f} s"))
                scale_lines.append(row("memory added by the loaded index (RSS)", f"{(rss_after - rss_before) / 2**20:.0f} MiB"))
                scale_lines.append(row("process memory (RSS) after loading", f"{rss_after / 2**20:.0f} MiB"))
                scale_lines += report_latency(f"route, {big.tool_count} tools,", big_timings, 50)
                scale_lines += link_rows(big)
                print("\n" + "\n".join(scale_lines), flush=True)
            what = "task questions" if args.annotations.exists() else "built-in questions (no LiveMCPBench annotations)"
            agents = (
                f"{len(agent_queries)} route calls of the paper agent in {args.trajectories.name}"
                if agent_queries
                else f"none ({args.trajectories} " + ("has no route calls)" if args.trajectories.exists() else "not found)")
            )
            print(
                f"\nquestions: {len(queries)} {what} (median {statistics.median(len(q) for q in queries):.0f} characters) "
                f"x {args.rounds} rounds; agent queries: {agents}; catalog: {catalog_path.name} ({len(catalog.tools)} tools); "
                "query-embedding cache off"
            )
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
