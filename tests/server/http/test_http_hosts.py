"""The Host names a loopback copilot answers, the Origins it admits, and how its URL is written (server.http.guard)."""

from __future__ import annotations

import pytest

from server.http.guard import _host_name, loopback_host_names, origin_allowed, transport_security, url_host
from server.settings import ServerSettings


@pytest.mark.parametrize(
    ("header", "name"),
    [("localhost:8000", "localhost"), ("127.0.0.1", "127.0.0.1"), ("[::1]:8000", "[::1]"), ("[::1]", "[::1]"),
     ("Attacker.Example:80", "attacker.example"), ("", "")],
)
def test_the_name_in_a_host_header_is_read_without_its_port(header: str, name: str) -> None:
    assert _host_name(header) == name


@pytest.mark.parametrize(("bound", "extra"), [("127.0.0.2", "127.0.0.2"), ("::1", "[::1]"), ("127.0.0.1", "127.0.0.1")])
def test_a_loopback_copilot_answers_the_address_it_is_bound_to(tmp_path, bound: str, extra: str) -> None:
    settings = ServerSettings(home=tmp_path, http_host=bound)
    names = loopback_host_names(settings)
    assert {"localhost", "127.0.0.1", "[::1]", extra} <= names and "::1" not in names
    # The SDK's own check on /mcp allows the same names (it refused 127.0.0.2 before: 421 on every request).
    assert f"{extra}:*" in transport_security(settings).allowed_hosts


def test_ipv6_hosts_are_bracketed_in_urls() -> None:
    assert (url_host("::1"), url_host("[::1]"), url_host("127.0.0.1"), url_host("localhost")) == (
        "[::1]", "[::1]", "127.0.0.1", "localhost",
    )


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [("http://example.com:8080", True), ("HTTP://Example.COM:443", True), ("http://example.com.evil.net", False),
     ("http://example.com.evil.net:8080", False), ("http://example.community:8080", False), ("https://example.com:8080", False)],
)
def test_an_origin_with_any_port_admits_that_host_on_every_port_and_no_host_it_prefixes(origin: str, allowed: bool) -> None:
    # "http://example.com:*" must not admit a page of example.com.evil.net, which starts with the same letters.
    assert origin_allowed(origin, ["http://example.com:*"]) is allowed
