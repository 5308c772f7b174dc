"""``COPILOT_*`` settings of the server that index's settings do not have (server.settings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.settings import ServerSettings


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_path_setting_is_unset_not_the_working_directory(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: read as Path('') -- the working directory -- so the copilot stopped with "Is a directory: '.'".
    monkeypatch.chdir(tmp_path)  # no .env of the caller's is read
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    for name in ("COPILOT_HTTP_TOKEN_FILE", "COPILOT_LOG_FILE"):
        monkeypatch.setenv(name, value)
    settings = ServerSettings()
    assert settings.http_token_file is None and settings.log_file is None
