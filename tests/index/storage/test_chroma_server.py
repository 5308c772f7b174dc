"""``COPILOT_CHROMA_URL``: the index in a real ``chroma run`` server, shared by two copilots."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from tests.index.index_support import make_records, open_index

from index.errors import ConfigError, IndexNotBuiltError
from index.storage.store import IndexStoreError, parse_chroma_url

pytestmark = pytest.mark.timeout(240)


#: ``chroma run`` through this interpreter rather than the ``.venv/bin/chroma`` script: a script's
#: ``#!`` line holds the venv's absolute path, which stops working past the kernel's shebang limit
#: in a checkout with a long path.
_CHROMA_CLI = "import sys; from chromadb.cli.cli import app; sys.argv[0] = 'chroma'; sys.exit(app())"


def _chroma_cli() -> list[str] | None:
    try:
        import chromadb.cli.cli  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-c", _CHROMA_CLI]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _wait_for_heartbeat(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    with anyio.fail_after(90):
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"chroma run exited with {process.returncode}: {log.read_text(errors='replace')[-2000:]}")
                try:
                    if (await client.get(f"{url}/api/v2/heartbeat")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await anyio.sleep(0.1)  # bounded poll: the server gives no other readiness signal


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cli = _chroma_cli()
    if cli is None:
        pytest.skip("chromadb's CLI (chromadb.cli) is not installed")
    data = tmp_path_factory.mktemp("chroma-server")
    port = _free_port()
    log = data / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*cli, "run", "--path", str(data / "db"), "--host", "127.0.0.1", "--port", str(port)],
            stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        anyio.run(_wait_for_heartbeat, url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


def test_two_copilots_share_one_index_on_a_chroma_server(chroma_url: str, tmp_path: Path) -> None:
    first = open_index(tmp_path / "a", chroma_url=chroma_url)
    with pytest.raises(IndexNotBuiltError):
        first.search("weather")
    report = first.sync(make_records())
    assert report.added == len(make_records())
    assert not (tmp_path / "a" / "index").exists()  # nothing was stored locally

    second = open_index(tmp_path / "b", chroma_url=chroma_url)
    assert second.tool_count == len(make_records())
    hits = second.search("convert a word document to pdf", top_k=1)
    assert (hits[0].server, hits[0].tool) == ("word-document-server", "convert_to_pdf")
    assert second.location == chroma_url
    assert not (tmp_path / "b" / "index").exists()  # no read copy of a store that is not on this disk

    again = second.sync(make_records())
    assert not again.changed and again.unchanged == len(make_records())


def test_unreachable_chroma_server_is_a_clear_error(tmp_path: Path) -> None:
    index = open_index(tmp_path, chroma_url=f"http://127.0.0.1:{_free_port()}")
    with pytest.raises(IndexStoreError, match="cannot reach the Chroma server") as raised:
        index.search("weather")
    assert "COPILOT_CHROMA_URL" in str(raised.value)


def test_chroma_server_credentials_never_shown(tmp_path: Path) -> None:
    index = open_index(tmp_path, chroma_url=f"http://admin:hunter2-secret@127.0.0.1:{_free_port()}/?token=tok-secret")
    with pytest.raises(IndexStoreError, match="cannot reach the Chroma server") as raised:
        index.search("weather")
    shown = f"{raised.value} {index.location}"
    assert "hunter2-secret" not in shown and "tok-secret" not in shown
    assert "admin:" in shown and "127.0.0.1" in shown
    for bad in ("ftp://admin:hunter2-secret@x", "http://admin:hunter2-secret@x:port"):
        with pytest.raises(ConfigError) as raised_config:
            parse_chroma_url(bad)
        assert "hunter2-secret" not in str(raised_config.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [("http://127.0.0.1:8001", ("127.0.0.1", 8001, False)), ("https://chroma.example", ("chroma.example", 443, True)), ("localhost", ("localhost", 8000, False))],
)
def test_parse_chroma_url(url: str, expected: tuple[str, int, bool]) -> None:
    assert parse_chroma_url(url) == expected


def test_bad_chroma_url() -> None:
    with pytest.raises(ConfigError, match="not an http"):
        parse_chroma_url("ftp://x")
