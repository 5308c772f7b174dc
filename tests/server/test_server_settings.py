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
    for name in ("COPILOT_HTTP_TOKEN_FILE", "COPILOT_LOG_FILE", "COPILOT_HTTP_HOST", "COPILOT_HTTP_TOKEN"):
        monkeypatch.setenv(name, value)
    settings = ServerSettings()
    assert settings.http_token_file is None and settings.log_file is None
    # A blank host was bind(""): every interface, where loopback is meant.
    assert settings.http_host == "127.0.0.1" and settings.binds_loopback and settings.token is None


def test_a_copilot_variable_nothing_reads_is_named_with_the_nearest_that_is() -> None:
    from server.settings import unknown_variables  # noqa: PLC0415

    warnings = unknown_variables(
        {"COPILOT_CALL_TIMOUT": "5", "COPILOT_LOGDIR": "/tmp", "COPILOT_HOME": "/x", "copilot_http_port": "1",
         "COPILOT_LIVEMCPBENCH_DIR": "/d", "COPILOT_FROBNICATE": "1", "PATH": "/bin"}
    )
    assert warnings == [
        "COPILOT_CALL_TIMOUT is set but no setting of that name exists, so it is ignored; did you mean COPILOT_CALL_TIMEOUT?",
        "COPILOT_FROBNICATE is set but no setting of that name exists, so it is ignored; see the README's Configuration table",
        "COPILOT_LOGDIR is set but no setting of that name exists, so it is ignored; did you mean COPILOT_LOG_DIR?",
    ]
