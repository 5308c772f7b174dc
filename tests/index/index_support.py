"""Shared helpers for the search-index tests: a small catalog made here, and a counting embedder.

The embedder wraps the real bundled model (loaded once per test process by ``get_embedder``),
so tests can count what a rebuild re-embeds without mocking anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from index.models.embedding import Embedder, bundled_model_path, get_embedder
from index.catalog.records import Catalog, CatalogServer, ToolRecord
from index.settings import CopilotSettings, livemcpbench_dir
from index.search.tool_index import ToolIndex

LIVEMCPBENCH_TOOLS = livemcpbench_dir() / "tools/LiveMCPTool/tools.json"


def _schema(required: Sequence[str] = (), **properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(required),
    }


SERVERS: dict[str, tuple[str, str]] = {
    "weather": ("Weather forecasts and current conditions for any city.", "Travel"),
    "word-document-server": ("Create, edit and convert Microsoft Word documents.", "Office"),
    "chart": ("Generate charts and data visualisations as images.", "Data"),
    "filesystem": ("Read, write and list files and directories on the local disk.", "File Access"),
    "time": ("Current time and time-zone conversion.", "Miscellaneous"),
    "bing-cn": ("一个中文必应搜索工具，可以搜索网页并获取网页内容。", "Discovery"),
    "bazi": ("八字命理与黄历查询。", "Lifestyle"),
    "maps": ("Geocoding, directions and places search on a map.", "Travel"),
}

TOOLS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("weather", "get_weather_forecast", "Get the weather forecast for the next days in a city.", _schema(["city"], city="string", days="integer")),
    ("weather", "getCurrentConditions", "Current temperature, wind and humidity at a location.", _schema(["location"], location="string")),
    ("weather", "get_air_quality", "Air quality index and pollutants for a city.", _schema(["city"], city="string")),
    ("word-document-server", "create_document", "Create a new Word document with optional title.", _schema(["filename"], filename="string", title="string")),
    ("word-document-server", "add_paragraph", "Add a paragraph of text to a Word document.", _schema(["filename", "text"], filename="string", text="string")),
    ("word-document-server", "add_picture", "Insert an image into a Word document.", _schema(["filename", "image_path"], filename="string", image_path="string")),
    ("word-document-server", "convert_to_pdf", "Convert a Word document to PDF format.", _schema(["filename"], filename="string", output_filename="string")),
    ("chart", "generate_word_cloud_chart", "Generate a word cloud chart showing word frequency by text size.", _schema(["data"], data="array")),
    ("chart", "generate_bar_chart", "Generate a bar chart to compare values across categories.", _schema(["data"], data="array", title="string")),
    ("chart", "generate_line_chart", "Generate a line chart showing a trend over time.", _schema(["data"], data="array")),
    ("chart", "generate_pie_chart", "Generate a pie chart showing proportions of a whole.", _schema(["data"], data="array")),
    ("filesystem", "read_file", "Read the complete contents of a file from the file system.", _schema(["path"], path="string")),
    ("filesystem", "write_file", "Create a new file or overwrite an existing file with new content.", _schema(["path", "content"], path="string", content="string")),
    ("filesystem", "list_directory", "List all files and directories in a given path.", _schema(["path"], path="string")),
    ("filesystem", "create_directory", "Create a new directory, including parent directories.", _schema(["path"], path="string")),
    ("filesystem", "move_file", "Move or rename files and directories.", _schema(["source", "destination"], source="string", destination="string")),
    ("time", "get_current_time", "Get the current time in a specific IANA timezone.", _schema(["timezone"], timezone="string")),
    ("time", "convert_time", "Convert a time between two timezones.", _schema(["source_timezone", "time", "target_timezone"], source_timezone="string", time="string", target_timezone="string")),
    ("bing-cn", "bing_search", "使用必应搜索指定的关键词，并返回搜索结果列表，包括标题、链接和摘要", _schema(["query"], query="string", num_results="number")),
    ("bing-cn", "fetch_webpage", "根据提供的ID获取对应网页的内容", _schema(["result_id"], result_id="string")),
    ("bazi", "getBaziDetail", "根据时间（公历或农历）、性别来获取八字信息。", _schema(["gender"], gender="number", solarDatetime="string")),
    ("bazi", "getChineseCalendar", "获取指定公历时间（默认今天）的黄历信息。", _schema([], solarDatetime="string")),
    ("maps", "geocode_address", "Convert a street address into latitude and longitude coordinates.", _schema(["address"], address="string")),
    ("maps", "get_directions", "Driving, walking or transit directions between two places.", _schema(["origin", "destination"], origin="string", destination="string", mode="string")),
    ("maps", "search_nearby_places", "Find restaurants, parking and attractions near a location.", _schema(["location"], location="string", radius="number", keyword="string")),
]


def make_records() -> list[ToolRecord]:
    return [
        ToolRecord(
            server=server,
            name=name,
            description=description,
            input_schema=schema,
            server_description=SERVERS[server][0],
            category=SERVERS[server][1],
            annotations={"readOnlyHint": name.startswith(("get", "read", "list", "search"))},
        )
        for server, name, description, schema in TOOLS
    ]


def make_catalog(records: list[ToolRecord] | None = None) -> Catalog:
    records = records if records is not None else make_records()
    servers = {
        name: CatalogServer(description=description, category=category, tool_count=sum(1 for r in records if r.server == name))
        for name, (description, category) in SERVERS.items()
    }
    return Catalog(source="tests", servers=servers, tools=records)


class CountingEmbedder:
    """The real embedder, recording every batch of texts it is asked to embed."""

    def __init__(self, real: Embedder | None = None) -> None:
        self.real = real or get_embedder()
        self.label = self.real.label
        self.name = self.real.name
        self.precision = self.real.precision
        self.path = self.real.path
        self.embedded: list[str] = []
        self.queries: list[str] = []

    @property
    def loaded(self) -> bool:
        return self.real.loaded

    def load(self) -> Any:
        return self.real.load()

    def embed(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None, **options: Any) -> np.ndarray:
        self.embedded.extend(texts)
        return self.real.embed(texts, progress=progress, **options)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.queries.extend(texts)
        return self.real.embed_queries(texts)


def open_index(home: Path, embedder: Any = None, **settings: Any) -> ToolIndex:
    return ToolIndex.open(CopilotSettings(home=home, **settings), embedder=embedder)


def linked_model_dir(directory: Path) -> Path:
    """A local model directory (for ``COPILOT_EMBEDDING_MODEL``) holding the bundled model's files as symlinks."""
    directory.mkdir(parents=True)
    for entry in bundled_model_path().iterdir():
        (directory / entry.name).symlink_to(entry)
    return directory


def break_model(directory: Path) -> None:
    """Garbage weights: the directory still looks like a model, but loading it fails."""
    weights = directory / "model.safetensors"
    weights.unlink()
    weights.write_bytes(b"not a model")


def index_with_broken_model(tmp_path: Path) -> tuple[Path, Path]:
    """A model directory and a home whose index it built, then the model's weights broken.

    Returns ``(model, home)``: opening the index works, loading the model fails for real.
    """
    model = linked_model_dir(tmp_path / "model")
    home = tmp_path / "home"
    open_index(home, Embedder(str(model)), embedding_model=str(model)).sync(make_records())
    break_model(model)
    return model, home


def repair_model(directory: Path) -> None:
    weights = directory / "model.safetensors"
    weights.unlink()
    weights.symlink_to(bundled_model_path() / "model.safetensors")
