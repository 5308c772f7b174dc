"""A ``COPILOT_HOME`` that is not ASCII, under a locale that is not UTF-8 (``LC_ALL=C``, ``PYTHONUTF8=0``).

Python then reads every non-ASCII byte of the home as a lone surrogate (``surrogateescape``), and
that text went to Chroma, whose Rust side cannot encode it: "cannot open the index at
/…/home-\\udcc3\\udca9/index/chroma ('utf-8' codec can't encode characters …: surrogates not allowed)"
-- no index could be built or read. The message itself carried the lone surrogates into ``route``
and ``execute`` answers, whose JSON MCP hosts reject (a protocol error instead of the message), and
its ``index build`` command could not be pasted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from index.json_text import has_lone_surrogate
from index.settings import CopilotSettings
from index.storage.store import ChromaStore, IndexStoreError, open_failure_message
from server.execute.results import text_result, utf8_text
from tests.support.cli import PROJECT

#: Builds a small index in the home ``COPILOT_HOME`` names, then searches it from a fresh index
#: object (the store read back from disk); prints what it found, as ASCII JSON.
BUILD_AND_SEARCH = """
import json, sys
from index.settings import CopilotSettings
from index.search.tool_index import ToolIndex
from tests.index.index_support import make_records
settings = CopilotSettings()
report = ToolIndex.open(settings).sync(make_records())
index = ToolIndex.open(settings)
hits = index.search("weather forecast for the next days in a city", top_k=3)
print(json.dumps({
    "encoding": sys.getfilesystemencoding(),
    "home": str(settings.home),
    "location": index.location,
    "report": report.location,
    "tools": index.tool_count,
    "hits": [f"{hit.server}/{hit.tool}" for hit in hits],
}))
"""

HOME_NAME = "home-é"


def _c_locale_env(home: bytes) -> dict[bytes, bytes]:
    """This process's environment (as bytes) under the C locale, without UTF-8 mode, ``COPILOT_HOME=home``."""
    env = {key: value for key, value in os.environb.items() if not key.startswith((b"COPILOT_", b"LC_", b"LANG"))}
    env.update({b"LC_ALL": b"C", b"LANG": b"C", b"PYTHONUTF8": b"0", b"PYTHONIOENCODING": b"ascii:backslashreplace"})
    env[b"COPILOT_HOME"] = home
    return env


@pytest.mark.timeout(240)
def test_an_index_builds_and_searches_in_a_non_ascii_home_under_the_c_locale(tmp_path: Path) -> None:
    home = os.fsencode(tmp_path) + b"/" + HOME_NAME.encode("utf-8")
    result = subprocess.run(
        [sys.executable, "-c", BUILD_AND_SEARCH],
        env=_c_locale_env(home),
        cwd=PROJECT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=200,
        check=False,
    )
    stderr = result.stderr.decode("utf-8", "backslashreplace")
    assert result.returncode == 0, stderr
    found = json.loads(result.stdout.decode("ascii").strip().splitlines()[-1])
    assert found["encoding"] == "ascii", "the child did not run under a locale that is not UTF-8"
    assert has_lone_surrogate(found["home"])  # the home as Python read it: the case this is about
    readable = home.decode("utf-8") + "/index/chroma"
    assert found["location"] == found["report"] == readable  # shown as the text it is
    assert found["tools"] == 25
    assert found["hits"][0].startswith("weather/")
    # The store is where the home's bytes say, not under a re-encoded (double-UTF-8) name.
    assert b"chroma.sqlite3" in os.listdir(home + b"/index/chroma")
    assert os.listdir(os.fsencode(tmp_path)) == [HOME_NAME.encode("utf-8")]


def test_a_home_whose_bytes_are_not_utf8_is_one_clear_error(tmp_path: Path) -> None:
    home = Path(os.fsdecode(os.fsencode(tmp_path) + b"/home-\xff"))
    with pytest.raises(IndexStoreError) as raised:
        ChromaStore(CopilotSettings(home=home)).client()
    message = str(raised.value)
    assert "not UTF-8" in message and "COPILOT_HOME" in message
    assert f"{tmp_path}/home-\\xff/index/chroma" in message  # named with an escape, not a surrogate
    assert not has_lone_surrogate(message)


def test_the_open_failure_message_shows_the_home_as_text_that_pastes() -> None:
    # As Python reads these bytes under the C locale (os.fsdecode would read them as UTF-8 here).
    chroma = Path(b"/tmp/home-\xc3\xa9/index/chroma".decode("ascii", "surrogateescape"))
    home = b"/tmp/home-\xc3\xa9".decode("ascii", "surrogateescape")
    assert has_lone_surrogate(home)
    command = f"COPILOT_HOME='{home}' .venv/bin/python -m index build"
    message = open_failure_message(chroma, f"file is not a database at {chroma}", command)
    assert not has_lone_surrogate(message)
    assert "cannot open the index at /tmp/home-é/index/chroma (file is not a database at /tmp/home-é/index/chroma)" in message
    assert message.endswith("remove /tmp/home-é/index/chroma and build it again: COPILOT_HOME='/tmp/home-é' .venv/bin/python -m index build")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cannot open the index at /h/home-\udcc3\udca9 (…)", "cannot open the index at /h/home-é (…)"),
        ("Zürich: /h/home-\udcc3\udca9", "Zürich: /h/home-é"),
        ("bytes that are no UTF-8: /h/home-\udcff", "bytes that are no UTF-8: /h/home-\\xff"),
        ("a lone escape: \ud800!", "a lone escape: \\ud800!"),
    ],
)
def test_route_and_execute_answers_never_carry_a_lone_surrogate(text: str, shown: str) -> None:
    """Every answer the copilot writes itself goes through ``text_result``: its JSON must be valid."""
    result = text_result(text, is_error=True)
    assert result.content[0].text == shown
    json.loads(result.model_dump_json())  # encodable at all: a lone surrogate raised here before


def test_text_without_lone_surrogates_is_returned_as_it_is() -> None:
    text = "Top 3 tool(s) for \"météo\" 🌧 — 八字"
    assert utf8_text(text) is text
