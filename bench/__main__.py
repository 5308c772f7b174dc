"""``python -m bench [NAME ...]``: run the benchmarks (all by default).

Each benchmark measures its own baseline in the same run and prints ratios against it.
Options after the names (``python -m bench relay --baseline DIR``, or after ``--``) go to every
chosen benchmark; ``python -m bench relay --help`` shows a benchmark's own options.
"""

from __future__ import annotations

import importlib
import sys

from index.cli.console import prepare_text_io
from index.errors import CopilotError

BENCHMARKS = {
    "retrieval": "bench.retrieval",  # route quality on every query kind: BM25 / dense / two-level / hybrids, models, CV
    "startup": "bench.startup",  # time to the first good route: lexical-first vs waiting for the model
    "speed": "bench.speed",  # route latency, build time, 100k-tool scale
    "pool": "bench.pool",  # warm pool vs direct call vs spawn-per-call
    "relay": "bench.proxy.relay",  # execute through the stdio copilot vs the host calling the child directly
    "judge": "bench.judge",  # judge concurrency speed-up and cache
    "taxonomy": "bench.taxonomy",  # error classes against the hand-labelled trajectories
    "faults": "bench.faults",  # orphans after SIGKILL/SIGHUP/double signal, fds per session, leaked secrets
    "trust": "bench.trust",  # poisoning scan: corpus detection, false positives on the real catalogs
    "exposure": "bench.proxy.exposure",  # context a host pays per COPILOT_EXPOSE mode (tools/list, route answers)
    "conformance": "bench.proxy.conformance",  # the official MCP conformance suite against the copilot as a proxy
}


def main(argv: list[str] | None = None) -> int:
    prepare_text_io()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("-h", "--help"):
        # Leading names choose the benchmarks; everything from the first option (or after ``--``) is theirs.
        names = []
        while argv and not argv[0].startswith("-"):
            names.append(argv.pop(0))
        extra = argv[1:] if argv[:1] == ["--"] else argv
    else:
        print(__doc__.strip() + "\n\nbenchmarks:\n" + "\n".join(f"  {name:<12} {module}" for name, module in BENCHMARKS.items()))
        return 0
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        from index.cli.suggest import nearest_names

        for name in unknown:
            close = nearest_names(name, BENCHMARKS, limit=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            print(f"unknown benchmark {name!r}.{hint} Choose from: {', '.join(sorted(BENCHMARKS))}.", file=sys.stderr)
        return 2
    status = 0
    try:
        for name in names or list(BENCHMARKS):
            print(f"\n=== bench {name} ===", flush=True)
            module = importlib.import_module(BENCHMARKS[name])
            status |= int(module.main(extra) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except CopilotError as error:  # bad input a benchmark reads (a data file, a setting): said, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
