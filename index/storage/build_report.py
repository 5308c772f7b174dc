"""What a build or sync did: counts, time, model and store (kept apart from the heavy search code)."""

from __future__ import annotations

from pydantic import BaseModel


class BuildReport(BaseModel):
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    servers_embedded: int = 0
    servers_removed: int = 0
    total: int = 0
    seconds: float = 0.0
    model: str = ""
    full_rebuild: bool = False
    location: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.servers_embedded or self.servers_removed)
