"""ToolIndex on a real Chroma store in a temp dir with the real bundled model."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from tests.index.index_support import (
    CountingEmbedder,
    index_with_broken_model,
    make_records,
    open_index,
    repair_model,
)

import index.search.model_loading as model_loading
import index.search.text as text_module
import index.search.tool_index as tool_index_module
from index.models.embedding import Embedder, EmbeddingModelError, bundled_model_path
from index.errors import CatalogError, IndexNotBuiltError, QueryError
from index.catalog.records import ToolRecord
from index.search.ranking import HYBRID
from index.search.gloss import has_chinese
from index.search.tool_index import ToolIndex
from index.usage.prior import UsagePrior, write_usage_prior

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def index(built_home: Path) -> ToolIndex:
    opened = open_index(built_home)
    opened.warm()
    return opened


def top(index: ToolIndex, query: str, k: int = 3, **options: object) -> list[tuple[str, str]]:
    return [(hit.server, hit.tool) for hit in index.search(query, top_k=k, **options)]  # type: ignore[arg-type]


def test_unbuilt_index_says_how_to_build_and_loads_nothing(tmp_path: Path) -> None:
    fresh = Embedder()
    unbuilt = open_index(tmp_path, fresh)
    with pytest.raises(IndexNotBuiltError, match="python -m index build"):
        unbuilt.search("weather")
    assert unbuilt.records() == {} and unbuilt.get("time", "convert_time") is None
    assert unbuilt.tool_count == 0 and not unbuilt.built
    unbuilt.warm()  # a copilot's start-up: nothing to search, so the model waits for a build
    assert not fresh.loaded


def test_jiebas_dictionary_is_loaded_only_for_an_index_with_chinese(
    tmp_path: Path, built_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Loading it costs ~1.5 s of CPU: an English index's copilot, warming or routing, must not pay it.
    segmented: list[str] = []
    real_segment = text_module.segment_cjk
    monkeypatch.setattr(text_module, "segment_cjk", lambda run: segmented.append(run) or real_segment(run))
    english_records = [r for r in make_records() if not has_chinese(r.description + r.server_description)]
    english = open_index(tmp_path)
    english.sync(english_records, catalog="tests", catalog_digest="english")
    english.warm()
    # Its Chinese can match no document's words; the English still does, by words and by meaning.
    assert top(english, "天气预报 weather forecast", k=1) == [("weather", "get_weather_forecast")]
    assert segmented == [], segmented

    chinese = open_index(built_home)
    chinese.warm()
    assert segmented == ["预热"]  # loaded at start-up, not during the first Chinese query
    assert top(chinese, "必应搜索网页", k=1) == [("bing-cn", "bing_search")]


def test_records_state_and_lookup(index: ToolIndex) -> None:
    records = index.records()
    assert index.tool_count == len(make_records()) == len(records)
    assert "word-document-server/convert_to_pdf" in records
    record = index.get("maps", "get_directions")
    assert record is not None and record.required == ["origin", "destination"]
    assert index.get("maps", "nope") is None
    state = index.state()
    assert state is not None and state.model == "all-MiniLM-L6-v2 (int8)" and state.catalog_digest == "abc"
    assert index.model_name == "all-MiniLM-L6-v2 (int8)"


@pytest.mark.parametrize(
    ("query", "expected", "within"),
    [
        ("convert a word document to pdf", ("word-document-server", "convert_to_pdf"), 1),
        ("make a word cloud of the most frequent words", ("chart", "generate_word_cloud_chart"), 1),
        ("what will the weather be like in Paris tomorrow", ("weather", "get_weather_forecast"), 2),
        ("show me what files are in this folder", ("filesystem", "list_directory"), 2),
        ("find a parking spot near the Louvre", ("maps", "search_nearby_places"), 2),
        ("what time is it in Tokyo", ("time", "get_current_time"), 2),
    ],
)
def test_plain_queries_find_the_tool(index: ToolIndex, query: str, expected: tuple[str, str], within: int) -> None:
    assert expected in top(index, query, k=within)


def test_hits_carry_schema_required_parameters_and_scores(index: ToolIndex) -> None:
    hits = index.search("insert a picture into a Word file", top_k=4)
    assert len(hits) == 4
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    first = hits[0]
    assert (first.server, first.tool) == ("word-document-server", "add_picture")
    assert first.required == ["filename", "image_path"]
    assert first.input_schema["properties"]["image_path"] == {"type": "string"}
    assert first.description.startswith("Insert an image")
    assert first.annotations == {"readOnlyHint": False}


def test_tool_assistant_server_part_steers_the_ranking(index: ToolIndex) -> None:
    def ask(server: str) -> list[tuple[str, str]]:
        return top(index, f"<tool_assistant>\nserver: {server}\ntool: create a new one\n</tool_assistant>", k=2)

    assert {s for s, _ in ask("file system and directory management")} == {"filesystem"}
    assert ("word-document-server", "create_document") in ask("office documents like Microsoft Word")
    assert ("word-document-server", "create_document") not in ask("file system and directory management")


def test_chinese_query_matches_chinese_descriptions(index: ToolIndex) -> None:
    assert top(index, "必应搜索网页", k=1) == [("bing-cn", "bing_search")]
    assert top(index, "查询我的八字信息", k=1) == [("bazi", "getBaziDetail")]
    assert top(index, "今天的黄历", k=1) == [("bazi", "getChineseCalendar")]


def test_server_filter_and_allow_list(index: ToolIndex) -> None:
    hits = index.search("create something new", top_k=10, server="filesystem")
    assert hits and {h.server for h in hits} == {"filesystem"}
    assert len(hits) == 5  # every filesystem tool, no more
    allowed = index.search("chart of the time", top_k=10, servers={"chart", "time", "not-indexed"})
    assert {h.server for h in allowed} <= {"chart", "time"} and len(allowed) == 6
    assert index.search("weather", servers={"not-indexed"}) == []
    assert index.search("weather", server="weather", servers={"time"}) == []


def test_unknown_server_filter_suggests_names(index: ToolIndex) -> None:
    with pytest.raises(QueryError, match=r"no server named 'filesystm'.*Did you mean 'filesystem'"):
        index.search("read a file", server="filesystm")


def test_top_k_and_bad_queries(index: ToolIndex) -> None:
    assert len(index.search("weather", top_k=1)) == 1
    assert len(index.search("weather", top_k=100)) == len(make_records())
    for bad in ("", "   ", "!!!"):
        with pytest.raises(QueryError):
            index.search(bad)
    with pytest.raises(QueryError, match="top_k"):
        index.search("weather", top_k=0)


def test_concurrent_searches_match_sequential_ones(index: ToolIndex) -> None:
    queries = ["convert to pdf", "weather forecast", "必应搜索", "list files", "bar chart", "timezone"] * 3
    expected = [top(index, q, k=5) for q in queries]
    results: dict[int, list[tuple[str, str]]] = {}
    errors: list[BaseException] = []

    def run(position: int, query: str) -> None:
        try:
            results[position] = top(index, query, k=5)
        except BaseException as error:  # noqa: BLE001 -- reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, q)) for i, q in enumerate(queries)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    assert [results[i] for i in range(len(queries))] == expected


def _changed(records: list[ToolRecord]) -> tuple[list[ToolRecord], ToolRecord, ToolRecord, ToolRecord]:
    removed = next(r for r in records if r.name == "get_air_quality")
    updated = next(r for r in records if r.name == "generate_pie_chart")
    added = ToolRecord(
        server="chart",
        name="generate_radar_chart",
        description="Generate a radar chart comparing several variables on axes from one centre.",
        server_description=updated.server_description,
        category=updated.category,
    )
    new_updated = updated.model_copy(update={"description": "Generate a donut or pie chart of shares of a total."})
    kept = [r for r in records if r.id not in (removed.id, updated.id)]
    return [*kept, new_updated, added], removed, new_updated, added


def test_rebuild_embeds_only_changes_and_deletes_what_disappeared(tmp_path: Path) -> None:
    counting = CountingEmbedder()
    index = open_index(tmp_path, counting)
    records = make_records()
    index.sync(records)
    assert len(counting.embedded) == len(records) + 8  # every tool, plus one document per server

    counting.embedded.clear()
    changed, removed, updated, added = _changed(records)
    report = index.sync(changed)
    assert (report.added, report.updated, report.removed, report.unchanged) == (1, 1, 1, len(records) - 2)
    tool_texts = [t for t in counting.embedded if not t.startswith(("chart:", "weather:"))]
    assert len(tool_texts) == 2
    assert any("radar chart" in t for t in tool_texts) and any("donut" in t for t in tool_texts)
    # Both touched servers' documents list their tools, so exactly those two are re-embedded.
    assert sorted(t.split(":")[0] for t in counting.embedded if t not in tool_texts) == ["chart", "weather"]
    assert report.servers_embedded == 2

    assert index.get(removed.server, removed.name) is None
    assert index.get("chart", "generate_radar_chart") is not None
    assert index.tool_count == len(records)
    assert ("chart", "generate_radar_chart") in top(index, "radar chart with several axes", k=1)
    assert all(h.tool != "get_air_quality" for h in index.search("air quality pollution", top_k=30))


def test_unchanged_rebuild_does_not_load_the_model(built_home: Path) -> None:
    fresh = Embedder()
    report = open_index(built_home, fresh).sync(make_records(), catalog="tests", catalog_digest="abc")
    assert not report.changed and report.unchanged == len(make_records())
    assert not fresh.loaded


def test_partial_sync_only_deletes_within_its_servers(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    records = make_records()
    index.sync(records)
    time_tools = [r for r in records if r.server == "time" and r.name != "convert_time"]
    report = index.sync(time_tools, servers={"time"})
    assert (report.removed, report.unchanged, report.added) == (1, 1, 0)
    assert index.tool_count == len(records) - 1
    report = index.sync([], servers={"bazi"})
    assert report.removed == 2 and report.servers_removed == 1
    assert "bazi" not in index.server_names()


def test_skipped_tools_are_kept_per_server_and_another_instance_sees_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = make_records()
    writer, reader = open_index(tmp_path), open_index(tmp_path)
    broken = {"lookup": "inputSchema: Field required", "export": "inputSchema.type: should be 'object' (got 'string')"}
    writer.sync(records, skipped={"time": broken, "maps": {"route": "inputSchema: Field required"}})
    assert reader.skipped_tools("time") == broken and reader.skipped_tools("weather") == {}

    # Nothing but the skipped tools changes: other processes still learn it (a new build id).
    monkeypatch.setattr(tool_index_module, "STALE_CHECK_SECONDS", 0.0)
    report = writer.sync([r for r in records if r.server == "time"], servers=["time"], skipped={"time": {}})
    assert not report.changed
    assert reader.skipped_tools("time") == {} and reader.skipped_tools("maps") == {"route": "inputSchema: Field required"}

    # A sync that says nothing of them keeps them; a tool indexed now is no longer skipped.
    fixed = ToolRecord(server="maps", name="route", description="Plan a route between two places.")
    writer.sync([*[r for r in records if r.server == "maps"], fixed], servers=["maps"])
    assert reader.skipped_tools("maps") == {} and reader.get("maps", "route") is not None
    # A full sync (no servers) replaces them all.
    writer.sync([*records, fixed], skipped={"weather": {"old": "inputSchema: Field required"}})
    assert reader.skipped_tools("weather") == {"old": "inputSchema: Field required"} and reader.skipped_tools("time") == {}


def test_another_instance_sees_a_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = make_records()
    reader = open_index(tmp_path)
    writer = open_index(tmp_path)
    writer.sync(records)
    assert reader.tool_count == len(records)
    changed, *_ = _changed(records)
    writer.sync(changed)
    monkeypatch.setattr(tool_index_module, "STALE_CHECK_SECONDS", 0.0)
    assert reader.get("chart", "generate_radar_chart") is not None


def test_a_sync_that_finds_its_records_written_by_another_instance_reads_them_at_once(tmp_path: Path) -> None:
    """Two copilots on one home index the same new server: the second finds nothing to write, and
    its searches must see the first one's build now, not after the stale check."""
    records = make_records()
    first, second = open_index(tmp_path), open_index(tmp_path)
    old = [r for r in records if r.server != "chart"]
    first.sync(old)
    assert second.get("chart", "generate_bar_chart") is None  # second holds a snapshot of that build
    first.sync(records)
    report = second.sync([r for r in records if r.server == "chart"], servers=["chart"])
    assert not report.changed
    assert second.get("chart", "generate_bar_chart") is not None


def test_index_built_with_another_model_is_not_searched(built_home: Path) -> None:
    # A fresh embedder: the process-wide one for this name may have been loaded by another test.
    directory = str(bundled_model_path())
    other = open_index(built_home, Embedder(directory), embedding_model=directory)
    assert other.model_name != "all-MiniLM-L6-v2 (int8)"
    with pytest.raises(IndexNotBuiltError, match=re.escape("built with the embedding model 'all-MiniLM-L6-v2 (int8)'")):
        other.search("weather")
    assert not other.embedder.loaded


def test_index_built_in_int8_is_not_searched_in_float32(built_home: Path) -> None:
    """Quantized and float32 vectors of one text differ: switching precision asks for a rebuild."""
    other = open_index(built_home, Embedder(precision="float32"), embedding_precision="float32")
    assert other.model_name == "all-MiniLM-L6-v2"
    with pytest.raises(IndexNotBuiltError, match="COPILOT_EMBEDDING_PRECISION") as raised:
        other.search("weather")
    assert "-m index build" in str(raised.value) and "COPILOT_EMBEDDING_PRECISION=float32" in str(raised.value)
    assert not other.embedder.loaded


def test_repeated_queries_reuse_their_embedding(built_home: Path) -> None:
    counting = CountingEmbedder()
    index = open_index(built_home, counting)
    first = index.search("<tool_assistant>\nserver: maps\ntool: driving directions\n</tool_assistant>")
    assert counting.queries == ["driving directions", "maps"]  # one batch for both parts
    again = index.search("<tool_assistant>\nserver: maps\ntool: driving directions\n</tool_assistant>")
    index.search("driving directions", server="maps")
    assert counting.queries == ["driving directions", "maps"] and again == first


def test_an_empty_catalog_builds_an_empty_index(tmp_path: Path) -> None:
    index = open_index(tmp_path, Embedder())
    report = index.sync([])
    assert report.total == 0 and index.built and index.tool_count == 0
    assert index.search("weather") == []


def test_importing_the_api_loads_no_heavy_library() -> None:
    code = (
        "import sys, index.search.tool_index, index.storage.build, index.cli.search, index.catalog.livemcpbench\n"
        "from index import ToolIndex, SearchHit\n"
        "heavy = [m for m in ('torch', 'chromadb', 'sentence_transformers', 'jieba', 'bm25s') if m in sys.modules]\n"
        "print(heavy)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"


def test_duplicate_tools_are_rejected(tmp_path: Path) -> None:
    records = make_records()
    with pytest.raises(CatalogError, match="appears twice"):
        open_index(tmp_path, Embedder()).sync([*records, records[0]])


def test_english_query_meets_a_chinese_description_through_the_gloss(index: ToolIndex) -> None:
    # "almanac" is nowhere in getChineseCalendar's name or (Chinese) description, only in its gloss.
    assert top(index, "almanac for today", k=1) == [("bazi", "getChineseCalendar")]
    assert ("bing-cn", "bing_search") in top(index, "search the web with Bing", k=2)


def test_route_flags_weak_matches_and_suggests_related_servers(index: ToolIndex) -> None:
    good = index.route("what will the weather be like in Paris tomorrow")
    assert not good.weak and good.mode == "hybrid" and good.related_servers == []
    weak = index.route("order a pizza for delivery to my office")
    assert weak.weak and weak.hits  # still answered, but flagged
    assert weak.related_servers and set(weak.related_servers) <= set(index.server_names())
    assert weak.related_categories


def test_route_trims_hits_far_below_the_best(index: ToolIndex) -> None:
    untrimmed = index.route("convert a word document to pdf", top_k=10, trim=False)
    trimmed = index.route("convert a word document to pdf", top_k=10)
    assert len(untrimmed.hits) == 10 and untrimmed.trimmed == 0
    assert trimmed.hits == untrimmed.hits[: len(trimmed.hits)]
    assert trimmed.trimmed == 10 - len(trimmed.hits)
    assert trimmed.hits[0].tool == "convert_to_pdf"
    # search() is the plain API: always top_k.
    assert len(index.search("convert a word document to pdf", top_k=10)) == 10


def test_first_routes_are_lexical_while_the_model_loads(built_home: Path) -> None:
    """A fresh process's first route does not wait for the model: BM25 answers, the load starts."""
    fresh = Embedder()  # real model, not loaded yet (the process-wide one may be)
    index = open_index(built_home, fresh)
    # Holding the embedder's load lock keeps the background load from finishing meanwhile.
    with fresh._load_lock:  # noqa: SLF001 -- deterministic "still loading" without timing
        first = index.route("convert a word document to pdf", wait_for_model=False)
        assert first.mode == "lexical-startup"
        assert first.hits[0].tool == "convert_to_pdf"
        assert not first.weak
        # Only tools sharing a word with the query: no padding with tools of score 0.
        few = index.route("air quality", top_k=5, wait_for_model=False)
        assert [(hit.tool, hit.score > 0) for hit in few.hits] == [("get_air_quality", True)]
        # No word in common with any tool: nothing (semantic search may still find something, so
        # this is not a weak match saying the pool has no such tool).
        nothing = index.route("zzqx 🕒", wait_for_model=False)
        assert nothing.mode == "lexical-startup" and nothing.hits == [] and not nothing.weak
        # Only words many tools contain ("create", "for"): answered, but flagged as a weak match
        # (with no related servers: those come from the model).
        common = index.route("create an invoice for a client", wait_for_model=False)
        assert common.mode == "lexical-startup" and common.hits and common.weak and common.related_servers == []
        assert not index.route("air quality", wait_for_model=False).weak
        loader = index.model_loader.thread  # the background load the first route started
        assert loader is not None and loader.is_alive() and index.model_loader.attempts == 1
        assert first.model_failure is None
    loader.join(timeout=240)
    assert not loader.is_alive() and fresh.loaded
    later = index.route("convert a word document to pdf", wait_for_model=False)
    assert later.mode == "hybrid" and later.hits[0].tool == "convert_to_pdf"


def test_a_model_that_fails_to_load_is_reported_and_retried_with_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken model used to leave route "still loading" forever; now it says why and retries."""
    model, home = index_with_broken_model(tmp_path)
    monkeypatch.setattr(model_loading, "RETRY_SECONDS", (0.0, 3600.0))
    index = open_index(home, Embedder(str(model)), embedding_model=str(model))
    loader = index.model_loader

    def settle() -> None:
        assert loader.thread is not None
        loader.thread.join(timeout=120)
        assert not loader.thread.is_alive()

    assert index.route("air quality", wait_for_model=False).mode == "lexical-startup"
    settle()
    failed = index.route("air quality", top_k=5, wait_for_model=False)
    assert failed.mode == "lexical-fallback" and failed.model_failure is not None
    assert f"cannot load the embedding model from {model}" in failed.model_failure.reason
    assert [hit.tool for hit in failed.hits] == ["get_air_quality"]  # keyword answers go on, unpadded
    # That route was due for a retry (delay 0 after one failure): it started the second attempt.
    settle()
    assert loader.attempts == 2 and loader.failure is not None and loader.failure.attempts == 2
    # After two failures the delay is an hour: routes keep answering and start nothing.
    for _ in range(3):
        again = index.route("air quality", wait_for_model=False)
        assert again.mode == "lexical-fallback" and again.model_failure is not None
        assert again.model_failure.retry_in() > 3000
    assert loader.attempts == 2

    # The warm-up goes through the same loader: its failure is what routes report at once.
    monkeypatch.setattr(model_loading, "RETRY_SECONDS", (0.0,))
    warmed = open_index(home, Embedder(str(model)), embedding_model=str(model))
    with pytest.raises(EmbeddingModelError, match="cannot load the embedding model"):
        warmed.warm()
    assert warmed.model_loader.thread is None  # nothing in the background yet
    # Fixed meanwhile: the retry the next route starts (delay 0) loads it, and routes are hybrid again.
    repair_model(model)
    assert warmed.route("air quality", wait_for_model=False).mode == "lexical-fallback"
    assert warmed.model_loader.thread is not None
    warmed.model_loader.thread.join(timeout=240)
    assert warmed.model_loader.failure is None and warmed.embedder.loaded
    recovered = warmed.route("what is the air quality in Beijing", wait_for_model=False)
    assert recovered.mode == "hybrid" and recovered.model_failure is None
    assert recovered.hits[0].tool == "get_air_quality"


def test_a_long_query_is_searched_by_its_beginning_and_says_so(index: ToolIndex) -> None:
    assert not index.route("convert a word document to pdf").truncated
    long = index.route("convert a word document to pdf " + "and then some more words " * 100)
    assert long.truncated and long.hits[0].tool == "convert_to_pdf"


def test_kinds_offered_counts_records_by_kind(index: ToolIndex) -> None:
    assert index.kinds_offered() == {"tool": len(make_records())}
    assert index.kinds_offered(["maps", "time", "not-indexed"]) == {"tool": 5}
    assert index.kinds_offered([]) == {}


def test_waiting_for_the_model_is_the_default(built_home: Path) -> None:
    fresh = Embedder()
    result = open_index(built_home, fresh).route("list the files in a folder")
    assert result.mode == "hybrid" and fresh.loaded


def test_each_listed_operation_is_searched_on_its_own(index: ToolIndex) -> None:
    """Agents pack operations into one query; the tool for the second one must not be drowned by the first."""
    listed = index.route("<tool_assistant>\nserver: assorted services\ntool: get the weather forecast + write a file\n</tool_assistant>", top_k=3)
    assert listed.operations == ["get the weather forecast", "write a file"]
    assert listed.hits[0].tool == "get_weather_forecast" and "write_file" in {h.tool for h in listed.hits}
    # The same words as one operation: the weather tools crowd the file tool out of the top 3.
    blended = index.route("<tool_assistant>\nserver: assorted services\ntool: get the weather forecast and write a file\n</tool_assistant>", top_k=3)
    assert blended.operations == [] and "write_file" not in {h.tool for h in blended.hits}
    # Scores stay sorted and one operation's answer keeps its own best tool first.
    assert [h.score for h in listed.hits] == sorted((h.score for h in listed.hits), reverse=True)
    assert index.route("write a file", top_k=1).hits[0].tool == "write_file"


def test_the_servers_a_session_used_are_lifted_by_the_session_prior(built_home: Path) -> None:
    index = open_index(built_home)
    before = {hit.tool: hit.score for hit in index.route("create a new file", 5).hits}
    assert list(before)[:3] == ["write_file", "create_directory", "create_document"]
    used = ["no-such-server", "word-document-server"]  # a server the index does not hold is passed over
    lifted = index.route("create a new file", 5, session_servers=used)
    assert lifted.session_servers == ["word-document-server"]
    after = {hit.tool: hit.score for hit in lifted.hits}
    assert list(after).index("create_document") < list(after).index("create_directory")
    assert after["create_document"] == pytest.approx(before["create_document"] + 2.0, abs=1e-3)
    assert after["write_file"] == before["write_file"]
    # a search restricted to other servers lifts none and says so
    elsewhere = index.route("create a new file", 5, servers={"filesystem"}, session_servers=used)
    assert elsewhere.session_servers == [] and {h.server for h in elsewhere.hits} == {"filesystem"}
    # the weight is a setting; 0 turns it off
    off = open_index(built_home, session_prior_weight=0).route("create a new file", 5, session_servers=used)
    assert off.session_servers == [] and [h.tool for h in off.hits][:3] == list(before)[:3]
    # the baselines rank without it
    for method in ("bm25", "dense"):
        plain = index.route("create a new file", 5, method=method)
        with_session = index.route("create a new file", 5, method=method, session_servers=used)
        assert with_session.session_servers == [] and with_session.hits == plain.hits


def test_a_usage_prior_lifts_the_tools_agents_ran_before(built_home: Path, tmp_path: Path) -> None:
    prior = tmp_path / "usage-prior.json"
    plain = open_index(built_home, usage_prior=prior)
    before = {hit.tool: hit.score for hit in plain.route("create a new file", 5).hits}
    assert list(before)[:3] == ["write_file", "create_directory", "create_document"]
    assert plain.usage_prior_info() is None
    write_usage_prior(UsagePrior(trajectories=10, tools={"word-document-server": {"create_document": 9}}), prior)
    after = {hit.tool: hit.score for hit in plain.route("create a new file", 5).hits}  # read at the next route
    assert list(after)[:3] == ["write_file", "create_document", "create_directory"]
    assert after["create_document"] == pytest.approx(before["create_document"] + 0.5 * math.log(10), abs=1e-3)
    assert after["write_file"] == before["write_file"]
    assert plain.usage_prior_info() == {"file": str(prior), "trajectories": 10, "tools": 1, "weight": 0.5}
    # the weight is a setting; 0 turns the prior off
    assert [h.tool for h in open_index(built_home, usage_prior=prior, usage_prior_weight=0).search("create a new file")][:3] == list(before)[:3]
    # the baselines rank without it
    assert plain.search("create a new file", method="dense")[0].score == pytest.approx(
        open_index(built_home, usage_prior=tmp_path / "none.json").search("create a new file", method="dense")[0].score
    )


def test_a_tools_input_provider_is_lifted_just_below_it_in_hybrid_rankings_only(tmp_path: Path) -> None:
    def tool(name: str, description: str, *required: str) -> ToolRecord:
        properties = {p: {"type": "string"} for p in required}
        return ToolRecord(server="maps", name=name, description=description,
                          input_schema={"type": "object", "properties": properties, "required": list(required)})

    records = [
        tool("geocode_address", "Convert a street address to coordinates: latitude and longitude.", "address"),
        tool("find_parking", "Find parking lots and garages near a point on the map.", "latitude", "longitude"),
        tool("get_weather", "Today's weather forecast for a city.", "city"),
    ]
    index = open_index(tmp_path)
    index.sync(records, catalog="tests", catalog_digest="maps")
    hits = index.search("find a parking garage", top_k=3)
    assert [h.tool for h in hits[:2]] == ["find_parking", "geocode_address"]
    assert hits[1].score == pytest.approx(hits[0].score - 0.1, abs=1e-3)
    assert [n.model_dump() for n in hits[1].input_for] == [{"tool": "find_parking", "parameter": "latitude"}]
    assert hits[0].input_for == [] and hits[2].input_for == []
    # and the other way: where the tool's inputs come from, whether or not they are in the answer
    assert [n.model_dump() for n in hits[0].input_from] == [{"tool": "geocode_address", "parameter": "latitude"}]
    assert hits[1].input_from == [] and hits[2].input_from == []
    alone = index.search("find a parking garage", top_k=1)
    assert [n.model_dump() for n in alone[0].input_from] == [{"tool": "geocode_address", "parameter": "latitude"}]
    # the plain baselines rank by their own signal alone
    dense = index.search("find a parking garage", top_k=3, method="dense")
    assert dense[0].tool == "find_parking" and dense[1].score != pytest.approx(dense[0].score - 0.1, abs=1e-3)
    # asked on its own, the geocoder needs nothing and is needed by nothing shown
    assert all(h.input_for == [] for h in index.search("geocode an address", top_k=1))


def test_a_stored_tool_that_no_longer_reads_as_a_record_is_left_out_of_the_input_providers_only(tmp_path: Path) -> None:
    index = open_index(tmp_path)
    index.sync(
        [
            ToolRecord(server="maps", name="geocode_address", description="An address to its latitude.",
                       input_schema={"type": "object", "properties": {"address": {"type": "string"}}}),
            ToolRecord(server="maps", name="find_parking", description="Parking near a point.",
                       input_schema={"type": "object", "properties": {"latitude": {"type": "string"}}, "required": ["latitude"]}),
        ],
        catalog="tests",
        catalog_digest="maps",
    )
    snapshot = index._current(required=True)  # noqa: SLF001
    assert snapshot is not None
    parking, geocoder = snapshot.position["maps/find_parking"], snapshot.position["maps/geocode_address"]
    intact = open_index(tmp_path)._current(required=True)  # noqa: SLF001 (another index: its own snapshot)
    assert intact is not None and intact.providers[parking] == (geocoder,)
    snapshot.records_json[geocoder] = '{"server": "maps", "name": 3'  # as a store written by a future version might hold it
    assert snapshot.providers[parking] == ()
    assert snapshot._stored_tool(geocoder) is None  # noqa: SLF001
    assert snapshot.parsed == {}  # the links keep no record: a long session would hold them all
    assert snapshot.record(parking).name == "find_parking"


def _unrelated_tools() -> list[ToolRecord]:
    """240 tools of other trades: a catalog large enough that one word only one tool has would be
    sqrt(n - 1) > 15 standard deviations of BM25 without the bound."""
    verbs = ("encode", "decode", "compress", "hash", "sort", "parse", "validate", "format", "merge", "split", "count", "rotate")
    things = ("csv rows", "json payload", "xml tree", "image thumbnail", "audio clip", "git commit", "docker container",
              "sql table", "email message", "calendar event", "dns record", "zip archive", "pdf page", "font file",
              "color palette", "qr code", "barcode", "log line", "regex pattern", "unit value")
    return [
        ToolRecord(server=thing.replace(" ", "-"), name=f"{verb}_{thing.replace(' ', '_')}",
                   description=f"{verb.capitalize()} the given {thing} and return the result.",
                   input_schema={"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]})
        for thing in things
        for verb in verbs
    ]


def test_a_word_only_one_tool_has_does_not_outweigh_the_tool_the_request_means(tmp_path: Path) -> None:
    records = [
        *_unrelated_tools(),
        ToolRecord(server="lodging", name="reserve_room", description="Reserve a room at a hotel or guesthouse for the given dates.",
                   input_schema={"type": "object", "properties": {"city": {"type": "string"}, "check_in": {"type": "string"}}}),
        # "book" only as part of a parameter name (price to book ratio)
        ToolRecord(server="stocks", name="ticker_metrics", description="Valuation metrics of a stock ticker.",
                   input_schema={"type": "object", "properties": {"symbol": {"type": "string"}, "priceToBook": {"type": "number"}}}),
    ]
    index = open_index(tmp_path)
    index.sync(records, catalog="tests", catalog_digest="lodging")
    query = "book a bed for two nights"
    assert [h.tool for h in index.search(query, top_k=1, method="bm25")] == ["ticker_metrics"]  # the one word BM25 has
    assert [h.tool for h in index.search(query, top_k=1, method="dense")] == ["reserve_room"]
    bounded = index.search(query, top_k=2)
    assert [h.tool for h in bounded] == ["reserve_room", "ticker_metrics"]
    # unbounded, that single word is sqrt(241) = 15.5 deviations of BM25 and wins
    unbounded = index.route(query, top_k=2, weights=replace(HYBRID, ceiling=None), trim=False).hits
    assert [h.tool for h in unbounded] == ["ticker_metrics", "reserve_room"]
    assert unbounded[0].score - bounded[1].score == pytest.approx(0.5 * (15.5 - 10), abs=0.1)  # BM25 weight x what the bound took


def test_tools_the_caller_hides_are_left_out_before_the_answer_is_judged(index: ToolIndex) -> None:
    # Before: the copilot dropped denied tools after the index judged the answer, so a denied best
    # match made a poor answer look strong (no weak flag) and trimmed the rest against it.
    query = "what will the weather be like in Paris tomorrow"
    shown = index.route(query)
    weather = {hit.server for hit in shown.hits[:1]}
    hidden = index.route(query, hide=lambda record: "denied" if record.server in weather else None)
    assert not shown.weak and hidden.weak and hidden.related_servers
    assert not {hit.server for hit in hidden.hits} & weather
    assert hidden.hidden["denied"] >= 1
    # Asked about the best tools only, a few rounds; a rule hiding most of the index is asked about all.
    everything_but_one = index.route(query, top_k=3, hide=lambda record: None if record.name == "convert_to_pdf" else "denied")
    assert [hit.tool for hit in everything_but_one.hits] == ["convert_to_pdf"]
