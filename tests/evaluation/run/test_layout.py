"""Where a run's results go (``evaluation/run/layout.py``): the repeats manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.run.layout import read_repeats, run_directories
from index.errors import ConfigError


def test_a_damaged_repeats_manifest_says_what_is_wrong(tmp_path: Path) -> None:
    # Before: "not a repeats manifest (1 validation error for RepeatsManifest)".
    (tmp_path / "repeats.json").write_text(json.dumps({"repeats": "repeat-1"}), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        read_repeats(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'repeats.json'}: the repeats manifest is unreadable (field repeats: Input should be a valid "
        "array (got 'repeat-1')); fix it, or use another --out to start over."
    )


def test_a_manifest_saved_with_a_bom_is_read_and_keeps_its_creation_date(tmp_path: Path) -> None:
    manifest = {"version": 1, "created": "2025-01-01T00:00:00Z", "repeats": ["repeat-1", "repeat-2"]}
    (tmp_path / "repeats.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(manifest).encode())
    assert read_repeats(tmp_path) == [tmp_path / "repeat-1", tmp_path / "repeat-2"]
    assert run_directories(tmp_path, 3) == [tmp_path / f"repeat-{n}" for n in (1, 2, 3)]
    assert json.loads((tmp_path / "repeats.json").read_text())["created"] == "2025-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (["repeat-1", "/tmp/elsewhere"], "'/tmp/elsewhere' is not the name of a directory inside the run"),
        (["repeat-1", ".."], "'..' is not the name of a directory inside the run"),
        (["sub/repeat-1"], "'sub/repeat-1' is not the name of a directory inside the run"),
        (["repeat-1", "repeat-1"], "'repeat-1' is listed twice"),
    ],
)
def test_a_manifest_naming_a_directory_outside_the_run_is_refused(tmp_path: Path, names: list[str], said: str) -> None:
    # The judge read every log under such a directory and wrote its report into it: outside the run and --out.
    (tmp_path / "repeats.json").write_text(json.dumps({"repeats": names}), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        read_repeats(tmp_path)
    assert f"the repeats manifest is unreadable (field repeats: {said}" in str(caught.value)
