"""Judge prompt contents: the paper's inputs and the tools' descriptions (``evaluation/judge/prompting/prompts.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from evaluation.judge.prompting.prompts import LIVEMCPEVAL_SYSTEM, judge_messages, truncate_middle
from evaluation.judge.tool_descriptions import load_tool_descriptions
from evaluation.trajectories import livemcpbench_trajectory
from tests.evaluation.judge_helpers import livemcpbench_entry


def _tools_json(path: Path) -> Path:
    path.write_text(
        json.dumps(
            [
                {
                    "name": "Maps",
                    "tools": {
                        "maps": {
                            "server_name": "maps",
                            "tools": [{"name": "geocode", "description": "Address to coordinates."}],
                        }
                    },
                }
            ]
        )
    )
    return path


def test_livemcpeval_prompt_has_the_papers_inputs(tmp_path: Path) -> None:
    trajectory = livemcpbench_trajectory(livemcpbench_entry("L1", "Where is X?"), "f.json")
    trajectory.calls.append(trajectory.calls[-1].model_copy(update={"server": "other", "tool": "thing", "index": 3}))
    descriptions = load_tool_descriptions(_tools_json(tmp_path / "tools.json"))
    system, user = judge_messages("livemcpeval", trajectory, "Where is X?", ["find X", "say where"], descriptions)
    assert system == {"role": "system", "content": LIVEMCPEVAL_SYSTEM}
    text = user["content"]
    assert text.startswith("User Task: \nWhere is X?\n\nKey Points: \n1. find X\n2. say where\n\nFinal Response: \nHere is the answer.")
    # Only execute calls, as the agent sent them; no tool outputs in the paper's prompt.
    assert '\nTool Call History:\n1. {"server_name": "maps", "tool_name": "geocode", "params": {"q": "x"}}\n2.' in text
    assert "lat 1, lon 2" not in text and "find a place" not in text
    assert "Server: maps\nTool: geocode\nDescription: Address to coordinates." in text
    assert "Tool thing not found in server other." in text


def test_truncate_middle_keeps_head_and_tail() -> None:
    text = "a" * 600 + "b" * 400
    cut = truncate_middle(text, 300)
    assert cut.startswith("a" * 200) and cut.endswith("b" * 100) and "[... 700 characters omitted ...]" in cut
    assert truncate_middle("short", 300) == "short"
