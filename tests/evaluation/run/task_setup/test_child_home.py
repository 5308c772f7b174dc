"""The child servers' per-task home: shared caches and settings found in the real home."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evaluation.run.task_setup.child_home import HOME_DERIVED, child_environment, merge_entry_env, shared_locations

pytestmark = pytest.mark.timeout(60)


def test_explicit_locations_in_the_environment_win(tmp_path: Path) -> None:
    environ = {
        "HOME": str(tmp_path / "real"),
        "NPM_CONFIG_CACHE": "/caches/npm",
        "UV_CACHE_DIR": "/caches/uv",
        "UV_TOOL_DIR": "/opt/uv-tools",
        "UV_PYTHON_INSTALL_DIR": "/opt/uv-python",
        "XDG_CACHE_HOME": "/caches",
        "PYENV_ROOT": "/opt/pyenv",
        "GIT_CONFIG_GLOBAL": "/etc/team.gitconfig",
    }
    shared = shared_locations(environ)
    assert shared == {
        "XDG_CACHE_HOME": "/caches",
        "npm_config_cache": "/caches/npm",
        "UV_CACHE_DIR": "/caches/uv",
        "UV_TOOL_DIR": "/opt/uv-tools",
        "UV_PYTHON_INSTALL_DIR": "/opt/uv-python",
        "GIT_CONFIG_GLOBAL": "/etc/team.gitconfig",
        "PYENV_ROOT": "/opt/pyenv",
    }
    # The lower-case npm spelling is the one npm documents; it wins over the upper-case one.
    assert shared_locations({**environ, "npm_config_cache": "/other/npm"})["npm_config_cache"] == "/other/npm"


def test_defaults_are_the_real_homes_caches_and_settings(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / ".config" / "pip").mkdir(parents=True)
    (real / ".config" / "pip" / "pip.conf").write_text("[global]\n")
    (real / ".npmrc").write_text("registry=https://registry.example.test/\n")
    (real / ".gitconfig").write_text("[user]\n\tname = t\n")
    (real / ".pyenv").mkdir()
    # uv itself answers where its cache, tools and Pythons are for this home.
    shared = shared_locations({"HOME": str(real), "PATH": os.environ.get("PATH", os.defpath)})
    assert shared == {
        "XDG_CACHE_HOME": str(real / ".cache"),
        "npm_config_cache": str(real / ".npm"),
        "UV_CACHE_DIR": str(real / ".cache" / "uv"),
        "UV_TOOL_DIR": str(real / ".local" / "share" / "uv" / "tools"),
        "UV_PYTHON_INSTALL_DIR": str(real / ".local" / "share" / "uv" / "python"),
        "npm_config_userconfig": str(real / ".npmrc"),
        "PIP_CONFIG_FILE": str(real / ".config" / "pip" / "pip.conf"),
        "GIT_CONFIG_GLOBAL": str(real / ".gitconfig"),
        "PYENV_ROOT": str(real / ".pyenv"),
    }
    # Settings files that do not exist are not pointed at.
    bare = shared_locations({"HOME": str(tmp_path / "bare")})
    assert not {"npm_config_userconfig", "PIP_CONFIG_FILE", "GIT_CONFIG_GLOBAL", "PYENV_ROOT"} & set(bare)
    assert bare["UV_CACHE_DIR"] == str(tmp_path / "bare" / ".cache" / "uv")


def test_child_environment_puts_home_and_its_xdg_dirs_in_the_task(tmp_path: Path) -> None:
    home = tmp_path / "task" / "home"
    env = child_environment(home, {"XDG_CACHE_HOME": "/real/.cache", "UV_CACHE_DIR": "/real/.cache/uv"})
    assert env == {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": "/real/.cache",
        "UV_CACHE_DIR": "/real/.cache/uv",
    }


def test_what_a_server_entry_sets_itself_wins(tmp_path: Path) -> None:
    task_env = child_environment(tmp_path / "home", {"UV_CACHE_DIR": "/real/uv", "npm_config_cache": "/real/npm"})
    merged = merge_entry_env({"UV_CACHE_DIR": "/mine/uv", "N": "4"}, task_env)
    assert merged["UV_CACHE_DIR"] == "/mine/uv" and merged["N"] == "4"
    assert merged["HOME"] == str(tmp_path / "home") and merged["npm_config_cache"] == "/real/npm"
    # An entry with its own HOME keeps it, and its XDG directories follow that home as usual.
    own = merge_entry_env({"HOME": "/srv/notes"}, task_env)
    assert own["HOME"] == "/srv/notes"
    assert not set(HOME_DERIVED) & set(own)
    assert own["npm_config_cache"] == "/real/npm"
