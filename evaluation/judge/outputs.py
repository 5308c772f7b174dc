"""The files the judge writes into its output directory (``--out``), and how a directory the judge
has written into is recognised.

A run judged once into its default ``judge/`` and then again into a new ``--out`` (another judge,
a jury, ``--prompt evidence``) holds the first judge's ``verdicts.jsonl`` under the logs the
second one searches: read as a log, it was reported as an input problem ("not a trajectory log")
in the second report. The judge's own outputs are recognised by the judge's markers in their
directory, not by its name, so a real log in a directory named ``judge`` is still read, and so is
a log that shares a directory with the judge's outputs.

No imports from the rest of the package: ``evaluation.trajectories`` reads these names too.
"""

from __future__ import annotations

from pathlib import Path

VERDICTS_FILE = "verdicts.jsonl"
#: Verdict lines an interrupted write cut short, set aside by the next run (``VerdictLog``).
DAMAGED_VERDICTS_FILE = "verdicts.damaged.jsonl"
REPORT_FILE = "report.json"
TASKS_CSV = "tasks.csv"
CATEGORIES_CSV = "categories.csv"
TOOLS_CSV = "tools.csv"
#: The output lock (``evaluation.judge.lock``): created by every judge run and left in place.
LOCK_FILE = ".judge.lock"

#: Files the judge writes into its output directory (``plots/`` holds only images).
JUDGE_OUTPUT_FILES = frozenset(
    {VERDICTS_FILE, DAMAGED_VERDICTS_FILE, REPORT_FILE, "report.md", "report.html", TASKS_CSV, CATEGORIES_CSV, TOOLS_CSV, LOCK_FILE}
)


def is_judge_output_dir(directory: Path) -> bool:
    """Whether the judge has written into ``directory``: it holds the judge's lock file (every
    judge run creates it and leaves it) or, written before there was a lock, both
    ``verdicts.jsonl`` and ``report.json``. A ``verdicts.jsonl`` alone is some other tool's file."""
    try:
        return (directory / LOCK_FILE).is_file() or (
            (directory / VERDICTS_FILE).is_file() and (directory / REPORT_FILE).is_file()
        )
    except OSError:
        return False


def is_judge_output(path: Path) -> bool:
    """Whether ``path`` is one of the judge's own outputs: a file of the judge's names in a
    directory the judge has written into. Anything else there (a log beside them) is not."""
    return path.name in JUDGE_OUTPUT_FILES and is_judge_output_dir(path.parent)
