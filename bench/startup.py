"""Time to the first good route after the copilot starts: lexical-first vs waiting for the model,
each with the model's traced encoder already cached and with an empty cache.

``python -m bench startup`` (or ``python -m bench.startup [--rounds 2]``)

Each round starts a fresh Python process that opens the 527-tool LiveMCPBench index the way the
copilot does (``ToolIndex.open``, then ``warm()`` in a background thread) and immediately sends
agent queries from the dev set, one after another, to ``ToolIndex.route``:

* ``lexical-first`` (shipped): ``wait_for_model=False`` -- answered by BM25 until the model is in;
* ``wait-for-model`` (before): each route blocks until the embedding model is loaded.

Each mode runs with the traced encoder a warm-up process stored in ``COPILOT_MODEL_CACHE`` (the usual
start) and with an empty cache directory (a first start after an install or upgrade, which also
stores the entry): :mod:`index.models.compiled`. Lexical-first also runs without the index's read
copy, so the index is loaded through Chroma (:mod:`index.storage.read_copy`).

Reported per mode: time to the first answer, to the first answer with a relevant tool in its top
3 ("first good route"), to the first hybrid answer, and hit@3 of the answers given in the first
10 s. All four run in the same invocation, alternating, so machine load hits them alike.

First, without any data: the time from starting a stdio copilot (no servers) to its answer to
``initialize``, what a host waits for before it can list tools, against a bare MCP SDK server of
one tool started the same way (the baseline: importing the SDK alone takes most of it).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.args import existing_file, positive_int
from bench.retrieval.sets import agent_step_set
from index.cli.console import HelpFormatter
from index.errors import CopilotError
from index.catalog.livemcpbench import load_livemcpbench
from index.settings import PROJECT_DIR, CopilotSettings, livemcpbench_dir
from index.storage.read_copy import copy_path

#: A bare MCP SDK server of one tool over stdio: the handshake's baseline.
BARE_SERVER = """
from mcp.server.mcpserver import MCPServer

app = MCPServer("bare")


@app.tool()
def echo(text: str) -> str:
    return text


app.run()
"""
_INITIALIZE = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}) + "\n"  # fmt: skip
#: Seconds a server gets to answer ``initialize`` before the bench gives up on it.
HANDSHAKE_TIMEOUT = 120.0

DEFAULT_TOOLS = livemcpbench_dir() / "tools" / "LiveMCPTool" / "tools.json"
#: The lexical-first start without the index's read copy (:mod:`index.storage.read_copy`): through Chroma.
NO_READ_COPY = "no read copy"
_PROBE = r"""
import json, sys, threading, time
started = time.perf_counter()
from index.settings import CopilotSettings
from index.search.tool_index import ToolIndex
home, wait, queries = sys.argv[1], sys.argv[2] == "wait", json.loads(sys.stdin.read())
index = ToolIndex.open(CopilotSettings(home=home))
threading.Thread(target=index.warm, daemon=True).start()
out = []
deadline = started + 120
# The queries again, paced, once all were answered before the model was in: the run stopped there,
# and "first hybrid" read "-" for lexical-first (204 lexical answers took 1.3 s).
for number in range(10**6):
    if time.perf_counter() > deadline:
        break
    if number >= len(queries):
        time.sleep(0.1)
    query = queries[number % len(queries)]
    result = index.route(query["text"], top_k=3, wait_for_model=wait)
    out.append({"t": time.perf_counter() - started, "mode": result.mode, "top": [h.tool for h in result.hits],
                "relevant": query["relevant"]})
    if result.mode == "hybrid" and len(out) > 3:
        break
print(json.dumps(out))
"""


def probe(home: Path, wait: bool, queries: list[dict], model_cache: Path) -> list[dict]:
    env = {**os.environ, "COPILOT_MODEL_CACHE": str(model_cache)}
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, str(home), "wait" if wait else "lexical"],
        input=json.dumps(queries), capture_output=True, text=True, timeout=600, cwd=PROJECT_DIR, env=env,
    )
    if result.returncode != 0:
        raise CopilotError(f"start-up probe failed: {result.stderr.strip()[-500:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def summarize(answers: list[dict]) -> dict[str, float | None]:
    def first(predicate) -> float | None:  # noqa: ANN001
        return next((a["t"] for a in answers if predicate(a)), None)

    early = [a for a in answers if a["t"] <= 10.0]
    return {
        "first_answer_s": first(lambda a: True),
        "first_good_s": first(lambda a: set(a["top"]) & set(a["relevant"])),
        "first_hybrid_s": first(lambda a: a["mode"] == "hybrid"),
        "answers_in_10s": len(early),
        "hit3_in_10s": (sum(bool(set(a["top"]) & set(a["relevant"])) for a in early) / len(early)) if early else None,
    }


def span(values: Sequence[float], fmt: str = "{:.1f} s") -> str:
    """The range of ``values`` over rounds as one cell: ``2.7-3.2 s``, ``1.0 s`` when they agree, ``-`` for none."""
    if not values:
        return "-"
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low.partition(' ')[0]}-{high}"


def handshake_seconds(argv: Sequence[str], env: dict[str, str], cwd: Path, timeout: float = HANDSHAKE_TIMEOUT) -> float:
    """Seconds from starting ``argv`` to its answer to ``initialize`` on stdout (then it is stopped:
    its stdin closed, killed after 30 s, or at once when it did not answer)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    assert process.stdin is not None and process.stdout is not None
    answered = False
    try:
        process.stdin.write(_INITIALIZE.encode())
        process.stdin.flush()
        with selectors.DefaultSelector() as waiting:
            waiting.register(process.stdout, selectors.EVENT_READ)
            if not waiting.select(timeout):
                raise CopilotError(f"{' '.join(argv)} did not answer initialize within {timeout:g} s")
        line = process.stdout.readline()
        elapsed = time.perf_counter() - started
        if not line:
            raise CopilotError(f"{' '.join(argv)} exited without answering initialize")
        if b'"result"' not in line:
            raise CopilotError(f"{' '.join(argv)} answered initialize with {line[:200]!r}")
        answered = True
        return elapsed
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=30 if answered else 0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        process.stdout.close()


def handshakes(rounds: int) -> tuple[list[float], list[float]]:
    """Seconds to ``initialize`` of a fresh copilot and of a bare SDK server, ``rounds`` each, alternating."""
    with tempfile.TemporaryDirectory(prefix="bench-handshake-") as tmp:
        root = Path(tmp)
        (root / "bare_server.py").write_text(BARE_SERVER, encoding="utf-8")
        (root / "servers.json").write_text('{"mcpServers": {}}', encoding="utf-8")
        env = {key: value for key, value in os.environ.items() if not key.startswith("COPILOT_")}
        env.update(COPILOT_HOME=str(root / "home"), COPILOT_SERVERS=str(root / "servers.json"))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_DIR), env.get("PYTHONPATH")]))
        copilot: list[float] = []
        bare: list[float] = []
        for number in range(rounds):
            print(f"handshake round {number + 1}/{rounds} ...", file=sys.stderr, flush=True)
            copilot.append(handshake_seconds([sys.executable, "-m", "server"], env, root))
            bare.append(handshake_seconds([sys.executable, str(root / "bare_server.py")], env, root))
    return copilot, bare


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=" ".join(__doc__.split("\n\n")[0].split()), formatter_class=HelpFormatter)
    parser.add_argument("--tools-json", type=existing_file, default=DEFAULT_TOOLS)
    parser.add_argument("--rounds", type=positive_int, default=2)
    args = parser.parse_args(argv)
    try:
        copilot, bare = handshakes(args.rounds)
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"time to initialize: the copilot {span(copilot, '{:.2f} s')} vs a bare SDK server {span(bare, '{:.2f} s')} "
          f"({statistics.median(copilot) / statistics.median(bare):.2f}x, medians of {args.rounds} fresh processes each)")
    if not args.tools_json.exists():
        print(f"skipped: {args.tools_json} not found (LiveMCPBench data).", file=sys.stderr)
        return 0
    try:
        from index.search.tool_index import ToolIndex

        catalog = load_livemcpbench(args.tools_json)
        known = {t.name for t in catalog.tools}
        steps = [q for q in agent_step_set(known).queries if q.form == "assistant"]
        queries = [{"text": q.text, "relevant": sorted(q.relevant)} for q in steps]
        with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
            home = Path(tmp)
            print("building the index once ...", file=sys.stderr, flush=True)
            ToolIndex.open(CopilotSettings(home=home)).sync(catalog.tools)
            cached = home / "model-cache"
            probe(home, True, queries[:1], cached)  # stores the traced encoder
            results: dict[tuple[str, str], list[dict]] = {
                (mode, setup): []
                for mode, setup in (
                    ("lexical-first", "cached"), ("lexical-first", NO_READ_COPY),
                    ("wait-for-model", "cached"), ("wait-for-model", "empty cache"),
                )
            }
            for number in range(args.rounds):
                for mode, setup in results:
                    print(f"round {number + 1}/{args.rounds}: {mode}, {setup} ...", file=sys.stderr, flush=True)
                    directory = cached if setup != "empty cache" else Path(tempfile.mkdtemp(prefix="empty-", dir=home))
                    if setup == NO_READ_COPY:
                        copy_path(CopilotSettings(home=home)).unlink(missing_ok=True)  # the probe reads Chroma (and keeps a copy)
                    results[mode, setup].append(summarize(probe(home, mode == "wait-for-model", queries, directory)))
        print(f"{'mode':<16}{'setup':<15}{'first answer':>14}{'first good':>12}{'first hybrid':>14}{'answers <=10s':>15}{'hit@3 <=10s':>13}")
        for (mode, cache), rounds in results.items():
            def cell(key: str, fmt: str = "{:.1f} s") -> str:
                return span([r[key] for r in rounds if r[key] is not None], fmt)

            print(
                f"{mode:<16}{cache:<15}{cell('first_answer_s'):>14}{cell('first_good_s'):>12}{cell('first_hybrid_s'):>14}"
                f"{cell('answers_in_10s', '{:.0f}'):>15}{cell('hit3_in_10s', '{:.2f}'):>13}"
            )

        def median(mode: str, cache: str, key: str) -> float:
            return statistics.median(r[key] for r in results[mode, cache] if r[key] is not None)

        copied = median("lexical-first", "cached", "first_answer_s")
        through_chroma = median("lexical-first", NO_READ_COPY, "first_answer_s")
        print(f"time to first answer: from the read copy {copied:.1f} s vs through Chroma {through_chroma:.1f} s "
              f"({copied / through_chroma:.2f}x)")
        lexical = median("lexical-first", "cached", "first_good_s")
        waiting = median("wait-for-model", "cached", "first_good_s")
        print(f"time to first good route: lexical-first {lexical:.1f} s vs waiting for the model {waiting:.1f} s ({lexical / waiting:.2f}x); "
              f"{args.rounds} fresh processes per mode, alternating; ranges over rounds")
        hybrid = median("wait-for-model", "cached", "first_hybrid_s")
        cold = median("wait-for-model", "empty cache", "first_hybrid_s")
        print(f"time to first hybrid route: cached traced encoder {hybrid:.1f} s vs empty cache {cold:.1f} s ({hybrid / cold:.2f}x)")
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
