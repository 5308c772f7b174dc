"""Annotation overrides and confirm lists in servers files (index.trust.overrides), and the corrected
entries shipped in the project's servers.json for the LiveMCPTool servers."""

from __future__ import annotations

import json

import pytest

from index.errors import ConfigError
from index.catalog.records import load_catalog
from index.catalog.servers import load_servers, parse_servers
from index.settings import DEFAULT_CATALOG, PROJECT_DIR
from index.trust.overrides import effective_annotations, override_for, unknown_override_names
from server.policy import Policy


def _entry(**extra: object) -> str:
    return json.dumps({"mcpServers": {"a": {"command": "x"}, "excel": {"command": "y", **extra}}}, indent=1)


def test_an_exact_name_wins_over_a_glob() -> None:
    servers = parse_servers(
        _entry(annotations={"*": {"readOnlyHint": True}, "write*": {"readOnlyHint": False}, "write_all": {"destructiveHint": True}})
    ).servers["excel"]
    assert override_for(servers.annotations, "read") == {"readOnlyHint": True}
    assert override_for(servers.annotations, "write_all") == {"readOnlyHint": False, "destructiveHint": True}
    merged = effective_annotations({"read_only_hint": False, "title": "T"}, servers.annotations, "read")
    assert merged == {"title": "T", "readOnlyHint": True}


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        ({"annotations": {"excel_read_sheet": {"readOnly": True}}}, "excel_read_sheet", "unknown hint(s) 'readOnly'; use"),
        ({"annotations": {"excel_read_sheet": {"readOnlyHint": "yes"}}}, "readOnlyHint", "Input should be a valid boolean"),
        ({"annotations": ["excel_read_sheet"]}, "annotations", "'annotations': Input should be a valid dictionary"),
        ({"confirm": "excel_write"}, "confirm", "'confirm': Input should be a valid list"),
    ],
)
def test_bad_overrides_fail_with_file_line_and_what_is_wrong(extra: dict, key: str, message: str) -> None:
    text = _entry(**extra)
    line = next(number for number, content in enumerate(text.splitlines(), 1) if f'"{key}"' in content)
    assert line > 4  # the key's own line, not the server's
    with pytest.raises(ConfigError) as caught:
        parse_servers(text, source="servers.json")
    assert str(caught.value).startswith(f"servers.json:{line}: server 'excel': ")
    assert message in str(caught.value)


def test_the_shipped_overrides_name_real_tools_and_correct_excel() -> None:
    servers = load_servers(PROJECT_DIR / "servers.json").servers
    catalog = load_catalog(DEFAULT_CATALOG)
    tools: dict[str, list[str]] = {}
    for record in catalog.tools:
        tools.setdefault(record.server, []).append(record.name)
    for name, config in servers.items():
        assert unknown_override_names(config.annotations, tools.get(name, [])) == [], name

    policy = Policy(servers=servers)
    claimed = {r.name: r.annotations for r in catalog.tools if r.server == "excel"}
    assert all(a["destructiveHint"] for a in claimed.values())  # what excel says of all six tools
    assert not policy.assess("excel", "excel_read_sheet", claimed["excel_read_sheet"]).needs_confirmation
    assert not policy.assess("excel", "excel_describe_sheets", claimed["excel_describe_sheets"]).needs_confirmation
    assert policy.assess("excel", "excel_write_to_sheet", claimed["excel_write_to_sheet"]).needs_confirmation
    assert policy.assess("desktop-commander", "write_file", None).needs_confirmation  # unannotated, corrected

    read_only = Policy(servers=servers, read_only=True)
    allowed = [r.id for r in catalog.tools if read_only.read_only_permits(r.server, r.name, r.annotations)]
    declared = [r.id for r in catalog.tools if (r.annotations or {}).get("readOnlyHint") is True]
    assert "desktop-commander/write_file" not in allowed and "excel/excel_read_sheet" in allowed
    assert len(allowed) > len(declared)
