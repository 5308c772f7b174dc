"""Markdown and self-contained HTML renderings of a report (and the pieces the leaderboard and
the trajectory viewer reuse: one stylesheet, one way to draw a table)."""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Mapping, Sequence

from evaluation.report.models import Report
from evaluation.judge.verdict_log import VerdictRecord
from evaluation.trajectories import Trajectory
from evaluation.report.tables import Table, headline, lists, num, pct, rate_cells, tables

esc = html.escape

#: Columns of free text that may break anywhere (long paths); numbers and labels keep words whole.
TEXT_COLUMNS = frozenset({"question", "task", "servers", "evidence", "error"})
MAX_LISTED = 200

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{margin-bottom:.2rem}h2{margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.cards{display:flex;gap:1rem;flex-wrap:wrap;margin:1rem 0}.card{background:#f5f7fa;border-radius:8px;padding:.8rem 1.1rem;min-width:150px}
.card .v{font-size:1.6rem;font-weight:600}.card .k{color:#555;font-size:.85rem}
table{border-collapse:collapse;width:100%;font-size:.85rem;margin:.5rem 0}th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top;overflow-wrap:break-word}
.scroll{overflow-x:auto}td.text{overflow-wrap:anywhere;min-width:6rem}
th{background:#f0f2f5}tr:nth-child(even) td{background:#fafbfc}.note{color:#555;font-size:.85rem}
.success{color:#1a7f37;font-weight:600}.failure{color:#b42318}.abstain{color:#9a6700}.not_judged,.no_trajectory{color:#777}
.plots{display:flex;flex-wrap:wrap;gap:1rem}.plots img{max-width:100%;border:1px solid #eee;border-radius:6px}
ul{font-size:.85rem}
"""


def markdown_text(text: str) -> str:
    """``text`` as one line of Markdown that stays text: every line break a space (``\\r``,
    ``\\u2028`` … too), ``&``, ``<`` and ``>`` as entities, and ``[``/``]`` escaped. Agents,
    servers, tasks and judges write what lands here: a name holding ``\\n# heading`` or
    ``<script>`` added its own lines and raw HTML to the report, and ``![x](https://…)`` an image a
    viewer fetched from anywhere (a link anyone could word)."""
    one_line = " ".join(text.splitlines()).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    return one_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markdown_cell(text: str) -> str:
    """``text`` as one Markdown table cell: :func:`markdown_text` with ``|`` escaped (a line break
    would also end the row)."""
    return markdown_text(text).replace("|", "\\|")


def markdown_row(cells: list[str]) -> str:
    return "| " + " | ".join(markdown_cell(cell) for cell in cells) + " |"


def markdown_table(table: Table) -> list[str]:
    out = [f"## {table.title}", ""]
    if table.note:
        out += [table.note, ""]
    if table.rows:
        out.append("| " + " | ".join(table.header) + " |")
        out.append("|" + "---|" * len(table.header))
        for row in table.rows:
            out.append(markdown_row(row))
        out.append("")
    return out


def html_table(table: Table, links: Mapping[str, str] | None = None) -> str:
    """``links`` maps a ``task`` cell's text to an anchor (the trajectory viewer's section)."""
    parts = [f"<h2>{esc(table.title)}</h2>"]
    if table.note:
        parts.append(f"<p class='note'>{esc(table.note)}</p>")
    if not table.rows:
        return "\n".join(parts)
    header = table.header
    parts.append("<div class='scroll'><table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>")
    verdict_column = header.index("verdict") if "verdict" in header else -1
    task_column = header.index("task") if "task" in header else -1
    text_columns = {index for index, name in enumerate(header) if name in TEXT_COLUMNS}
    for row in table.rows:
        cells = []
        for index, cell in enumerate(row):
            text = esc(cell.replace("**", ""))
            if index == task_column and links and cell in links:
                text = f"<a href='#{esc(links[cell])}'>{text}</a>"
            if index == verdict_column:
                css = f" class='{esc(cell)}'"
            elif index in text_columns:
                css = " class='text'"
            else:
                css = ""
            cells.append(f"<td{css}>{text}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table></div>")
    return "\n".join(parts)


def html_page(title: str, body: list[str], extra_css: str = "", script: str = "") -> str:
    """One self-contained page: inline CSS (and script), no external resource.

    Its Content-Security-Policy allows nothing but that: its own script (by hash), inline style and
    ``data:`` images. Every text on the page is escaped already; should one ever not be, the
    browser still runs no script and loads nothing from elsewhere (the page shows what agents,
    servers and judges wrote)."""
    scripts = f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'" if script else "'none'"
    policy = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src {scripts}; base-uri 'none'; form-action 'none'"
    head = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{policy}\">",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>{esc(title)}</title><style>{CSS}{extra_css}</style></head><body>",
    ]
    tail = [f"<script>{script}</script>"] if script else []
    return "\n".join([*head, *body, *tail, "</body></html>"])


def png_img(name: str, png: bytes) -> str:
    data = base64.b64encode(png).decode()
    return f"<img alt='{esc(name)}' src='data:image/png;base64,{data}'>"


def report_markdown(report: Report, plot_files: Mapping[str, str]) -> str:
    out = ["# LiveMCPEval report", ""]
    out += [f"- {markdown_text(line)}" for line in headline(report)]
    out.append("")
    for name, file in plot_files.items():
        out.append(f"![{name}]({file})")
    if plot_files:
        out.append("")
    for table in tables(report):
        out += markdown_table(table)
    for title, items in lists(report):
        out += [f"## {title}", ""] + [f"- {markdown_text(item)}" for item in _listed(items)] + [""]
    return "\n".join(out)


def _listed(items: Sequence[str]) -> list[str]:
    """The first :data:`MAX_LISTED` items, and a last one saying how many more report.json lists."""
    if len(items) <= MAX_LISTED:
        return list(items)
    return [*items[:MAX_LISTED], f"… and {len(items) - MAX_LISTED:,} more (every one is in report.json)"]


def _cards(report: Report) -> str:
    rate, ci95 = rate_cells(report.success_rate, report.ci95)
    cards = [
        ("success rate", rate),
        ("95% CI", ci95 or "n/a"),
        ("judged", f"{report.n_judged}/{report.n_tasks}"),
        ("succeeded", f"{report.success}/{report.n_with_outcome}"),
        ("abstain", str(len(report.abstains))),
        ("no trajectory", str(len(report.missing_trajectories))),
    ]
    if report.human is not None:
        cards += [("human agreement", pct(report.human_agreement)), ("Cohen's kappa", num(report.cohen_kappa))]
    return (
        "<div class='cards'>"
        + "".join(f"<div class='card'><div class='v'>{esc(v)}</div><div class='k'>{esc(k)}</div></div>" for k, v in cards)
        + "</div>"
    )


def report_html(
    report: Report,
    plots: Mapping[str, bytes],
    trajectories: Mapping[str, Trajectory] | None = None,
    verdicts: Mapping[str, VerdictRecord] | None = None,
) -> str:
    """The page; with ``trajectories`` each task of the task table links to its trajectory section."""
    from evaluation.report.viewer import VIEWER_CSS, VIEWER_SCRIPT, anchor, viewer_sections  # noqa: PLC0415

    body = [
        "<h1>LiveMCPEval report</h1>",
        f"<p class='note'>generated {esc(report.generated)} &middot; judge {esc(', '.join(report.judge.models))} "
        f"&middot; prompt {esc(report.judge.prompt)}</p>",
        _cards(report),
        "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in headline(report)) + "</ul>",
    ]
    if plots:
        body.append("<div class='plots'>" + "".join(png_img(name, png) for name, png in plots.items()) + "</div>")
    links = {row.task_id: anchor(row.task_id) for row in report.tasks} if trajectories is not None else None
    body += [html_table(table, links) for table in tables(report)]
    for title, items in lists(report):
        body.append(f"<h2>{esc(title)}</h2><ul>" + "".join(f"<li>{esc(item)}</li>" for item in _listed(items)) + "</ul>")
    if trajectories is None:
        return html_page("LiveMCPEval report", body)
    body += viewer_sections(report, trajectories, verdicts or {})
    return html_page("LiveMCPEval report", body, extra_css=VIEWER_CSS, script=VIEWER_SCRIPT)
