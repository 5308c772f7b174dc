"""The usage prior's file and what route adds for it."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest

from index.errors import ConfigError
from index.usage.prior import UsagePrior, UsagePriorFile, prior_vector, read_usage_prior, usage_boost, write_usage_prior

PRIOR = UsagePrior(trajectories=12, tools={"fs": {"write_file": 7, "read_file": 1}, "time": {"now": 3}})


def test_the_boost_is_the_weight_times_the_log_of_one_plus_the_count() -> None:
    assert usage_boost(np.array([0, 1, 7]), 0.5).tolist() == pytest.approx([0.0, 0.5 * math.log(2), 0.5 * math.log(8)])
    # aligned with the index; prompts and resources (None) and unknown tools get nothing
    ids = ["fs/read_file", "prompt:fs/read_file", "fs/unknown", "time/now"]
    vector = prior_vector(PRIOR, ids, ["tool", "prompt", "tool", "tool"], 1.0)
    assert vector.tolist() == pytest.approx([math.log(2), 0.0, 0.0, math.log(4)])


def test_the_file_round_trips_and_a_missing_one_is_no_prior(tmp_path: Path) -> None:
    path = tmp_path / "usage-prior.json"
    assert read_usage_prior(path) is None
    write_usage_prior(PRIOR, path)
    assert read_usage_prior(path) == PRIOR


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("{not json", "the file"),
        ('{"format": "mcp-copilot/usage-prior", "version": 1, "tools": {"fs": {"write_file": -1}}}', "tools.fs.write_file"),
        ('{"format": "something-else", "version": 1}', "format"),
        # Past the trajectories: 10^309 ended every route in an OverflowError, 10^300 outranked every tool.
        (
            '{"format": "mcp-copilot/usage-prior", "version": 1, "trajectories": 1, "tools": {"time": {"now": 1' + "0" * 309 + "}}}",
            "time/now is counted 100… (310 digits) times over 1 trajectories (a tool counts at most once per trajectory)",
        ),
        ('{"format": "mcp-copilot/usage-prior", "version": 1, "trajectories": 3, "tools": {"fs": {"w": 4}}}', "fs/w is counted 4"),
    ],
)
def test_a_broken_file_names_itself_what_is_wrong_and_how_to_rebuild(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "usage-prior.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        read_usage_prior(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: not a usage prior (")
    assert where in message and "python -m index usage" in message


def test_route_reads_a_new_prior_and_routes_without_a_broken_one(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "usage-prior.json"
    source = UsagePriorFile(path, 0.5)
    ids, kinds = ["fs/write_file", "time/now"], ["tool", "tool"]
    assert source.boost(ids, kinds) is None and source.info() is None
    write_usage_prior(PRIOR, path)
    assert source.boost(ids, kinds).tolist() == pytest.approx([0.5 * math.log(8), 0.5 * math.log(4)])
    assert source.info() == {"file": str(path), "trajectories": 12, "tools": 3, "weight": 0.5}
    write_usage_prior(UsagePrior(trajectories=1, tools={"time": {"now": 1}}), path)
    assert source.boost(ids, kinds).tolist() == pytest.approx([0.0, 0.5 * math.log(2)])
    path.write_text("{broken")
    with caplog.at_level(logging.WARNING, logger="index.usage.prior"):
        assert source.boost(ids, kinds) is None
        assert source.boost(ids, kinds) is None
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and warnings[0].endswith("; routing without it")  # once, not on every route
    path.unlink()
    assert source.boost(ids, kinds) is None


def test_a_weight_of_zero_turns_it_off(tmp_path: Path) -> None:
    path = tmp_path / "usage-prior.json"
    write_usage_prior(PRIOR, path)
    assert UsagePriorFile(path, 0.0).boost(["fs/write_file"], ["tool"]) is None
