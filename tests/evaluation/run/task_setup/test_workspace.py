"""Per-task workspaces: task-file copies, /root mapping, servers-file rewriting, change listing."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation.run.task_setup.child_home import child_environment
from evaluation.run.task_setup.workspace import (
    copy_task_files,
    diff,
    map_question,
    missing_inputs,
    rewrite_servers,
    snapshot,
    text_preview,
    write_task_servers,
)
from index.errors import ConfigError
from index.settings import livemcpbench_dir


@pytest.fixture()
def task_files(tmp_path: Path) -> Path:
    """A miniature annotated_data: read-only files like the shared copy, plus metadata to skip."""
    root = tmp_path / "annotated_data"
    (root / "excel").mkdir(parents=True)
    (root / "excel" / "goods.xlsx").write_bytes(b"PK\x03\x04binary")
    (root / "txt").mkdir()
    (root / "txt" / "log.txt").write_text("line one\n", encoding="utf-8")
    (root / "markdown").mkdir()
    (root / "markdown" / ".gitkeep").write_text("")
    (root / "all_annotations.json").write_text("[]")
    (root / ".DS_Store").write_text("junk")
    (root / "notes.txt").write_text("top-level task file")
    for path in sorted(root.rglob("*"), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    root.chmod(0o555)
    yield root
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_copy_makes_writable_copies_and_skips_metadata(task_files: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    warnings = copy_task_files(task_files, workspace)
    assert warnings == []
    assert (workspace / "excel" / "goods.xlsx").read_bytes() == b"PK\x03\x04binary"
    assert (workspace / "notes.txt").read_text() == "top-level task file"
    assert (workspace / "markdown").is_dir()
    assert not (workspace / "all_annotations.json").exists()
    assert not (workspace / ".DS_Store").exists()
    # Tasks write next to their inputs: copies and directories must be writable.
    (workspace / "txt" / "new.md").write_text("ok")
    (workspace / "txt" / "log.txt").write_text("changed")
    assert (task_files / "txt" / "log.txt").read_text() == "line one\n"
    assert stat.S_IMODE((workspace / "excel").stat().st_mode) & stat.S_IWUSR


def test_copy_replaces_a_previous_workspace(task_files: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    copy_task_files(task_files, workspace)
    (workspace / "leftover.txt").write_text("from an interrupted attempt")
    copy_task_files(task_files, workspace)
    assert not (workspace / "leftover.txt").exists()


def test_copy_never_copies_the_run_into_itself(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "pdf").mkdir(parents=True)
    (data / "pdf" / "a.pdf").write_bytes(b"%PDF")
    out = data / "runs" / "r1"
    out.mkdir(parents=True)
    (data / "tasks.json").write_text("[]")
    workspace = out / "tasks" / "t1" / "workspace"
    copy_task_files(data, workspace, skip={out, data / "tasks.json"})
    assert sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*")) == ["pdf", "pdf/a.pdf"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_bundle_is_cloned_as_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.test"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("hello")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    data = tmp_path / "data"
    data.mkdir()
    subprocess.run([*git, "bundle", "create", str(data / "git.bundle"), "--all"], check=True, capture_output=True)
    workspace = tmp_path / "ws"
    assert copy_task_files(data, workspace) == []
    assert (workspace / "git" / "README.md").read_text() == "hello"
    assert (workspace / "git" / ".git").is_dir()
    assert not (workspace / "git.bundle").exists()


def test_broken_bundle_is_a_warning_not_an_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "git.bundle").write_text("not a bundle")
    warnings = copy_task_files(data, tmp_path / "ws")
    assert len(warnings) == 1 and "git.bundle" in warnings[0]


def test_missing_inputs_names_only_absent_root_paths(task_files: Path) -> None:
    assert missing_inputs("/root/excel/goods.xlsx", task_files) == []
    assert missing_inputs("/root/txt/log.txt, /root/music/a.wav", task_files) == ["/root/music/a.wav"]
    assert missing_inputs("", task_files) == []
    assert missing_inputs("/root/markdown", task_files) == []
    assert missing_inputs("/root/excel/goods.xlsx", None) == ["/root/excel/goods.xlsx"]


def test_map_question_replaces_root_paths_only(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    question = "Read /root/txt/log.txt and save /root/ppt/apple.pptx. Also list /root. Not /rooted/x or a/root/b."
    mapped = map_question(question, workspace)
    assert f"{workspace}/txt/log.txt" in mapped
    assert f"{workspace}/ppt/apple.pptx." in mapped
    assert f"list {workspace}." in mapped
    assert "/rooted/x" in mapped and "a/root/b" in mapped


def _servers(**entries: dict) -> dict:
    return {"mcpServers": entries}


def test_rewrite_points_root_arguments_at_the_workspace(tmp_path: Path, task_files: Path) -> None:
    workspace = tmp_path / "ws"
    existing = tmp_path / "some-dir"
    existing.mkdir()
    script = tmp_path / "server.py"
    script.write_text("")
    servers = _servers(
        filesystem={"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/"], "description": "fs"},
        arxiv={"command": "uv", "args": ["tool", "run", "arxiv-mcp-server", "--storage-path", "./annotated_data/files"]},
        excel={"command": "npx", "args": ["--yes", "@negokaz/excel-mcp-server"], "env": {"OUT": "/root/excel", "N": "4"}},
        rooted={"command": "srv", "args": ["--data-dir=/root/data", str(existing), "/root/pdf/x.pdf"]},
        shared={"command": "srv", "args": [str(task_files / "txt")]},
        launcher={"command": "uv", "args": ["--directory", str(existing), "run", "./server.py"], "cwd": str(tmp_path)},
        timezone={"command": "uvx", "args": ["mcp-server-time", "--local-timezone=America/New_York"]},
        remote={"url": "https://example.test/mcp"},
    )
    rewritten, rewrites = rewrite_servers(servers, workspace, task_files, base_cwd=tmp_path)
    entries = rewritten["mcpServers"]
    assert entries["filesystem"]["args"][-1] == str(workspace)
    assert entries["filesystem"]["description"] == "fs"
    assert entries["arxiv"]["args"][-1] == str(workspace / "files")
    assert entries["excel"]["env"] == {"OUT": str(workspace / "excel"), "N": "4"}
    assert entries["rooted"]["args"] == [f"--data-dir={workspace / 'data'}", str(workspace), str(workspace / "pdf/x.pdf")]
    assert entries["shared"]["args"] == [str(workspace / "txt")]
    # Where a server's code lives is never redirected; a relative script keeps working from the new cwd.
    assert entries["launcher"]["args"] == ["--directory", str(existing), "run", str(script)]
    assert entries["timezone"]["args"] == ["mcp-server-time", "--local-timezone=America/New_York"]
    assert entries["remote"] == {"url": "https://example.test/mcp"}
    for name, entry in entries.items():
        if name != "remote":
            assert entry["cwd"] == str(workspace), name
    changed = {r.server for r in rewrites}
    assert changed == {"filesystem", "arxiv", "excel", "rooted", "shared", "launcher"}


def test_rewrite_never_escapes_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    rewritten, _ = rewrite_servers(
        _servers(s={"command": "srv", "args": ["/root/../../etc"]}), workspace, None, base_cwd=tmp_path
    )
    assert rewritten["mcpServers"]["s"]["args"] == [str(workspace)]


def test_rewrite_gives_every_stdio_child_the_task_home(tmp_path: Path) -> None:
    workspace = tmp_path / "task" / "workspace"
    home = tmp_path / "task" / "home"
    task_env = child_environment(home, {"npm_config_cache": "/real/.npm", "UV_CACHE_DIR": "/real/.cache/uv"})
    servers = _servers(
        plain={"command": "npx", "args": ["-y", "some-server"]},
        excel={"command": "npx", "args": ["excel"], "env": {"OUT": "/root/excel", "UV_CACHE_DIR": "/mine/uv"}},
        notes={"command": "uvx", "args": ["notes"], "env": {"HOME": "/srv/notes"}},
        remote={"url": "https://example.test/mcp"},
    )
    rewritten, rewrites = rewrite_servers(servers, workspace, None, base_cwd=tmp_path, child_env=task_env)
    entries = rewritten["mcpServers"]
    assert entries["plain"]["env"] == task_env
    assert entries["excel"]["env"] == {**task_env, "OUT": str(workspace / "excel"), "UV_CACHE_DIR": "/mine/uv"}
    assert entries["notes"]["env"]["HOME"] == "/srv/notes" and "XDG_DATA_HOME" not in entries["notes"]["env"]
    assert entries["notes"]["env"]["npm_config_cache"] == "/real/.npm"
    assert entries["remote"] == {"url": "https://example.test/mcp"}
    # Only what was redirected into the workspace is reported as a rewrite, not the common env.
    assert {(r.server, tuple(r.env)) for r in rewrites} == {("excel", ("OUT",))}


def test_the_copilot_starts_children_with_the_task_home(tmp_path: Path) -> None:
    from index.catalog.servers import load_servers

    source = tmp_path / "servers.json"
    source.write_text(json.dumps(_servers(fx={"command": sys.executable, "args": ["-c", "pass"]})))
    target = tmp_path / "task" / "servers.json"
    home = tmp_path / "task" / "home"
    write_task_servers(source, target, tmp_path / "task" / "workspace", None, tmp_path, child_environment(home, {}))
    child = load_servers(target).servers["fx"].child_environment({"HOME": "/real", "PATH": "/usr/bin"})
    assert child["HOME"] == str(home) and child["XDG_CONFIG_HOME"] == str(home / ".config")


def test_write_task_servers_reports_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "servers.json"
    bad.write_text('{"mcpServers": {"a": ')
    with pytest.raises(ConfigError, match=r"servers.json:1:\d+: not valid JSON"):
        write_task_servers(bad, tmp_path / "out.json", tmp_path / "ws", None, tmp_path)
    bad.write_text('{"other": {}}')
    with pytest.raises(ConfigError, match="no 'mcpServers'"):
        write_task_servers(bad, tmp_path / "out.json", tmp_path / "ws", None, tmp_path)


def test_a_servers_file_saved_with_a_bom_is_rewritten_per_task(tmp_path: Path) -> None:
    # The run's start-up load accepts a byte order mark; before, every task's rewrite then refused the file.
    from index.catalog.servers import load_servers

    source = tmp_path / "servers.json"
    source.write_bytes(b"\xef\xbb\xbf" + json.dumps(_servers(fx={"command": sys.executable})).encode())
    target = tmp_path / "task" / "servers.json"
    write_task_servers(source, target, tmp_path / "task" / "workspace", None, tmp_path)
    assert set(load_servers(source).servers) == set(load_servers(target).servers) == {"fx"}


def test_every_task_is_derived_from_the_servers_file_as_the_run_read_it(tmp_path: Path) -> None:
    # Before, each task re-read the file: an edit during a run (a server added, a broken entry) reached
    # the later tasks only, unchecked.
    from index.catalog.servers import load_servers

    source = tmp_path / "servers.json"
    source.write_text(json.dumps(_servers(fx={"command": sys.executable})))
    at_start = load_servers(source)
    source.write_text('{"mcpServers": {"fx": {"command": "x"}, "added": {"command": "y"}, ')
    target = tmp_path / "task" / "servers.json"
    write_task_servers(source, target, tmp_path / "ws", None, tmp_path, text=at_start.text)
    assert set(load_servers(target).servers) == {"fx"}


def test_rewritten_file_is_accepted_by_the_copilot_loader(tmp_path: Path) -> None:
    from index.catalog.servers import load_servers

    source = tmp_path / "servers.json"
    source.write_text(
        json.dumps(_servers(fx={"command": sys.executable, "args": ["-c", "pass"], "env": {"T": "${HOME}"}}))
    )
    target = tmp_path / "task" / "servers.json"
    write_task_servers(source, target, tmp_path / "ws", None, tmp_path)
    loaded = load_servers(target)
    assert loaded.servers["fx"].cwd == str(tmp_path / "ws")
    assert loaded.servers["fx"].env["T"] == os.environ["HOME"]  # ${VAR} survives for the copilot to expand


def test_diff_lists_created_modified_and_deleted_files(task_files: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    copy_task_files(task_files, workspace)
    before = snapshot(workspace)
    (workspace / "markdown" / "report.md").write_text("# Report\nAll good.\n", encoding="utf-8")
    (workspace / "txt" / "log.txt").write_text("line one\nline two\n", encoding="utf-8")
    (workspace / "excel" / "goods.xlsx").unlink()
    (workspace / "figs").mkdir()
    (workspace / "figs" / "sale.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (workspace / "notes.txt").write_text("top-level task file")  # rewritten with the same content
    changes = diff(workspace, before)
    by_path = {f.path: f for f in changes.files}
    assert set(by_path) == {"/root/markdown/report.md", "/root/txt/log.txt", "/root/excel/goods.xlsx", "/root/figs/sale.png"}
    assert by_path["/root/markdown/report.md"].change == "created"
    assert by_path["/root/markdown/report.md"].preview == "# Report\nAll good.\n"
    assert by_path["/root/markdown/report.md"].size == len("# Report\nAll good.\n")
    assert by_path["/root/txt/log.txt"].change == "modified"
    assert by_path["/root/excel/goods.xlsx"].change == "deleted"
    assert by_path["/root/figs/sale.png"].preview is None
    assert changes.root == str(workspace)


def test_diff_ignores_git_internals_and_can_show_relative_paths(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "git" / ".git").mkdir(parents=True)
    before = snapshot(workspace)
    (workspace / "git" / ".git" / "index").write_bytes(b"\x00")
    (workspace / "git" / "file.txt").write_text("x")
    changes = diff(workspace, before, display_root=None)
    assert [f.path for f in changes.files] == ["git/file.txt"]


def test_text_preview_is_bounded_and_utf8_aware(tmp_path: Path) -> None:
    path = tmp_path / "long.md"
    path.write_text("é" * 5000, encoding="utf-8")
    preview = text_preview(path, limit=100)
    assert preview is not None and preview.startswith("é" * 100) and preview.endswith("…")
    binary = tmp_path / "blob"
    binary.write_bytes(bytes(range(256)))
    assert text_preview(binary) is None


LIVEMCPBENCH = livemcpbench_dir() / "annotated_data"
PROJECT_SERVERS = Path(__file__).resolve().parents[4] / "servers.json"


@pytest.mark.skipif(not LIVEMCPBENCH.is_dir(), reason="LiveMCPBench data not present (set COPILOT_LIVEMCPBENCH_DIR or put it at ../shared/livemcpbench)")
def test_livemcpbench_task_files_and_project_servers(tmp_path: Path) -> None:
    from evaluation.run.tasks import load_tasks

    workspace = tmp_path / "ws"
    assert copy_task_files(LIVEMCPBENCH, workspace, skip={LIVEMCPBENCH / "all_annotations.json"}) == []
    assert (workspace / "excel" / "goods.xlsx").is_file() and (workspace / "git" / ".git").is_dir()
    tasks = load_tasks(LIVEMCPBENCH / "all_annotations.json")
    assert len(tasks) == 95
    missing = {t.task_id[:8]: missing_inputs(t.file_name, LIVEMCPBENCH) for t in tasks}
    assert {k for k, v in missing.items() if v} == {"99d7541a", "fa451c3f", "31086c2d"}  # music and WebArena.pdf
    if PROJECT_SERVERS.is_file():
        rewrites = write_task_servers(PROJECT_SERVERS, tmp_path / "servers.json", workspace, LIVEMCPBENCH, tmp_path)
        changed = {r.server: r.args for r in rewrites}
        # filesystem works in the user's root (${COPILOT_ROOT}): the runner's COPILOT_ROOTS, not a rewrite.
        assert "filesystem" not in changed
        assert changed["arxiv-mcp-server"] == [("./annotated_data/files", str(workspace / "files"))]


@pytest.mark.timeout(30)  # before the fix the snapshot blocked for good opening the pipe: this bounds that
def test_a_named_pipe_in_the_workspace_is_listed_never_opened(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    before = snapshot(workspace)
    os.mkfifo(workspace / "out.pipe")
    (workspace / "report.txt").write_text("done")
    after = snapshot(workspace)
    assert after["out.pipe"].digest == "special:fifo"
    assert text_preview(workspace / "out.pipe") is None
    by_path = {f.path: f for f in diff(workspace, before, after).files}
    assert (by_path["/root/out.pipe"].change, by_path["/root/out.pipe"].preview) == ("created", None)
    assert by_path["/root/report.txt"].preview == "done"


def test_a_symlinked_directory_below_the_top_level_is_copied_with_its_files(tmp_path: Path) -> None:
    # os.walk does not follow directory links: docs/shared was copied as an empty directory, silently.
    (tmp_path / "elsewhere" / "deeper").mkdir(parents=True)
    (tmp_path / "elsewhere" / "report.txt").write_text("the report")
    (tmp_path / "elsewhere" / "deeper" / "more.txt").write_text("more")
    data = tmp_path / "data"
    (data / "docs").mkdir(parents=True)
    (data / "docs" / "own.txt").write_text("own")
    (data / "docs" / "shared").symlink_to(tmp_path / "elsewhere")
    (data / "docs" / "again").symlink_to(tmp_path / "elsewhere")  # a second link to it is copied too
    (data / "docs" / "loop").symlink_to(data / "docs")  # a link back up must not copy forever
    workspace = tmp_path / "ws"
    warnings = copy_task_files(data, workspace)
    files = sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file())
    assert files == [
        "docs/again/deeper/more.txt", "docs/again/report.txt", "docs/own.txt", "docs/shared/deeper/more.txt",
        "docs/shared/report.txt",
    ]  # fmt: skip
    assert not (workspace / "docs" / "shared").is_symlink()  # a copy: the task may write into it
    assert warnings == [f"{data / 'docs' / 'loop'}: a symbolic link to a directory it is inside of; not copied again"]


def test_a_dangling_link_or_a_pipe_in_the_task_files_is_left_out_with_a_warning(tmp_path: Path) -> None:
    # A dangling link anywhere failed the copy, so every task of the run failed as "workspace".
    data = tmp_path / "data"
    (data / "txt").mkdir(parents=True)
    (data / "txt" / "notes.txt").write_text("hi")
    (data / "txt" / "broken.txt").symlink_to(tmp_path / "nowhere")
    (data / "gone.txt").symlink_to(tmp_path / "nowhere")
    os.mkfifo(data / "txt" / "feed.pipe")
    workspace = tmp_path / "ws"
    warnings = copy_task_files(data, workspace)
    assert (workspace / "txt" / "notes.txt").read_text() == "hi"
    assert sorted(p.name for p in workspace.rglob("*")) == ["notes.txt", "txt"]
    assert warnings == [
        f"{data / 'gone.txt'}: a symbolic link to {tmp_path / 'nowhere'}, which leads to no file; not copied",
        f"{data / 'txt' / 'broken.txt'}: a symbolic link to {tmp_path / 'nowhere'}, which leads to no file; not copied",
        f"{data / 'txt' / 'feed.pipe'}: a special file (fifo), not a regular file; not copied",
    ]
    # A task that names it as its input is refused as for any missing input.
    assert missing_inputs("/root/txt/broken.txt", data) == ["/root/txt/broken.txt"]


def test_an_input_path_leading_out_of_root_is_missing(tmp_path: Path, caplog) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "secret.txt").write_text("outside the task files")
    # It exists next to the task files, but no workspace can hold it: it was reported present.
    assert missing_inputs("/root/../secret.txt, /root/a/../../secret.txt", data) == [
        "/root/../secret.txt (outside /root)", "/root/a/../../secret.txt (outside /root)",
    ]  # fmt: skip
    assert "leads outside /root" in caplog.text
    (data / "b.txt").write_text("inside")
    assert missing_inputs("/root/a/../b.txt", data) == []
