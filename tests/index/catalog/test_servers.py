"""Server lists: the project's servers.json, Claude-Desktop files, ${VAR} expansion, errors, child env."""

from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path

import pytest

from index.children.containment.environment import system_trust_bundle, with_system_trust
from index.errors import ConfigError
from index.catalog.servers import ServerConfig, load_servers, parse_servers
from index.settings import PROJECT_DIR, livemcpbench_dir

PROJECT_SERVERS = PROJECT_DIR / "servers.json"
ALL_CONFIG = livemcpbench_dir() / "tools/LiveMCPTool/all_config.json"

pytestmark = pytest.mark.timeout(30)


# --- the project's servers.json -----------------------------------------------------------------


@pytest.fixture(scope="module")
def project_servers() -> dict[str, ServerConfig]:
    return load_servers(PROJECT_SERVERS).servers


def test_project_file_lists_the_70_livemcptool_servers(project_servers: dict[str, ServerConfig]) -> None:
    assert len(project_servers) == 70
    for name in ("word-document-server", "mcp-server-chart", "time", "filesystem", "Ant Design Components"):
        assert name in project_servers


def test_project_file_enables_the_52_servers_that_start_here(project_servers: dict[str, ServerConfig]) -> None:
    enabled = [name for name, config in project_servers.items() if config.is_enabled]
    assert len(enabled) == 52
    disabled = [config for config in project_servers.values() if not config.is_enabled]
    assert len(disabled) == 18
    for config in disabled:
        assert config.reason and len(config.reason) > 15, f"{config.name}: a disabled server must say why"


def test_every_project_entry_has_category_and_own_description(project_servers: dict[str, ServerConfig]) -> None:
    descriptions = set()
    for name, config in project_servers.items():
        assert config.category, name
        assert 20 <= len(config.description) <= 200, f"{name}: one line, please"
        assert "\n" not in config.description
        descriptions.add(config.description)
    assert len(descriptions) == 70


def test_project_file_is_pretty_printed_one_block_per_server() -> None:
    text = PROJECT_SERVERS.read_text(encoding="utf-8")
    names = list(json.loads(text)["mcpServers"])
    for name in names:
        assert f'\n    {json.dumps(name)}: {{\n' in text, name


def test_the_committed_catalog_was_crawled_with_each_servers_launch_as_written(
    project_servers: dict[str, ServerConfig],
) -> None:
    # An entry edited without crawling it again is crawled again in the background by every copilot
    # that starts with the committed catalog (its launch hash differs).
    catalog = json.loads((PROJECT_DIR / "index" / "data" / "catalog.json").read_text(encoding="utf-8"))
    stale = sorted(
        name for name, server in catalog["servers"].items() if server["launch_hash"] != project_servers[name].launch_hash()
    )
    assert stale == []


@pytest.mark.skipif(not ALL_CONFIG.is_file(), reason=f"LiveMCPBench data not found at {ALL_CONFIG}")
def test_project_file_follows_livemcpbench_names_order_and_categories(
    project_servers: dict[str, ServerConfig],
) -> None:
    published = json.loads(ALL_CONFIG.read_text(encoding="utf-8"))
    names = [next(iter(entry["config"]["mcpServers"])) for entry in published]
    assert list(project_servers) == names
    for entry in published:
        ((name, launch),) = entry["config"]["mcpServers"].items()
        ours = project_servers[name]
        assert ours.category == entry["category"]
        assert ours.command == launch["command"]
        assert ours.description != entry["description"]
        # Fixes only add to the published launch; the package started stays the same.
        package = next(arg for arg in reversed(launch["args"]) if not arg.startswith("-"))
        assert any(package.split("@")[0] in arg for arg in ours.args), name


def test_file_servers_work_in_the_users_roots_arxiv_keeps_its_published_storage(
    project_servers: dict[str, ServerConfig],
) -> None:
    # The filesystem server is allowed the user's root (the host's roots or COPILOT_ROOTS), not "/".
    filesystem = project_servers["filesystem"]
    assert filesystem.args[-1] == "${COPILOT_ROOT}" and filesystem.works_in == "roots"
    assert filesystem.for_workdir(Path("/w/filesystem"), root=Path("/home/me/project")).args[-1] == "/home/me/project"
    assert filesystem.for_workdir(Path("/w/filesystem")).args[-1] == "/w/filesystem"  # no root known: its own dir
    # pdf-reader-mcp reads only paths relative to its working directory: it runs in the user's root.
    assert project_servers["pdf-reader-mcp"].works_in == "roots"
    assert project_servers["time"].works_in == "own"
    assert project_servers["arxiv-mcp-server"].args[-2:] == ["--storage-path", "./annotated_data/files"]
    assert "./annotated_data/files" in project_servers["arxiv-mcp-server"].description


# --- Claude Desktop files and variables --------------------------------------------------------


def test_claude_desktop_file_with_unknown_keys_loads(tmp_path: Path) -> None:
    config = {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                      "autoApprove": ["read_file"], "alwaysAllow": [], "disabled": False},
            "remote": {"type": "http", "url": "https://example.test/mcp", "headers": {"X-Team": "a"}},
            "old": {"command": "uvx", "args": ["thing"], "disabled": True},
        },
    }
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    servers = load_servers(path, environ={}).servers
    assert list(servers) == ["files", "remote", "old"]
    assert servers["files"].transport == "stdio" and servers["files"].is_enabled
    assert servers["remote"].transport == "streamable-http"
    assert servers["remote"].headers == {"X-Team": "a"}
    assert not servers["old"].is_enabled


def test_variables_expand_with_defaults() -> None:
    text = json.dumps({"mcpServers": {
        "api": {"command": "run-${TOOL}", "args": ["--region", "${REGION:-eu}"],
                "env": {"API_KEY": "${API_KEY}", "MODE": "${MODE:-fast}"}},
        "remote": {"url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
    }})
    servers = parse_servers(text, environ={"TOOL": "x", "API_KEY": "k1", "HOST": "h.test", "TOKEN": "t", "MODE": "slow"}).servers
    assert servers["api"].command == "run-x"
    assert servers["api"].args == ["--region", "eu"]
    assert servers["api"].env == {"API_KEY": "k1", "MODE": "slow"}
    assert servers["remote"].url == "https://h.test/mcp"
    assert servers["remote"].headers == {"Authorization": "Bearer t"}
    # A variable set to "" takes the default, as the shell's ":-" does (it gave ""); without a default it stays "".
    empty = parse_servers(text, environ={"TOOL": "x", "API_KEY": "", "HOST": "h.test", "TOKEN": "t", "REGION": "", "MODE": ""}).servers
    assert empty["api"].args == ["--region", "eu"] and empty["api"].env == {"API_KEY": "", "MODE": "fast"}


def test_missing_variable_disables_the_server_and_says_which() -> None:
    text = json.dumps({"mcpServers": {"api": {"command": "x", "env": {"API_KEY": "${API_KEY}"}}}})
    config = parse_servers(text, environ={}).servers["api"]
    assert not config.is_enabled
    assert "API_KEY" in (config.reason or "")


def test_a_misspelt_key_of_ours_is_named_with_its_line_and_the_key_meant(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Unknown keys are ignored for other hosts' sake, so "enabeld": false would start a server the
    # user turned off without a word: the warning names file, line, server and the key meant.
    text = (
        '{\n "mcpServers": {\n  "a": {\n   "command": "echo",\n   "enabeld": false,\n'
        '   "worksIn": "roots",\n   "autoApprove": [], "envFile": ".env", "serverUrl": "x"\n  }\n }\n}'
    )
    path = tmp_path / "servers.json"
    path.write_text(text, encoding="utf-8")
    with caplog.at_level("WARNING", logger="index.catalog.servers"):
        config = load_servers(path, environ={}).servers["a"]
    assert config.is_enabled  # still ignored: only the warning is new
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        f"{path}:5: server 'a': 'enabeld' is not a known key and is ignored: did you mean 'enabled'?",
        f"{path}:6: server 'a': 'worksIn' is not a known key and is ignored: did you mean 'works_in'?",
    ]


def test_an_invalid_entry_with_a_misspelt_key_suggests_the_key_meant(tmp_path: Path) -> None:
    message = _error_for(tmp_path, json.dumps({"mcpServers": {"a": {"comand": "echo", "args": []}}}, indent=2))
    assert "give either 'command' (stdio) or 'url' (remote)" in message
    assert "'comand' is not a known key: did you mean 'command'?" in message


# --- invalid files -------------------------------------------------------------------------------


def _error_for(tmp_path: Path, text: str) -> str:
    path = tmp_path / "servers.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_servers(path, environ={})
    return str(caught.value)


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    message = _error_for(tmp_path, '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n')
    assert str(tmp_path / "servers.json") in message
    assert ":3:" in message
    assert "not valid JSON" in message


@pytest.mark.parametrize(
    "entry, expected",
    [
        ({"args": ["x"]}, "either 'command'"),
        ({"command": "x", "url": "https://a.test/mcp"}, "not both"),
        ({"command": "x", "args": "--flag"}, "args"),
        ({"command": "x", "env": {"A": 1}}, "env.A"),
        ({"command": "x", "timeout": -5}, "timeout"),
        ({"url": "notaurl"}, "'url' must be an http:// or https:// address"),
        ({"url": "ftp://x.test/mcp"}, "'url' must be an http:// or https:// address"),
        ("npx foo", "expected an object"),
        # Text no process can be given: "embedded null byte" or "illegal environment variable name" at start.
        ({"command": "x", "args": ["a", "b\u0000c"]}, "'args[1]' holds a NUL character, which no process can be given"),
        ({"command": "x\u0000"}, "'command' holds a NUL character"),
        ({"command": "x", "env": {"A": "1\u00002"}}, "'env.A' holds a NUL character"),
        ({"command": "x", "env": {"A=B": "1"}}, "'env' names the variable \"A=B\", which no environment can hold"),
        ({"command": "x", "env": {"": "1"}}, "'env' names the variable \"\", which no environment can hold"),
    ],
)
def test_invalid_entry_names_file_line_and_server(tmp_path: Path, entry: object, expected: str) -> None:
    text = json.dumps({"mcpServers": {"good": {"command": "ok"}, "broken-one": entry}}, indent=2)
    message = _error_for(tmp_path, text)
    assert str(tmp_path / "servers.json") in message
    line = text.splitlines().index('    "broken-one": ' + ("{" if isinstance(entry, dict) else json.dumps(entry) + "")) + 1
    assert f":{line}:" in message
    assert "'broken-one'" in message
    assert expected in message


def test_file_without_mcpservers_says_what_is_expected(tmp_path: Path) -> None:
    message = _error_for(tmp_path, json.dumps({"servers_list": []}))
    assert "mcpServers" in message


@pytest.mark.parametrize("value", [[], "x", 3])
def test_mcpservers_of_the_wrong_type_says_so(tmp_path: Path, value: object) -> None:
    message = _error_for(tmp_path, json.dumps({"mcpServers": value}, indent=2))
    assert f"'mcpServers' must be an object mapping each server's name to its entry (got {type(value).__name__})" in message
    assert ":2:" in message and "keys present" not in message


@pytest.mark.parametrize(
    ("name", "expected"),
    [("", "a server with an empty name"), ("  ", "a server with an empty name"), ("a b/c", "cannot contain '/'")],
)
def test_a_name_route_and_execute_cannot_use_is_refused(tmp_path: Path, name: str, expected: str) -> None:
    text = json.dumps({"mcpServers": {"good": {"command": "ok"}, name: {"command": "ok"}}}, indent=2)
    message = _error_for(tmp_path, text)
    assert f"{tmp_path / 'servers.json'}:6: " in message and expected in message


@pytest.mark.parametrize(
    ("name", "found", "instead"),
    [
        ("evil\x1b]0;pwned\x07", r"found \x07, \x1b", "e.g. 'evil]0;pwned'"),
        ("nul\x00", r"found \x00", "e.g. 'nul'"),
        ("line\nbreak", r"found \n", "e.g. 'linebreak'"),
        ("\ud800x", r"found \ud800", "e.g. 'x'"),  # JSON's "\ud800": no UTF-8 form, no file name
        ("rtl\u202e", r"found \u202e", "e.g. 'rtl'"),
    ],
)
def test_a_name_that_cannot_be_shown_or_written_is_refused_saying_what_is_allowed(
    tmp_path: Path, name: str, found: str, instead: str
) -> None:
    text = json.dumps({"mcpServers": {"good": {"command": "ok"}, name: {"command": "ok"}}}, indent=2)
    message = _error_for(tmp_path, text)
    assert f"{tmp_path / 'servers.json'}:6: server " in message and found in message and instead in message
    assert "use letters, digits, spaces and punctuation" in message
    assert message.isprintable() and "\x1b" not in message  # the name itself is shown escaped


@pytest.mark.parametrize("name", [".", "..", " ... "])
def test_a_name_of_only_dots_is_refused(tmp_path: Path, name: str) -> None:
    text = json.dumps({"mcpServers": {"good": {"command": "ok"}, name: {"command": "ok"}}}, indent=2)
    message = _error_for(tmp_path, text)
    assert f"{tmp_path / 'servers.json'}:6: " in message and "a name cannot be only dots" in message


def test_names_of_any_script_and_punctuation_still_load(tmp_path: Path) -> None:
    names = ["time", "Ant Design Components", "必应搜索", "météo.v2", "a" * 300]
    text = json.dumps({"mcpServers": {name: {"command": "ok"} for name in names}})
    path = tmp_path / "servers.json"
    path.write_text(text, encoding="utf-8")
    assert list(load_servers(path, environ={}).servers) == names


def test_a_server_listed_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    text = '{\n "mcpServers": {\n  "a": {"command": "echo"},\n  "b": {"command": "cat"},\n  "a": {"command": "cat"}\n }\n}'
    message = _error_for(tmp_path, text)
    assert message == (
        f"{tmp_path / 'servers.json'}:5: server 'a' is listed twice (also on line 3); only one entry would be used: "
        "remove or rename the other."
    )


def test_the_server_list_given_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    # json.loads keeps the last "mcpServers": server 'a' of the first one was dropped without a word.
    text = '{\n "mcpServers": {\n  "a": {"command": "echo"}\n },\n "mcpServers": {\n  "b": {"command": "cat"}\n }\n}'
    message = _error_for(tmp_path, text)
    assert message == (
        f"{tmp_path / 'servers.json'}:5: 'mcpServers' is listed twice (also on line 2); only the last one would be "
        "read and the servers of the other lost: merge them into one 'mcpServers' object."
    )


@pytest.mark.parametrize(
    ("entry", "line", "key", "first"),
    [
        ('{\n   "command": "echo",\n   "command": "cat"\n  }', 5, "command", 4),
        ('{\n   "command": "echo",\n   "env": {"A": "1"},\n   "env": {"B": "2"}\n  }', 6, "env", 5),
        ('{\n   "command": "echo",\n   "env": {\n    "A": "1",\n    "A": "2"\n   }\n  }', 7, "env.A", 6),
    ],
)
def test_a_key_given_twice_inside_one_entry_is_refused_naming_both_lines(
    tmp_path: Path, entry: str, line: int, key: str, first: int
) -> None:
    text = '{\n "mcpServers": {\n  "a": ' + entry + "\n }\n}"
    assert _error_for(tmp_path, text) == (
        f"{tmp_path / 'servers.json'}:{line}: server 'a': '{key}' is listed twice (also on line {first}); only the "
        "last would be used: remove the other."
    )


def test_a_servers_list_beside_mcp_servers_is_refused_naming_both_lines(tmp_path: Path) -> None:
    # VS Code's "servers" next to Claude Desktop's "mcpServers": the servers of one were dropped without a word.
    text = '{\n "mcpServers": {\n  "a": {"command": "echo"}\n },\n "servers": {\n  "b": {"command": "cat"}\n }\n}'
    assert _error_for(tmp_path, text) == (
        f"{tmp_path / 'servers.json'}:5: both 'mcpServers' (line 2) and 'servers' are given; only 'mcpServers' "
        "would be read and the servers under 'servers' lost: move them into 'mcpServers' and remove 'servers'."
    )
    # A "servers" key that is not a server list belongs to another host's settings.
    path = tmp_path / "other.json"
    path.write_text('{"servers": ["x"], "mcpServers": {"a": {"command": "echo"}}}', encoding="utf-8")
    assert list(load_servers(path, environ={}).servers) == ["a"]


def test_keys_given_twice_outside_the_server_list_are_not_ours_to_judge(tmp_path: Path) -> None:
    # Another host's settings in the same config file (Claude Desktop's, say) load as they always did.
    text = '{\n "globalShortcut": "a",\n "globalShortcut": "b",\n "mcpServers": {"a": {"command": "echo"}}\n}'
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(text, encoding="utf-8")
    assert list(load_servers(path, environ={}).servers) == ["a"]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"type": "stdio", "url": "https://a.test/mcp"},
            "server 'broken-one': \"type\": \"stdio\" is for a server the copilot starts with a 'command', but the "
            "entry has a 'url' and no 'command': for a remote server set \"type\" to \"http\" (or \"sse\") or remove "
            "it; for a local one give 'command' and 'args' instead of 'url'.",
        ),
        *(
            (
                {"type": kind, "command": "npx", "args": ["-y", "thing"]},
                f"server 'broken-one': \"type\": \"{kind}\" is for a remote server at a 'url', but the entry has a "
                "'command' and no 'url': for a server the copilot starts set \"type\" to \"stdio\" or remove it; for "
                "a remote one give 'url' instead of 'command'.",
            )
            for kind in ("http", "sse", "streamable-http", "streamableHttp")
        ),
        (
            {"type": "stdio", "command": "npx", "url": "https://a.test/mcp"},
            "server 'broken-one': give either 'command' (stdio) or 'url' (remote), not both: its \"type\": \"stdio\" "
            "says the copilot starts it: remove 'url'.",
        ),
        (
            {"type": "http", "command": "npx", "url": "https://a.test/mcp"},
            "server 'broken-one': give either 'command' (stdio) or 'url' (remote), not both: its \"type\": \"http\" "
            "says it is remote: remove 'command' (and 'args').",
        ),
    ],
)
def test_a_type_contradicting_the_entrys_command_or_url_is_refused(
    tmp_path: Path, entry: dict[str, object], expected: str
) -> None:
    # "type": "stdio" with a url was started as a remote server, "type": "http" with a command as a
    # local one: whichever the user meant, one of the two was ignored without a word.
    text = json.dumps({"mcpServers": {"good": {"command": "ok"}, "broken-one": entry}}, indent=2)
    assert _error_for(tmp_path, text) == f"{tmp_path / 'servers.json'}:6: {expected}"


def test_every_type_other_hosts_write_still_loads(tmp_path: Path) -> None:
    entries = {
        "stdio": {"type": "stdio", "command": "npx"},  # Claude Code, Cursor, VS Code
        "no-type": {"command": "npx"},  # Claude Desktop
        "http": {"type": "http", "url": "https://a.test/mcp"},  # Claude Code, VS Code
        "sse": {"type": "sse", "url": "https://a.test/sse"},
        "streamable-http": {"type": "streamable-http", "url": "https://a.test/mcp"},  # Cursor
        "streamableHttp": {"type": "streamableHttp", "url": "https://a.test/mcp"},  # Cline
        "url-only": {"url": "https://a.test/mcp"},
        "own-type": {"type": "local", "command": "npx"},  # a type we do not know: command or url decide, as before
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": entries}), encoding="utf-8")
    servers = load_servers(path, environ={}).servers
    assert {name: config.transport for name, config in servers.items()} == {
        "stdio": "stdio", "no-type": "stdio", "http": "streamable-http", "sse": "sse",
        "streamable-http": "streamable-http", "streamableHttp": "streamable-http", "url-only": "streamable-http",
        "own-type": "stdio",
    }


def test_the_transport_reads_type_as_the_launch_check_does(tmp_path: Path) -> None:
    # A type the launch check does not know leaves the choice to the url, for the transport too (an
    # unknown type used to mean streamable HTTP even for a /sse endpoint); known ones in any spelling.
    entries = {
        "own-type-sse": {"type": "remote", "url": "https://a.test/sse"},
        "own-type-http": {"type": "remote", "url": "https://a.test/mcp"},
        "upper-sse": {"type": "SSE", "url": "https://a.test/events"},
        "http-at-sse": {"type": "Streamable_HTTP", "url": "https://a.test/sse"},
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": entries}), encoding="utf-8")
    servers = load_servers(path, environ={}).servers
    assert {name: config.transport for name, config in servers.items()} == {
        "own-type-sse": "sse", "own-type-http": "streamable-http", "upper-sse": "sse", "http-at-sse": "streamable-http",
    }


def test_the_error_line_is_the_entrys_not_a_nested_key_of_the_same_name(tmp_path: Path) -> None:
    text = (
        '{\n "mcpServers": {\n  "a": {"command": "echo", "env": {"b": "x"}},\n'
        '  "b": {"url": "http://x.test/mcp", "command": "y"}\n }\n}'
    )
    assert f"{tmp_path / 'servers.json'}:4: server 'b': " in _error_for(tmp_path, text)


def test_a_nested_key_is_placed_on_its_own_line_not_on_an_earlier_one_of_the_same_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # "annotations" and "enabeld" appear first inside env (line 5); the entry's own keys are on line 6.
    text = (
        '{\n "mcpServers": {\n  "a": {\n   "command": "echo",\n   "env": {"annotations": "x", "enabeld": "y"},\n'
        '   "annotations": 5, "enabeld": false\n  }\n }\n}'
    )
    assert f"{tmp_path / 'servers.json'}:6: server 'a': 'annotations': " in _error_for(tmp_path, text)
    path = tmp_path / "servers.json"
    path.write_text(text.replace('"annotations": 5, ', ""), encoding="utf-8")
    with caplog.at_level("WARNING", logger="index.catalog.servers"):
        load_servers(path, environ={})
    assert [record.getMessage() for record in caplog.records] == [
        f"{path}:6: server 'a': 'enabeld' is not a known key and is ignored: did you mean 'enabled'?"
    ]


@pytest.mark.parametrize("value", ["Infinity", "NaN", "1e309"])
def test_a_timeout_that_is_not_a_finite_number_is_refused(tmp_path: Path, value: str) -> None:
    text = '{"mcpServers": {"a": {"command": "echo", "timeout": %s}}}' % value
    message = _error_for(tmp_path, text)
    assert "server 'a'" in message and "'timeout'" in message and "finite number" in message


def test_a_file_saved_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    # Notepad and Windows PowerShell's Out-File write UTF-8 with a BOM; json refused it ("not valid JSON").
    path = tmp_path / "servers.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"mcpServers": {"a": {"command": "echo"}}}).encode())
    assert list(load_servers(path, environ={}).servers) == ["a"]


def test_missing_file_says_how_to_choose_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="COPILOT_SERVERS"):
        load_servers(tmp_path / "nope.json")


# --- child environment ---------------------------------------------------------------------------


def test_child_environment_never_contains_parent_secrets() -> None:
    parent = {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "SSL_CERT_FILE": "/etc/ssl/cert.pem", "UV_INDEX_URL": "https://pypi.test/simple",
        "OPENAI_API_KEY": "sk-secret", "ANTHROPIC_API_KEY": "secret", "AWS_SECRET_ACCESS_KEY": "secret",
        "GITHUB_TOKEN": "secret", "COPILOT_API_KEY": "secret", "DATABASE_URL": "postgres://u:p@h/db",
    }
    config = ServerConfig(name="s", command="x", env={"OWN_TOKEN": "given-on-purpose"})
    child = config.child_environment(parent)
    for secret in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN",
                   "COPILOT_API_KEY", "DATABASE_URL"):
        assert secret not in child
    assert "sk-secret" not in json.dumps(child)
    assert child["HOME"] == "/home/u" and child["LC_ALL"] == "C.UTF-8"
    assert child["SSL_CERT_FILE"] == "/etc/ssl/cert.pem" and child["UV_INDEX_URL"].startswith("https://")
    assert child["OWN_TOKEN"] == "given-on-purpose"


def test_child_path_can_find_uvx_from_the_copilots_own_environment() -> None:
    child = ServerConfig(name="s", command="uvx").child_environment({"PATH": "/usr/bin"})
    entries = child["PATH"].split(os.pathsep)
    assert entries[0] == "/usr/bin", "the user's PATH keeps priority"
    assert entries[-1] == sysconfig.get_path("scripts")


def test_server_env_overrides_inherited_values() -> None:
    child = ServerConfig(name="s", command="x", env={"LANG": "de_DE.UTF-8"}).child_environment({"LANG": "C"})
    assert child["LANG"] == "de_DE.UTF-8"


BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def test_a_child_started_without_tls_settings_trusts_the_systems_store() -> None:
    # A host that passes only HOME and PATH (Claude Desktop): uv and Node get the system's roots.
    child = with_system_trust({"PATH": "/usr/bin", "HOME": "/home/u"}, BUNDLE)
    assert child["UV_SYSTEM_CERTS"] == "true"
    assert child["NODE_EXTRA_CA_CERTS"] == BUNDLE


@pytest.mark.parametrize(
    "chosen",
    [
        {"SSL_CERT_FILE": "/corp/roots.pem"},
        {"SSL_CERT_DIR": "/corp/roots"},
        {"UV_SYSTEM_CERTS": "false"},
        {"UV_NATIVE_TLS": "true"},
    ],
)
def test_what_the_user_chose_for_uv_is_kept(chosen: dict[str, str]) -> None:
    child = with_system_trust({"PATH": "/usr/bin", **chosen}, BUNDLE)
    assert {name: child[name] for name in chosen} == chosen
    assert "UV_SYSTEM_CERTS" not in child or "UV_SYSTEM_CERTS" in chosen


def test_nodes_extra_certificates_are_kept_and_an_entry_decides_last() -> None:
    kept = with_system_trust({"NODE_EXTRA_CA_CERTS": "/corp/node.pem"}, BUNDLE)
    assert kept["NODE_EXTRA_CA_CERTS"] == "/corp/node.pem"
    entry = ServerConfig(name="s", command="uvx", env={"UV_SYSTEM_CERTS": "false"})
    assert entry.child_environment({"PATH": "/usr/bin"})["UV_SYSTEM_CERTS"] == "false"


def test_a_linux_machine_without_a_store_gets_nothing_added(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.platform", "linux")
    assert with_system_trust({"PATH": "/usr/bin"}, None) == {"PATH": "/usr/bin"}


def test_the_child_environment_uses_this_machines_store() -> None:
    bundle = system_trust_bundle()
    if bundle is None:
        pytest.skip("this machine has no system certificate bundle in the usual places")
    child = ServerConfig(name="s", command="uvx").child_environment({"PATH": "/usr/bin"})
    assert child["NODE_EXTRA_CA_CERTS"] == bundle and child["UV_SYSTEM_CERTS"] == "true"


def test_launch_hash_changes_only_with_the_launch() -> None:
    base = ServerConfig(name="s", command="uvx", args=["a"], description="one")
    assert base.launch_hash() == base.model_copy(update={"description": "two", "category": "c"}).launch_hash()
    assert base.launch_hash() != base.model_copy(update={"args": ["a", "--flag"]}).launch_hash()
    assert base.launch_hash() != base.model_copy(update={"env": {"X": "1"}}).launch_hash()


# --- unset or empty variables in 'command'/'url', late placeholders' defaults, malformed placeholders -----


GOOD = {"command": "echo", "args": ["hi"]}


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "${MY_SERVER_BIN}", "args": ["--stdio"]},
        {"command": "${MY_SERVER_BIN}/serve"},
        {"url": "https://${MY_MCP_HOST}/mcp"},
        {"url": "${MY_MCP_HOST}"},
        {"type": "http", "url": "${MY_MCP_HOST}", "headers": {"X-Team": "a"}},
    ],
)
def test_an_unset_variable_in_command_or_url_disables_that_server_and_the_rest_load(entry: dict) -> None:
    text = json.dumps({"mcpServers": {"good": GOOD, "mine": entry}})
    servers = parse_servers(text, environ={}).servers
    assert servers["good"].is_enabled
    mine = servers["mine"]
    assert not mine.is_enabled
    assert mine.reason == f"environment variable(s) not set: {'MY_SERVER_BIN' if 'command' in entry else 'MY_MCP_HOST'}"


@pytest.mark.parametrize(
    ("entry", "key"),
    [({"command": "${MY_SERVER_BIN}"}, "command"), ({"url": "https://${MY_MCP_HOST}/mcp"}, "url")],
)
def test_a_variable_set_to_an_empty_string_in_command_or_url_is_named(entry: dict, key: str) -> None:
    text = json.dumps({"mcpServers": {"good": GOOD, "mine": entry}})
    servers = parse_servers(text, environ={"MY_SERVER_BIN": "", "MY_MCP_HOST": ""}).servers
    assert servers["good"].is_enabled and not servers["mine"].is_enabled
    variable = "MY_SERVER_BIN" if key == "command" else "MY_MCP_HOST"
    assert servers["mine"].reason == f"environment variable(s) set to an empty string: {variable} (its '{key}' needs a value)"


#: "ünï" as Python reads it from the environment under a locale that is not UTF-8 (LC_ALL=C, PYTHONUTF8=0).
_UTF8_READ_AS_ASCII = "ünï".encode().decode("ascii", "surrogateescape")


def test_a_variable_whose_value_is_not_utf8_disables_that_server_and_the_rest_load() -> None:
    # Its lone surrogates stopped the whole file with a UnicodeEncodeError traceback (the copilot did not start).
    text = json.dumps({"mcpServers": {"good": GOOD, "mine": {"command": "run", "env": {"TOKEN": "${BAD_BYTES}"}},
                                      "url": {"url": "https://${BAD_BYTES}/mcp"}}})
    servers = parse_servers(text, environ={"BAD_BYTES": "bad\udcffbytes"}).servers
    assert servers["good"].is_enabled and not servers["mine"].is_enabled and not servers["url"].is_enabled
    expected = "environment variable(s) not UTF-8 text: BAD_BYTES (a child is given text; set them to UTF-8)"
    assert servers["mine"].reason == expected and servers["url"].reason == expected


def test_a_utf8_value_read_under_a_locale_that_is_not_utf8_reaches_the_child_as_text() -> None:
    text = json.dumps({"mcpServers": {"mine": {"command": "run", "args": ["${NAME}"], "env": {"API_KEY": "${NAME}"}}}})
    config = parse_servers(text, environ={"NAME": _UTF8_READ_AS_ASCII}).servers["mine"]
    assert config.is_enabled and config.args == ["ünï"] and config.env == {"API_KEY": "ünï"}


@pytest.mark.parametrize(
    ("entry", "field", "line"),
    [
        ({"command": "run", "args": ["ok", "x\ud800"]}, "'args[1]'", 5),
        ({"command": "run", "env": {"TOKEN": "a\udcffb"}}, "'env.TOKEN'", 6),
        ({"command": "run\udc00"}, "'command'", 4),
        ({"url": "https://h.test/\ud800"}, "'url'", 4),
    ],
)
def test_a_lone_surrogate_in_an_entry_is_refused_naming_file_line_server_and_field(
    tmp_path: Path, entry: dict, field: str, line: int
) -> None:
    # Accepted before, and every start of the child failed with "UnicodeEncodeError ... position 118".
    message = _error_for(tmp_path, json.dumps({"mcpServers": {"mine": entry}}, indent=1))
    assert f"servers.json:{line}: server 'mine': {field} holds a lone UTF-16 surrogate" in message, message
    assert "which UTF-8 cannot carry to the child" in message


def test_an_entry_wrong_in_itself_is_still_refused_when_a_variable_is_unset(tmp_path: Path) -> None:
    message = _error_for(tmp_path, json.dumps({"mcpServers": {"mine": {"type": "http", "command": "${MY_SERVER_BIN}"}}}))
    assert "server 'mine'" in message and "is for a remote server at a 'url'" in message


def test_late_placeholders_take_their_default_form() -> None:
    text = json.dumps({"mcpServers": {"fx": {
        "command": "run", "args": ["${COPILOT_SERVER_DIR:-unused}", "${COPILOT_ROOT:-/fallback}"],
        "env": {"RT": "${COPILOT_ROOT:-}", "SD": "${COPILOT_SERVER_DIR}"}, "cwd": "${COPILOT_ROOT:-/srv}",
    }}})
    config = parse_servers(text, environ={}).servers["fx"]
    assert config.args == ["${COPILOT_SERVER_DIR:-unused}", "${COPILOT_ROOT:-/fallback}"]  # filled in at start
    alone = config.for_workdir(Path("/w/fx"))
    assert alone.args == ["/w/fx", "/fallback"] and alone.env == {"RT": "", "SD": "/w/fx"} and alone.cwd == "/srv"
    rooted = config.for_workdir(Path("/w/fx"), root=Path("/home/me"))
    assert rooted.args == ["/w/fx", "/home/me"] and rooted.env == {"RT": "/home/me", "SD": "/w/fx"}
    assert rooted.cwd == "/home/me"


def test_malformed_placeholders_are_warned_about_once_per_entry_naming_file_line_and_placeholder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = (
        '{\n "mcpServers": {\n  "n": {\n   "command": "echo",\n'
        '   "env": {\n    "OK": "${PROBE_SET}",\n    "NESTED": "${PROBE_UNSET:-${PROBE_SET}}",\n'
        '    "UNTERMINATED": "${PROBE_SET"\n   }\n  },\n  "fine": {"command": "echo", "args": ["${PROBE_SET:-x}"]}\n }\n}'
    )
    path = tmp_path / "servers.json"
    path.write_text(text, encoding="utf-8")
    with caplog.at_level("WARNING", logger="index.catalog.servers"):
        servers = load_servers(path, environ={"PROBE_SET": "val1"}).servers
    assert servers["n"].is_enabled and servers["fine"].is_enabled  # warned, not refused
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        f"{path}:7: server 'n': placeholder(s) the child gets as written: "
        "'env.NESTED': '${PROBE_UNSET:-${PROBE_SET}}' nests a placeholder in a default, which is not supported; "
        "'env.UNTERMINATED': '${PROBE_SET' has no closing '}'; "
        "write ${VAR} or ${VAR:-default} (a default is plain text, without another placeholder)."
    ]


@pytest.mark.timeout(5)
def test_looking_for_malformed_placeholders_stays_fast_on_long_values() -> None:
    text = json.dumps({"mcpServers": {"n": {"command": "echo", "args": ["${" * 50_000, "${A:-" * 20_000]}}})
    assert parse_servers(text, environ={}).servers["n"].is_enabled
