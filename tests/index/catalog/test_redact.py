"""Secrets filled in from the environment are shown as their placeholders; URL credentials are masked."""

from __future__ import annotations

import json

import pytest

from index.catalog.redact import MASK, Redactor, redact_text, redact_url
from index.catalog.servers import parse_servers

KEY = "sk-live-0123456789"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:hunter22@example.test/mcp", f"https://user:{MASK}@example.test/mcp"),
        ("https://tok3n@example.test/mcp", f"https://{MASK}@example.test/mcp"),
        ("https://example.test/mcp?api_key=abc&page=2", f"https://example.test/mcp?api_key={MASK}&page=2"),
        ("https://example.test/sse?access_token=abc", f"https://example.test/sse?access_token={MASK}"),
        ("https://example.test/mcp?page=2", "https://example.test/mcp?page=2"),
        ("not a url", "not a url"),
    ],
)
def test_redact_url_masks_credentials_and_secret_query_values(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_redactor_replaces_longest_secret_first_and_masks_urls_in_text() -> None:
    redact = Redactor({"abcd": "${SHORT}", "abcdef-long": "${LONG}", "ab": "${TOO_SHORT}"})
    text = "got abcdef-long and abcd; ab stays; see http://u:pw@h.test/x?token=zz"
    assert redact(text) == f"got ${{LONG}} and ${{SHORT}}; ab stays; see http://u:{MASK}@h.test/x?token={MASK}"
    assert redact_text("plain words") == "plain words"


def test_server_entry_shows_placeholders_not_the_values_it_was_filled_with() -> None:
    text = json.dumps(
        {
            "mcpServers": {
                "stdio": {"command": "npx", "args": ["-y", "pkg", "--api-key", "${API_KEY}"]},
                "remote": {"url": "https://${HOST:-example.test}/mcp?key=${API_KEY}"},
                "creds": {"url": "https://bot:${PASSWORD}@example.test/mcp"},
            }
        }
    )
    servers = parse_servers(text, environ={"API_KEY": KEY, "PASSWORD": "pa55word!"}).servers
    assert servers["stdio"].args[-1] == KEY  # the child still gets the real value
    assert servers["stdio"].display_command == "npx -y pkg --api-key ${API_KEY}"
    assert KEY not in servers["remote"].display_url
    assert servers["remote"].display_url.startswith("https://example.test/mcp?key=")  # a default is not a secret
    assert servers["creds"].display_target == f"https://bot:{MASK}@example.test/mcp"
    assert servers["stdio"].redact(f"usage: unrecognized arguments: --api-key {KEY}") == (
        "usage: unrecognized arguments: --api-key ${API_KEY}"
    )
    # A disabled copy (an unset variable elsewhere) keeps what it must redact.
    copy = servers["stdio"].model_copy(update={"enabled": False})
    assert copy.display_command == servers["stdio"].display_command


def test_literal_secrets_of_env_and_headers_are_masked_by_name_and_length() -> None:
    entry = {
        "command": "npx",
        "args": ["-y", "brave-search"],
        "env": {
            "BRAVE_API_KEY": "BSA-literal-0123456789",  # Claude Desktop's usual form: no ${VAR}
            "SESSION_ID": "sess-98765432",
            "GH_PAT": "ghp_abcdefgh12345",
            "PGPASSWORD": "tiny",  # too short to hunt for in free text
            "TRANSPORT": "stdio-long-value",  # not a secret's name
        },
    }
    remote = {
        "url": "https://example.test/mcp",
        "headers": {"Authorization": "Bearer tok-header-555555", "X-Api-Key": "xkey-7777777", "Accept": "application/json"},
    }
    servers = parse_servers(json.dumps({"mcpServers": {"s": entry, "r": remote}}), environ={}).servers
    said = "key BSA-literal-0123456789 session sess-98765432 pat ghp_abcdefgh12345 pw tiny transport stdio-long-value"
    assert servers["s"].redact(said) == (
        "key <env BRAVE_API_KEY> session <env SESSION_ID> pat <env GH_PAT> pw tiny transport stdio-long-value"
    )
    said = "sent Bearer tok-header-555555; token tok-header-555555 and xkey-7777777 as application/json"
    assert servers["r"].redact(said) == (
        "sent <header Authorization>; token <header Authorization> and <header X-Api-Key> as application/json"
    )
    assert servers["s"].env["BRAVE_API_KEY"] == "BSA-literal-0123456789"  # the child still gets it
