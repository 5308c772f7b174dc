"""Tool-poisoning scan: what published attacks hide in tool definitions, found before a model reads it.

Every text a model may read -- name, title, description, and each string and property name in
the input and output schemas -- is checked against the attack classes of the published
tool-poisoning work (Invariant Labs' ``<IMPORTANT>`` tool, tool shadowing, "line jumping",
full-schema poisoning, ASCII smuggling, rug pulls):

- ``instructions``: text that addresses the model rather than describing the tool -- override
  phrases and concealment from the user (both in English, Chinese and eight more languages),
  pseudo-system tags, role hijacks;
- ``secrets``: requests to read or pass on credentials and files unrelated to a tool
  (``~/.ssh``, ``.env``, ``mcp.json``, ``*_API_KEY`` values);
- ``shadowing``: rules about *other* tools ("when this tool is available, send_email must…"),
  names of other servers' tools in imperative sentences;
- ``hidden``: invisible Unicode (zero-width and other format characters, Unicode tag characters
  and runs of variation selectors that smuggle text, both decoded and scanned), bidi
  controls, ANSI escapes, whitespace padding that pushes text out of view, homoglyph names
  that impersonate another server's tool;
- ``exfiltration``: URLs and addresses that would carry conversation data or secrets out.

Matching runs on a normalized copy (NFKC, confusable letters folded to ASCII, invisible
characters removed), so ``ignоre`` with a Cyrillic ``о`` or ``ig\u200bnore`` still match. The
prose fields are also read together, as a model reads them, so an instruction split over
several parameter descriptions is found too, and every field is also read as words: a name split
at ``_``, ``-``, ``.`` and case changes (``ignore_all_previous_instructions``), prose with its line
breaks as spaces.
Each finding has a severity; a ``high`` finding quarantines the tool. The thresholds were
set so that no tool of the real LiveMCPTool catalogs (488 crawled here, 527 in LiveMCPBench's
snapshot) is high (``python -m bench trust``).

The package: :mod:`.findings` (what a scan reports), :mod:`.text` (the characters it reads past:
the skeleton, decoded smuggling), :mod:`.patterns` (what it looks for), :mod:`.context` (what is
scanned, and compared with) and :mod:`.rules` (the rules, and the entry points imported here).
"""

from index.trust.scan.context import ScanContext, tool_texts
from index.trust.scan.findings import EXCERPT_CHARS, SEVERITY_ORDER, Category, Finding, Severity, worst
from index.trust.scan.rules import scan_result_text, scan_text, scan_tool
from index.trust.scan.text import skeleton, visible

__all__ = [
    "EXCERPT_CHARS",
    "SEVERITY_ORDER",
    "Category",
    "Finding",
    "ScanContext",
    "Severity",
    "scan_result_text",
    "scan_text",
    "scan_tool",
    "skeleton",
    "tool_texts",
    "visible",
    "worst",
]
