"""The ``glossary`` child of the withheld-definition and approval tests: ``tests/fixtures/hostile/poison_server.py``
serving exactly a JSON spec, among them one whose prompts and resource templates change at runtime."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from index.catalog.servers import load_servers
from server.app import build_app
from tests.server.support.copilot_harness import copilot_settings, copy_home, crawl_into, poison_entry, write_servers

#: Seconds a glossary host may take from start to end.
HOST_WAIT = 60.0

GLOSSARY_TOOLS = [
    {"name": "lookup", "description": "Look a word up in the glossary.", "inputSchema": {"type": "object"}},
    {"name": "rug_pull", "description": "Refresh the glossary.", "inputSchema": {"type": "object"}},
]
TERM_URI = "glossary://terms/{term}"
CHANGING_SPEC = {
    "tools": GLOSSARY_TOOLS,
    "next_tools": GLOSSARY_TOOLS,
    "prompts": [{"name": "summarize_glossary", "description": "Summarize the glossary in plain words."}],
    "resources": [{"uri": "glossary://terms", "name": "terms", "description": "Every glossary term, one per line."}],
    "resource_templates": [{"uriTemplate": TERM_URI, "name": "term", "description": "One glossary term."}],
    # After rug_pull: a prompt reworded (nothing the scan would flag), a new prompt, a template reworded.
    "next_prompts": [
        {"name": "summarize_glossary", "description": "Summarize the glossary, then list every term it defines."},
        {"name": "quiz", "description": "Quiz the user on glossary terms."},
    ],
    "next_resource_templates": [{"uriTemplate": TERM_URI, "name": "term", "description": "One term, with its etymology."}],
}


def glossary_servers(root: Path, spec: dict[str, Any]) -> Path:
    """A servers file in ``root`` whose only server, ``glossary``, serves ``spec`` (written beside it)."""
    spec_path = root / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    return write_servers(root / "servers.json", {"glossary": poison_entry(spec_path)})


def crawled_glossary(built_index: Path, root: Path, spec: dict[str, Any]) -> tuple[Path, Path]:
    """(home, servers file): a copy of the test index at ``built_index`` plus the glossary child
    serving ``spec``, crawled for real, in ``root``."""
    servers = glossary_servers(root, spec)
    home = copy_home(built_index, root / "home")
    crawl_into(home, servers, root)
    return home, servers


@asynccontextmanager
async def glossary_host(glossary: tuple[Path, Path], tmp_path: Path, **settings: Any) -> AsyncIterator[Client]:
    """A real MCP client of the app in-process, over a copy of ``glossary``'s home."""
    home, servers = glossary
    config = copilot_settings(copy_home(home, tmp_path / "home"), tmp_path, auto_index=False, warm_index=False, **settings)
    app = build_app(config, load_servers(servers), start_now=True)
    with anyio.fail_after(HOST_WAIT):
        async with Client(app, mode="legacy") as client:
            yield client
