"""``python -m bench taxonomy``: the error taxonomy against the hand-labelled set.

The labelled set is LiveMCPBench's published sample trajectories (read in place) plus real runs
of the built-in agent with a scripted model (``tests/fixtures/trajectories``). Printed: accuracy
of the rules with the capability check at several similarity thresholds, against the baseline of
the same rules without any check (Retrieve and Query then stay undecided), and the confusion table
at the default threshold.
"""

from __future__ import annotations

import argparse

import sys
import time
from pathlib import Path

from evaluation.taxonomy.capability import DEFAULT_THRESHOLD, IndexCapabilityCheck
from evaluation.taxonomy.labelled import load_labelled_set, sample_file
from evaluation.taxonomy.measure import measure

#: The project's labelled set (data beside the tests, read by path, not imported from tests/).
LABELLED = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "trajectories"
THRESHOLDS = (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)


def main(argv: list[str] | None = None) -> int:
    from index.cli.console import HelpFormatter  # noqa: PLC0415
    from index.models.embedding import get_embedder  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog="python -m bench taxonomy", description=(__doc__ or "").strip().split("\n\n")[0], formatter_class=HelpFormatter
    )
    parser.parse_args(argv)  # no options: --help, or an error for anything else
    cases, descriptions = load_labelled_set(LABELLED)
    if not cases:
        print(f"error: {LABELLED} labels no trajectory that is present; nothing to measure.", file=sys.stderr)
        return 2
    samples = "with" if sample_file().is_file() else "WITHOUT (not present)"
    print(f"labelled set: {len(cases)} trajectories, {samples} LiveMCPBench's sample trajectories")
    baseline = measure(cases, None)
    print(f"baseline (rules, no capability check): {baseline.correct}/{baseline.n} = {baseline.accuracy:.0%}")
    embedder = get_embedder()
    started = time.perf_counter()
    results = {}
    check = IndexCapabilityCheck(None, descriptions, embedder)  # one instance: embeddings are computed once
    for threshold in THRESHOLDS:
        check.threshold = threshold
        results[threshold] = measure(cases, check)
        marker = "  <- default" if threshold == DEFAULT_THRESHOLD else ""
        r = results[threshold]
        ratio = f"{r.accuracy / baseline.accuracy:.2f}x baseline" if baseline.accuracy else "the baseline got none right"
        print(f"threshold {threshold:.2f}: {r.correct}/{r.n} = {r.accuracy:.0%} ({ratio}){marker}")
    chosen = results[DEFAULT_THRESHOLD]
    print("confusion at the default (labelled -> classified):")
    for key, count in chosen.confusion.items():
        print(f"  {key}: {count}")
    for mistake in chosen.mistakes:
        print(f"  mistake: {mistake}")
    print(f"classified {len(cases) * len(THRESHOLDS)} trajectories in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
