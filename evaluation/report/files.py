"""Writing a report's files (``report.json``, ``report.md`` + ``plots/``, ``report.html``,
``tasks.csv``, ``categories.csv``, ``tools.csv``) and reading ``report.json`` back (``compare``, ``leaderboard``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from evaluation.json_files import read_json_model
from evaluation.judge.outputs import REPORT_FILE
from evaluation.report.export import write_csv_tables
from evaluation.report.models import Report
from evaluation.report.plots import render_plots
from evaluation.report.render import report_html, report_markdown
from evaluation.judge.verdict_log import VerdictRecord
from evaluation.trajectories import Trajectory
from index.storage.atomic import write_atomic

FORMATS = ("json", "md", "html", "csv")


def write_reports(
    report: Report,
    out_dir: str | Path,
    formats: Sequence[str] = FORMATS,
    trajectories: Mapping[str, Trajectory] | None = None,
    verdicts: Mapping[str, VerdictRecord] | None = None,
) -> list[Path]:
    """``report.json``, ``report.md`` (+ ``plots/``), ``report.html`` and the CSV tables
    (``tasks.csv``, ``categories.csv``, ``tools.csv``: :mod:`evaluation.report.export`), as ``formats`` says;
    with ``trajectories`` the HTML page also holds every task's trajectory (the viewer), linked
    from the task table."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if "json" in formats:
        path = out_dir / REPORT_FILE
        write_atomic(path, json.dumps(report.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n")
        written.append(path)
    if "md" in formats or "html" in formats:
        plots = render_plots(report)
        plot_files: dict[str, str] = {}
        if plots and "md" in formats:
            (out_dir / "plots").mkdir(exist_ok=True)
            for name, png in plots.items():
                write_atomic(out_dir / "plots" / f"{name}.png", png)
                plot_files[name] = f"plots/{name}.png"
        if "md" in formats:
            path = out_dir / "report.md"
            write_atomic(path, report_markdown(report, plot_files))
            written.append(path)
        if "html" in formats:
            path = out_dir / "report.html"
            write_atomic(path, report_html(report, plots, trajectories, verdicts))
            written.append(path)
    if "csv" in formats:
        written += write_csv_tables(report, out_dir)
    return written


def report_file(directory: str | Path) -> Path:
    """The ``report.json`` of a judged run: ``DIR/report.json``, ``DIR/judge/report.json`` or
    ``DIR`` itself; ``FileNotFoundError`` when there is none."""
    directory = Path(directory)
    for candidate in (directory / REPORT_FILE, directory / "judge" / REPORT_FILE, directory):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(directory)


def load_report(directory: str | Path) -> Report:
    """``report.json`` of a judged run (see :func:`report_file`); a file that cannot be read as a
    report raises :class:`JSONFileError` with the reason (syntax error with line and column, or
    the missing or wrong field)."""
    return read_json_model(report_file(directory), Report)
