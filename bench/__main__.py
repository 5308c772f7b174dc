"""``python -m bench [NAME ...]``: run the benchmarks (all by default).

Each benchmark measures its own baseline in the same run and prints ratios against it.
Extra arguments after ``--`` go to every benchmark's ``main``.
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "retrieval": "bench.retrieval",  # route quality on every query kind: BM25 / dense / two-level / hybrids, models, CV
    "startup": "bench.startup",  # time to the first good route: lexical-first vs waiting for the model
    "speed": "bench.speed",  # route latency, build time, 100k-tool scale
    "pool": "bench.pool",  # warm pool vs direct call vs spawn-per-call
    "relay": "bench.relay",  # execute through the stdio copilot vs the host calling the child directly
    "judge": "bench.judge",  # judge concurrency speed-up and cache
    "taxonomy": "bench.taxonomy",  # error classes against the hand-labelled trajectories
    "faults": "bench.faults",  # orphans after SIGKILL/SIGHUP/double signal, fds per session, leaked secrets
    "trust": "bench.trust",  # poisoning scan: corpus detection, false positives on the real catalogs
    "exposure": "bench.exposure",  # context a host pays per COPILOT_EXPOSE mode (tools/list, route answers)
    "conformance": "bench.conformance",  # the official MCP conformance suite against the copilot as a proxy
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, extra = argv[:split], argv[split + 1 :]
    unknown = [name for name in argv if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {sorted(BENCHMARKS)}", file=sys.stderr)
        return 2
    status = 0
    for name in argv or list(BENCHMARKS):
        print(f"\n=== bench {name} ===", flush=True)
        module = importlib.import_module(BENCHMARKS[name])
        status |= int(module.main(extra) or 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
