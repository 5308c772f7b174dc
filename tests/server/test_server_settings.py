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


def test_task_text_from_a_locale_that_is_not_utf8_is_read_as_the_utf8_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LC_ALL=C with PYTHONUTF8=0: each non-ASCII byte of an environment value or argument arrives as
    # a lone surrogate, which the trajectory's session_start wrote as "?" ("t??che-1").
    from server.__main__ import _overrides, build_parser  # noqa: PLC0415

    def as_read(text: str) -> str:
        return text.encode().decode("ascii", "surrogateescape")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    # (Given directly: this process's locale is UTF-8, so its environment would decode them itself.)
    settings = ServerSettings(question=as_read("Quelle météo à Zürich? 🚀"), category=as_read("Météo") + " \udcff")
    assert settings.question == "Quelle météo à Zürich? 🚀"
    assert settings.category == as_read("Météo") + " \udcff"  # not UTF-8: kept as read
    args = build_parser().parse_args(["--task-id", as_read("tâche-1"), "--log-file", as_read(str(tmp_path / "é.jsonl"))])
    overrides = _overrides(args)
    assert overrides["task_id"] == "tâche-1"
    assert overrides["log_file"] == Path(as_read(str(tmp_path / "é.jsonl")))  # a path stays as the file system gave it
