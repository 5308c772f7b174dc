"""Trust settings (prefix ``COPILOT_``), shared by the copilot and ``python -m index``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from index.json_text import parse_json
from index.settings import CopilotSettings
from index.trust.review import TrustReviewer
from index.trust.scan_cache import ScanCache
from index.trust.store import TrustStore


def split_list(value: Any) -> Any:
    """``a,b`` or a JSON list (``["a","b"]``) -> a list (the form every list setting takes)."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text.startswith("["):
            return parse_json(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


class TrustSettings(CopilotSettings):
    """Pinning, quarantine and scan behaviour; the README's Trust section lists each variable."""

    pin_tools: bool = Field(
        default=True,
        description="Pin each tool's definition on first use and hold back changed ones (false: only the scan).",
    )
    quarantine_new: bool = Field(
        default=False, description="Servers added to the servers file later are quarantined until approved."
    )
    trust_auto_approve: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Server globs whose changed or new tools are approved at once."
    )

    @field_validator("trust_auto_approve", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return split_list(value)

    def store(self) -> TrustStore:
        return TrustStore.in_home(self.home)

    def reviewer(self, *, scan_cache: ScanCache | None = None) -> TrustReviewer:
        return TrustReviewer(
            self.store(),
            auto_approve=self.trust_auto_approve,
            quarantine_new=self.quarantine_new,
            pinning=self.pin_tools,
            scan_cache=scan_cache,
        )
