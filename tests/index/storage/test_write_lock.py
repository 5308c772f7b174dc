"""One writer of an index at a time (index.storage.write_lock): a second build waits for the first,
then works on what it left; a writer waiting too long is told who holds the index."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import anyio
import pytest
from tests.index.index_support import make_catalog, make_records, open_index

from index.settings import CopilotSettings
from index.storage.build import build_index
from index.storage.build_report import BuildReport
from index.storage.file_lock import LockBusyError
from index.storage.write_lock import index_write_lock

pytestmark = pytest.mark.timeout(300)


async def test_a_second_build_waits_for_the_writer_then_leaves_exactly_its_own_catalog(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Two builds at once each computed their changes from the store as they found it: the store kept
    # both catalogs, and the next build of either said "nothing changed".
    caplog.set_level(logging.WARNING, logger="index.storage.file_lock")
    settings = CopilotSettings(home=tmp_path / "home")
    records = make_records()
    first = make_catalog(records).save(tmp_path / "first.json")
    second = make_catalog(records[:2]).save(tmp_path / "second.json")
    build_index(first, settings, show_progress=False)
    reports: list[BuildReport] = []

    def build_second() -> None:
        reports.append(build_index(second, settings, show_progress=False))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            with index_write_lock(settings.index_dir):  # another writer, as a second process would be
                group.start_soon(anyio.to_thread.run_sync, build_second)
                while not any("another process is writing the index" in r.getMessage() for r in caplog.records):
                    await anyio.sleep(0.01)
                assert reports == []  # it waits
    [report] = reports
    assert report.total == 2 and report.removed == len(records) - 2
    [waiting] = [r.getMessage() for r in caplog.records if "another process is writing the index" in r.getMessage()]
    assert f"(pid {os.getpid()} (" in waiting and "waiting up to 1800 s" in waiting
    assert sorted(open_index(settings.home).records()) == sorted(r.id for r in records[:2])


def test_a_writer_that_waits_too_long_is_told_who_holds_the_index(tmp_path: Path) -> None:
    errors: list[LockBusyError] = []

    def second_writer() -> None:
        try:
            with index_write_lock(tmp_path, wait=0.3):
                pass
        except LockBusyError as error:
            errors.append(error)

    with index_write_lock(tmp_path), index_write_lock(tmp_path):  # re-entrant in one thread
        thread = threading.Thread(target=second_writer)
        thread.start()
        thread.join(timeout=60)
    [error] = errors
    assert str(error).startswith(f"another process is writing the index in {tmp_path.resolve()} (pid {os.getpid()} (")
    assert str(error).endswith("and did not finish within 0.3 s. Wait for it to finish, or stop it, then run this again.")
    with index_write_lock(tmp_path, wait=0):  # released: taken at once
        pass


def test_the_holder_is_named_as_it_was_started(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under -m, argv[0] is the package's __main__.py: the holder read "(__main__.py build)".
    from index.storage import file_lock  # noqa: PLC0415

    monkeypatch.setattr("sys.argv", ["/opt/app/index/__main__.py", "build", "--catalog", "x.json"])
    assert file_lock._program() == "python -m index build"
    monkeypatch.setattr("sys.argv", ["/usr/local/bin/mcp-copilot", "--http"])
    assert file_lock._program() == "mcp-copilot --http"
    monkeypatch.setattr("sys.argv", [""])
    assert file_lock._program() == "python"
