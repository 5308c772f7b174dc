"""The ``glossary`` child of the withheld-definition and approval tests: ``tests/fixtures/poison_server.py``
serving exactly a JSON spec, among them one whose prompts and resource templates change at runtime."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.server.copilot_harness import poison_entry, write_servers

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
