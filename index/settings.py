"""Settings shared by the index, the copilot server and the CLIs (prefix ``COPILOT_``)."""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGE_DIR = Path(__file__).resolve().parent
#: The repository checkout (editable installs) -- where the project's ``servers.json`` lives.
PROJECT_DIR = PACKAGE_DIR.parent
#: The project's own crawl of ``servers.json``, committed so a fresh install can build the index.
DEFAULT_CATALOG = PACKAGE_DIR / "data" / "catalog.json"
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"


def _default_home() -> Path:
    return Path(platformdirs.user_data_dir("mcp-copilot", appauthor=False))


class CopilotSettings(BaseSettings):
    """Read from ``COPILOT_*`` environment variables (and a ``.env`` file)."""

    model_config = SettingsConfigDict(env_prefix="COPILOT_", env_file=".env", extra="ignore")

    home: Path = Field(default_factory=_default_home, description="Index, logs and child work dirs.")
    servers: Path | None = Field(default=None, description="servers.json (Claude-Desktop form).")
    catalog: Path | None = Field(default=None, description="Tool catalog snapshot to build from.")
    embedding_model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        description="Name of a bundled model or a local sentence-transformers model directory.",
    )
    chroma_url: str | None = Field(default=None, description="Use a Chroma server instead of the embedded store.")
    collection: str = Field(default="tools", description="Chroma collection name.")
    log_dir: Path | None = Field(default=None, description="Trajectory logs (default: HOME/logs).")

    @property
    def index_dir(self) -> Path:
        return self.home / "index"

    @property
    def logs_dir(self) -> Path:
        return self.log_dir if self.log_dir is not None else self.home / "logs"

    def servers_file(self) -> Path:
        """The server list in use: ``COPILOT_SERVERS``, else ``./servers.json``, else the project's."""
        if self.servers is not None:
            return self.servers
        local = Path.cwd() / "servers.json"
        if local.is_file():
            return local
        return PROJECT_DIR / "servers.json"

    def catalog_file(self) -> Path:
        return self.catalog if self.catalog is not None else DEFAULT_CATALOG


def livemcpbench_dir() -> Path:
    """The public LiveMCPBench release, read in place (tests and benchmarks skip without it).

    ``COPILOT_LIVEMCPBENCH_DIR`` wins; otherwise ``shared/livemcpbench`` beside the checkout.
    """
    import os

    configured = os.environ.get("COPILOT_LIVEMCPBENCH_DIR")
    if configured:
        return Path(configured)
    return PROJECT_DIR.parent / "shared" / "livemcpbench"
