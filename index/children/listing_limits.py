"""How much of a child's listings the copilot keeps, whatever the child sends.

One place for the bounds that ``tool_listing`` (tools) and ``index.catalog.kinds`` (prompts,
resources, resource templates) both apply: ``tool_listing`` imports ``index.catalog.kinds``, so
the shared numbers live here, in a module that imports neither -- with how a cut reads: the entry
of a server's skipped tools that says its listing was cut at the cap (read by the pool, the crawl
and ``server.errors``), the warning about items listed again, and which tool names are none (also
checked by the LiveMCPBench importer, which must not load the MCP SDK for it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel

#: List pages followed per list method and server; a server that keeps returning cursors is cut here.
MAX_PAGES = 100
#: Items kept per server and kind, the first ones listed (the largest server of the bundled catalog
#: has 54 tools): every item is pinned, scanned and embedded, so a child listing 100,000 would cost minutes.
MAX_TOOLS = 1000
#: Characters of one item's definition as JSON; a longer one is skipped (the largest of the bundled
#: catalog has 8,586). Every definition is pinned whole, scanned and embedded.
MAX_DEFINITION_CHARS = 100_000
#: Characters of a child's name (of a tool, prompt, resource, cursor) quoted in a warning.
SHOWN_NAME_CHARS = 100
#: The entry of a server's skipped tools (name -> why: the catalog's, the index's, the pool's) that
#: says its listing was cut at :data:`MAX_TOOLS`. Not a tool: every tool past the cut is left out
#: by it, named or not (no page past the cap is asked for). Spaces and parentheses are outside MCP's
#: tool-name characters, and the listing keeps a broken tool so named under another key.
LISTING_CUT = "(tools past the cap)"


def left_out_words(left_out: int, more_pages: bool) -> str:
    """What a cut at the cap left out: ``left_out`` items seen and not read, and (``more_pages``) a
    next page left unasked -- "12 more and further pages"."""
    return " and ".join(([f"{left_out:,} more"] if left_out else []) + (["further pages"] if more_pages else []))


def listing_cut_reason(left_out: int, more_pages: bool) -> str:
    """The ``LISTING_CUT`` entry: a server listed more tools than the copilot reads."""
    return (
        f"the server listed more than {MAX_TOOLS:,} tools and the copilot reads only the first {MAX_TOOLS:,} "
        f"({left_out_words(left_out, more_pages)} left out)"
    )


def broken_problem(skipped: Mapping[str, str], name: str) -> str | None:
    """What is wrong with tool ``name``'s definition, if its listing skipped it for that (else None)."""
    return skipped.get(name) if name != LISTING_CUT else None


def size_problem(item: BaseModel) -> str | None:
    """Why ``item``'s definition is too long for the copilot to keep, or None."""
    size = len(item.model_dump_json(by_alias=True, exclude_none=True))
    if size > MAX_DEFINITION_CHARS:
        return f"it is {size:,} characters long, over the copilot's limit of {MAX_DEFINITION_CHARS:,} characters"
    return None


#: Distinct items listed again named in a warning; the repeats of others are counted.
SHOWN_REPEATS = 5


class Repeats:
    """Items a listing repeated, for one warning: the first few named with their counts, the rest
    counted (a child listing one item a million times costs no million names, nor log lines)."""

    def __init__(self) -> None:
        self.shown: dict[str, int] = {}  # label ("prompt 'x'") -> times listed again
        self.others = 0

    def add(self, label: str, times: int = 1) -> None:
        if label in self.shown or len(self.shown) < SHOWN_REPEATS:
            self.shown[label] = self.shown.get(label, 0) + times
        else:
            self.others += times

    def update(self, other: Repeats) -> None:
        for label, times in other.shown.items():
            self.add(label, times)
        self.others += other.others

    def warn(self, warnings: list[str]) -> None:
        """One warning for them all, if there were any."""
        if not self.shown:
            return
        if len(self.shown) == 1 and not self.others:
            ((label, times),) = self.shown.items()
            listed = "twice" if times == 1 else f"{times + 1:,} times"
            warnings.append(f"{label} listed {listed}; kept the first")
            return
        shown = ", ".join(label + (f" ({times + 1:,} times)" if times > 1 else "") for label, times in self.shown.items())
        if self.others:
            shown += f" and {self.others:,} more"
        warnings.append(f"{shown} listed more than once; kept the first of each")


_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def name_problem(name: str) -> str | None:
    """What makes a tool's name one nobody can call or approve by name, or None.

    An empty name reads as no name in every "server/tool" form (``approve names/`` names nothing),
    and a control character cannot be typed or passed in a command line (argv ends at a NUL).
    """
    if not name.strip():
        return "name: empty or blank; a tool must have a name to be called or approved"
    if (found := _CONTROL_CHARACTERS.search(name)) is not None:
        return f"name: holds the control character U+{ord(found.group()):04X}, which no command line can pass"
    return None
