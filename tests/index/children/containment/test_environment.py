"""What a real child inherits: no registry tokens, passwords or proxy credentials unless its entry opts in."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from index.children.connect import open_session
from index.children.containment.environment import (
    has_url_credentials,
    inherited_environment,
    looks_secret_name,
    strip_url_credentials,
    system_trust_bundle,
)
from index.catalog.servers import ServerConfig

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "fixture_server.py"

pytestmark = pytest.mark.timeout(60)

#: Inherited prefixes carrying credentials, as a developer's shell has them.
CREDENTIALS = {
    "UV_PUBLISH_TOKEN": "pypi-publish-token-1",
    "UV_PUBLISH_PASSWORD": "uv-password-2",
    "UV_INDEX_PRIVATE_PASSWORD": "index-password-3",
    "npm_config__authToken": "npm-auth-token-4",
    "npm_config_//registry.example.com/:_authToken": "npm-scoped-token-5",
    "NPM_CONFIG__AUTH": "bnBtLWJhc2ljLWF1dGgtNg==",
    "PIP_INDEX_URL": "https://alice:pip-password-7@pypi.example.com/simple",
    "HTTPS_PROXY": "http://bob:proxy-password-8@proxy.example.com:3128",
    "UV_INDEX": "private=https://carol:uv-index-password-9@uv.example.com/simple",
}
#: Registry *read* settings that must still reach the child.
READ_SETTINGS = {"UV_CACHE_DIR": "/tmp/uv-cache", "npm_config_registry": "https://registry.npmjs.org/"}


async def _child_environment(config: ServerConfig, tmp_path: Path) -> dict[str, str]:
    with anyio.fail_after(45):
        async with open_session(config, workdir=tmp_path / "work") as connection:
            assert connection.initialize_result.server_info.name == config.name
    return json.loads((tmp_path / "env.json").read_text(encoding="utf-8"))["env"]


def _dumping(name: str, tmp_path: Path, **extra: object) -> ServerConfig:
    args = [str(FIXTURE), "--name", name, "--dump-env", str(tmp_path / "env.json")]
    return ServerConfig(name=name, command=sys.executable, args=args, **extra)


async def test_child_gets_registry_settings_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**CREDENTIALS, **READ_SETTINGS}.items():
        monkeypatch.setenv(name, value)
    env = await _child_environment(_dumping("plain", tmp_path), tmp_path)
    dumped = json.dumps(env)
    for value in CREDENTIALS.values():
        secret = value.split("@")[0].rsplit(":", 1)[-1]  # the password part of a URL, or the whole value
        assert secret not in dumped, f"{secret} reached the child"
    for name in ("UV_PUBLISH_TOKEN", "UV_PUBLISH_PASSWORD", "npm_config__authToken", "NPM_CONFIG__AUTH"):
        assert name not in env
    # The URLs still work for reading, without their credentials.
    assert env["PIP_INDEX_URL"] == "https://pypi.example.com/simple"
    assert env["HTTPS_PROXY"] == "http://proxy.example.com:3128"
    assert env["UV_INDEX"] == "private=https://uv.example.com/simple"
    for name, value in READ_SETTINGS.items():
        assert env[name] == value


async def test_an_entry_opts_in_to_the_credentials_it_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PRIVATE_REGISTRY_TOKEN", "not-on-the-allowlist-10")
    config = _dumping("private", tmp_path, inherit_env=["HTTPS_PROXY", "UV_INDEX_*", "PRIVATE_REGISTRY_TOKEN"])
    env = await _child_environment(config, tmp_path)
    assert env["HTTPS_PROXY"] == CREDENTIALS["HTTPS_PROXY"]
    assert env["UV_INDEX_PRIVATE_PASSWORD"] == CREDENTIALS["UV_INDEX_PRIVATE_PASSWORD"]
    assert env["PRIVATE_REGISTRY_TOKEN"] == "not-on-the-allowlist-10"
    assert "UV_PUBLISH_TOKEN" not in env  # what it did not list stays out


#: What says which certificates uv and Node trust (cleared, as a host with a minimal environment has them).
TRUST_SETTINGS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "UV_SYSTEM_CERTS", "UV_NATIVE_TLS", "NODE_EXTRA_CA_CERTS")


@pytest.mark.parametrize("copilot_sets", [None, "SSL_CERT_FILE"])
async def test_a_child_of_a_copilot_without_tls_settings_trusts_the_system_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copilot_sets: str | None
) -> None:
    bundle = system_trust_bundle()
    if bundle is None:
        pytest.skip("this machine has no system certificate bundle in the usual places")
    for name in TRUST_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    if copilot_sets:
        monkeypatch.setenv(copilot_sets, "/corp/roots.pem")
    env = await _child_environment(_dumping("tls", tmp_path), tmp_path)
    assert env["NODE_EXTRA_CA_CERTS"] == bundle
    if copilot_sets:  # uv already reads the user's roots
        assert env[copilot_sets] == "/corp/roots.pem" and "UV_SYSTEM_CERTS" not in env
    else:
        assert env["UV_SYSTEM_CERTS"] == "true"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("UV_PUBLISH_TOKEN", True),
        ("npm_config__authToken", True),
        ("npm_config_//registry.npmjs.org/:_authToken", True),
        ("GITHUBTOKEN", True),
        ("NPM_CONFIG_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("PGPASSWORD", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("npm_config_init_author_name", False),
        ("UV_KEYRING_PROVIDER", False),
        ("UV_CACHE_DIR", False),
        ("XDG_CONFIG_HOME", False),
    ],
)
def test_secret_names_are_recognized_by_their_words(name: str, secret: bool) -> None:
    assert looks_secret_name(name) is secret


def test_url_credentials_are_removed_from_every_url_in_a_value() -> None:
    value = "a=https://u:p@one.example/simple b=https://token@two.example/x c=https://three.example/"
    stripped = "a=https://one.example/simple b=https://two.example/x c=https://three.example/"
    assert strip_url_credentials(value) == stripped
    assert strip_url_credentials("me@example.com") == "me@example.com"


@pytest.mark.parametrize(
    ("name", "value", "stripped"),
    [
        ("HTTPS_PROXY", "alice:hunter2pw@proxy.corp:3128", "proxy.corp:3128"),
        ("http_proxy", "bob@proxy.corp:8080", "proxy.corp:8080"),
        ("ALL_PROXY", "a:b@one.corp:1, c@two.corp:2", "one.corp:1, two.corp:2"),
        ("HTTP_PROXY", "proxy.corp:3128", "proxy.corp:3128"),
        ("no_proxy", "me@example.com", "me@example.com"),
        ("PIP_INDEX_URL", "https://pypi.corp/simple?access_token=abc&page=2", "https://pypi.corp/simple?access_token=&page=2"),
        ("UV_INDEX", "https://pypi.corp/simple?apiKey=abc#frag", "https://pypi.corp/simple?apiKey=#frag"),
        ("PIP_INDEX_URL", "https://pypi.corp/simple?page=2", "https://pypi.corp/simple?page=2"),
    ],
)
def test_proxy_userinfo_without_a_scheme_and_secret_query_parameters_are_removed(
    name: str, value: str, stripped: str
) -> None:
    assert strip_url_credentials(value, name) == stripped


def test_a_child_does_not_inherit_a_proxy_password_written_without_a_scheme() -> None:
    source = {"PATH": "/usr/bin", "HTTPS_PROXY": "alice:hunter2pw@proxy.corp:3128", "EMAIL_NOT_INHERITED": "x"}
    child = inherited_environment(source)
    assert child["HTTPS_PROXY"] == "proxy.corp:3128"
    assert "hunter2pw" not in "".join(child.values())


#: Passwords holding '@': the userinfo runs to the last '@' before the host, as urllib reads it.
AT_SIGN_PASSWORDS = {
    "HTTPS_PROXY": ("http://alice:p@ssw0rd@proxy.example:3128", "http://proxy.example:3128"),
    "PIP_INDEX_URL": ("https://alice:hunter@2secret@pypi.example/simple", "https://pypi.example/simple"),
    "http_proxy": ("alice:pa@ss@proxy.example:3128", "proxy.example:3128"),
    "UV_INDEX": ("a=https://u:x@y@one.example/s b=https://t@k@two.example/", "a=https://one.example/s b=https://two.example/"),
    "ALL_PROXY": ("a:b@c@one.corp:1, d@e@two.corp:2", "one.corp:1, two.corp:2"),
}


@pytest.mark.parametrize("name", sorted(AT_SIGN_PASSWORDS))
def test_a_password_holding_an_at_sign_is_removed_whole(name: str) -> None:
    value, stripped = AT_SIGN_PASSWORDS[name]
    assert strip_url_credentials(value, name) == stripped
    assert has_url_credentials(value, name)  # what the copilot blanks in its own /proc environ


async def test_a_child_gets_no_part_of_a_password_holding_an_at_sign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, (value, _stripped) in AT_SIGN_PASSWORDS.items():
        monkeypatch.setenv(name, value)
    env = await _child_environment(_dumping("at-sign", tmp_path), tmp_path)
    for name, (_value, stripped) in AT_SIGN_PASSWORDS.items():
        assert env[name] == stripped
    dumped = json.dumps(env)
    for part in ("ssw0rd", "2secret", "pa@ss", "alice"):
        assert part not in dumped, f"{part} reached the child"


@pytest.mark.timeout(5)
@pytest.mark.parametrize("name", ["HTTPS_PROXY", "PIP_INDEX_URL"])
@pytest.mark.parametrize(
    "value",
    ["a@" * 50_000, "@" * 100_000, "http://" + "a@" * 50_000, "a." * 50_000 + "@", "http://a@" * 12_000, ("ab" + "@" * 8) * 10_000],
)
def test_stripping_stays_linear_on_long_values_full_of_at_signs(name: str, value: str) -> None:
    stripped = strip_url_credentials(value, name)
    assert len(stripped) <= len(value)
