"""``COPILOT_*`` settings of the index: empty values and collection names a user can get wrong."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.index.index_support import make_catalog

from index.errors import ConfigError
from index.settings import DEFAULT_CATALOG, DEFAULT_EMBEDDING_MODEL, PROJECT_DIR, CopilotSettings, _default_home
from tests.support.cli import cli_env, run_cli, single_error

pytestmark = pytest.mark.timeout(120)

EMPTIED = (
    "COPILOT_HOME", "COPILOT_SERVERS", "COPILOT_CATALOG", "COPILOT_EMBEDDING_MODEL", "COPILOT_EMBEDDING_PRECISION",
    "COPILOT_CHROMA_URL", "COPILOT_COLLECTION", "COPILOT_LOG_DIR", "COPILOT_USAGE_PRIOR", "COPILOT_USAGE_PRIOR_WEIGHT",
)


@pytest.fixture(autouse=True)
def _no_dotenv_nor_servers_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A working directory of its own: no .env and no servers.json of the caller's are read.
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_setting_is_the_default_not_the_working_directory(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``COPILOT_HOME=`` in a .env file or ``COPILOT_SERVERS=$UNSET`` in a script: as Path('') they
    # were '.', so a build wrote its index under ./index and the server list was read from '.'.
    for name in EMPTIED:
        monkeypatch.setenv(name, value)
    settings = CopilotSettings.load()
    assert settings.home == _default_home() and settings.home.is_absolute()
    assert settings.servers_file() == PROJECT_DIR / "servers.json"
    assert settings.catalog_file() == DEFAULT_CATALOG
    assert settings.embedding_model == DEFAULT_EMBEDDING_MODEL and settings.embedding_precision == "int8"
    assert settings.chroma_url is None and settings.collection == "tools" and settings.log_dir is None
    assert settings.usage_prior_file == settings.home / "usage-prior.json" and settings.usage_prior_weight == 0.5


@pytest.mark.parametrize("value", ["-1", "11", "a lot"])
def test_a_usage_prior_weight_out_of_range_names_the_variable(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_USAGE_PRIOR_WEIGHT", value)
    with pytest.raises(ConfigError, match=r"^COPILOT_USAGE_PRIOR_WEIGHT: "):
        CopilotSettings.load()


@pytest.mark.parametrize("name", ["tools-v2", "my.index_1", "a" * 504])
def test_a_collection_name_chroma_takes_is_kept(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_COLLECTION", name)
    assert CopilotSettings.load().collection == name


@pytest.mark.parametrize("name", ["my tools", "ab", "-tools", "tools.", "a..b", "10.0.0.1", "a" * 505])
def test_a_collection_name_chroma_refuses_is_an_error_naming_the_variable(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPILOT_COLLECTION", name)
    with pytest.raises(ConfigError) as caught:
        CopilotSettings.load()
    message = str(caught.value)
    assert message.startswith("COPILOT_COLLECTION: must be 3-504 characters of letters, digits")
    assert "Chroma's rule for collection names" in message


def test_build_refuses_a_bad_collection_name_before_embedding_anything(tmp_path: Path) -> None:
    # Chroma refused the name only when the build wrote the embeddings: a minute of work for the
    # bundled catalog, then an error that named Chroma's rule but not the variable to change.
    catalog = make_catalog().save(tmp_path / "catalog.json")
    home = tmp_path / "home"
    env = cli_env(COPILOT_HOME=str(home), COPILOT_COLLECTION="my tools")
    result = run_cli("index", "build", "--catalog", str(catalog), env=env)
    assert single_error(result).startswith("error: COPILOT_COLLECTION: must be 3-504 characters")
    assert "(got 'my tools')" in result.stderr
    assert not (home / "index" / "chroma").exists()


def test_search_with_a_home_that_is_not_a_directory_names_copilot_home(tmp_path: Path) -> None:
    # It said "If its files are damaged, remove …/index/chroma": there were no files to remove.
    home = tmp_path / "home"
    home.write_text("a file where the data directory should be", encoding="utf-8")
    result = run_cli("index", "search", "weather forecast", env=cli_env(COPILOT_HOME=str(home)))
    assert single_error(result) == (
        f"error: cannot use {home / 'index' / 'chroma'} for the index ({os.strerror(errno.ENOTDIR)}); COPILOT_HOME ({home}) "
        "must be a writable directory: fix it or set COPILOT_HOME elsewhere."
    )


@pytest.mark.parametrize("kind", ["loop", "dangling", "file"])
def test_a_directory_setting_says_what_is_in_the_way(tmp_path: Path, kind: str) -> None:
    """mkdir said "File exists" for a symlink loop and a link to nothing: there is no such file."""
    from index.settings import check_writable_directory  # noqa: PLC0415

    path = tmp_path / "logs"
    if kind == "loop":
        path.symlink_to(tmp_path / "other")
        (tmp_path / "other").symlink_to(path)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "nowhere")
    else:
        path.write_text("")
    with pytest.raises(ConfigError) as raised:
        check_writable_directory(path, "COPILOT_LOG_DIR", "the trajectory logs")
    expected = {
        "loop": os.strerror(errno.ELOOP),
        "dangling": "a symbolic link to a path that does not exist",
        "file": "not a directory",
    }[kind]
    assert f"COPILOT_LOG_DIR: cannot use {path} for the trajectory logs ({expected}); set COPILOT_LOG_DIR" in str(raised.value)


_IN_A_REMOVED_DIRECTORY = """
import os, runpy, sys
os.chdir(sys.argv[1])
os.rmdir(sys.argv[1])  # a shell still in a temporary directory that was cleaned up
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_module(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("command", [["index", "build"], ["index", "search", "weather"], ["server"]])
def test_a_command_started_in_a_removed_directory_says_so(tmp_path: Path, command: list[str]) -> None:
    """It was a FileNotFoundError traceback (getcwd), or torch's libraries failing to load."""
    gone = tmp_path / "gone"
    gone.mkdir()
    env = cli_env(COPILOT_HOME=str(tmp_path / "home"), PYTHONPATH=str(PROJECT_DIR))
    result = subprocess.run(
        [sys.executable, "-c", _IN_A_REMOVED_DIRECTORY, str(gone), *command],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert result.returncode == 2, result.stderr
    assert single_error(result) == (
        "error: the current directory no longer exists (it was removed after this shell entered it); "
        "cd to an existing directory and run the command again."
    )


def test_directories_made_at_start_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """Logs and children's work and log roots: 0777 under umask 000."""
    from index.settings import check_writable_directory  # noqa: PLC0415

    previous = os.umask(0)
    try:
        check_writable_directory(tmp_path / "logs", "COPILOT_LOG_DIR", "the trajectory logs")
    finally:
        os.umask(previous)
    assert ((tmp_path / "logs").stat().st_mode & 0o777) == 0o700
    # A directory made below a missing one (the children's logs under logs/): the parent too.
    previous = os.umask(0)
    try:
        check_writable_directory(tmp_path / "home" / "logs" / "children", "COPILOT_CHILD_LOG_DIR", "the children's logs")
    finally:
        os.umask(previous)
    assert [(tmp_path / part).stat().st_mode & 0o777 for part in ("home", "home/logs", "home/logs/children")] == [0o700] * 3


def test_an_installed_package_has_the_projects_servers_file_and_crawls_into_its_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Installed as a wheel there is no checkout: without ./servers.json or COPILOT_SERVERS every
    # command stopped at "…/site-packages/servers.json: server list not found", and `index crawl`
    # overwrote the installed package's catalog snapshot.
    import index.settings as settings_module  # noqa: PLC0415

    checkout = settings_module.PROJECT_DIR
    assert settings_module.BUNDLED_SERVERS.read_bytes() == (checkout / "servers.json").read_bytes()
    monkeypatch.chdir(tmp_path)  # no ./servers.json here
    for name in ("COPILOT_SERVERS", "COPILOT_CATALOG"):
        monkeypatch.delenv(name, raising=False)
    settings = CopilotSettings(home=tmp_path / "home")
    assert settings.servers_file() == checkout / "servers.json"
    assert settings.crawl_output() == settings_module.DEFAULT_CATALOG  # a maintainer refreshes the snapshot
    monkeypatch.setattr(settings_module, "PROJECT_DIR", tmp_path / "site-packages")  # what a wheel's parent holds
    assert settings.servers_file() == settings_module.BUNDLED_SERVERS
    assert settings.crawl_output() == tmp_path / "home" / "catalog.json"
    assert settings.catalog_file() == settings_module.DEFAULT_CATALOG  # nothing crawled yet
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "catalog.json").write_text("{}", encoding="utf-8")
    assert settings.catalog_file() == tmp_path / "home" / "catalog.json"  # the user's own crawl
