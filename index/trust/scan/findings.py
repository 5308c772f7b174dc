"""What the tool-poisoning scan reports: one :class:`Finding` per suspicious thing, with its severity."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel



Severity = Literal["high", "medium", "low"]
Category = Literal["instructions", "secrets", "shadowing", "hidden", "exfiltration"]
SEVERITY_ORDER: dict[str, int] = {"low": 1, "medium": 2, "high": 3}

#: Longest excerpt kept in a finding.
EXCERPT_CHARS = 160


class Finding(BaseModel):
    """One suspicious thing in one field of a tool definition (or a tool result)."""

    rule: str
    category: Category
    severity: Severity
    field: str
    message: str
    excerpt: str = ""

    def line(self) -> str:
        """One line for people (the excerpt is made visible and bounded)."""
        shown = f": {self.excerpt}" if self.excerpt else ""
        return f"[{self.severity}] {self.field}: {self.message}{shown}"


def worst(findings: Iterable[Finding]) -> Severity | None:
    best: Severity | None = None
    for finding in findings:
        if best is None or SEVERITY_ORDER[finding.severity] > SEVERITY_ORDER[best]:
            best = finding.severity
    return best
