"""One index home, several processes: what another process changed is what this one reads.

Chroma keeps one in-memory view of an embedded store per process and path. Before, once another
process (an ``index build``, another copilot's re-index) had changed the files, this process's
reads failed ("Error finding id": the benchmark runner stopped with it after a task's copilot
re-indexed its home) or returned the vectors that were there before.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import index.storage.store as store_module
from index.settings import CopilotSettings
from index.storage.store import ChromaStore
from tests.index.index_support import make_records, open_index
from tests.support.cli import run_python

pytestmark = pytest.mark.timeout(240)

#: Another process re-indexes the home: one tool gone, one described anew, one added; it prints
#: what it then reads (tool id -> vector), as any fresh process would read it.
REINDEX = """
import json, sys
from pathlib import Path
from index.settings import CopilotSettings
from index.search.tool_index import ToolIndex
from index.storage.store import ChromaStore
from tests.index.index_support import make_records
records = make_records()
gone, changed = records[0], records[1]
records = [r for r in records if r.id != gone.id]
records[0] = changed.model_copy(update={"description": "Translate a paragraph of text into French."})
records.append(changed.model_copy(update={"name": "count_words", "description": "Count the words of a text."}))
settings = CopilotSettings(home=Path(sys.argv[1]))
ToolIndex.open(settings).sync(records)
loaded = ChromaStore(settings).load_tools()
print(json.dumps({"gone": gone.id, "changed": changed.id, "vectors": dict(zip(loaded.ids, loaded.vectors.tolist()))}))
"""

#: Another process edits the tool collection without a new build id (as a build does midway).
EDIT = """
import sys
from pathlib import Path
from index.settings import CopilotSettings
from index.storage.store import ChromaStore
collection = ChromaStore(CopilotSettings(home=Path(sys.argv[1]))).tools()
ids = sorted(collection.get()["ids"])
kept = collection.get(ids=[ids[2]], include=["embeddings", "metadatas"])
collection.delete(ids=ids[:2])
collection.add(ids=["added/one"], embeddings=[kept["embeddings"][0]], metadatas=[kept["metadatas"][0]])
"""


def test_a_reindex_by_another_process_is_read_as_that_process_wrote_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    open_index(home).sync(make_records())
    store = ChromaStore(CopilotSettings(home=home))
    before = store.load_tools()  # this process now holds Chroma's view of the files
    assert store.read_state() is not None

    written = json.loads(run_python(REINDEX, str(home)).stdout)

    index = open_index(home)  # e.g. the benchmark runner's next check of the home
    assert index.tool_count == len(written["vectors"])
    loaded = ChromaStore(CopilotSettings(home=home)).load_tools()
    assert sorted(loaded.ids) == sorted(written["vectors"]) and written["gone"] not in loaded.ids
    vectors = dict(zip(loaded.ids, loaded.vectors))
    for tool_id, vector in written["vectors"].items():
        assert np.array_equal(vectors[tool_id], np.asarray(vector, dtype=np.float32)), tool_id
    changed = written["changed"]
    assert not np.array_equal(vectors[changed], before.vectors[before.ids.index(changed)])  # the new text's vector
    assert [hit.tool for hit in index.search("count the words in this text", top_k=1)] == ["count_words"]


@pytest.mark.parametrize("registry", ["as-in-chromadb-1.5", "changed"])
def test_a_read_that_fails_on_an_old_view_is_made_again_on_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: str
) -> None:
    if registry == "changed":  # a later chromadb whose private client registry has other names
        monkeypatch.setattr(store_module, "_CHROMA_REGISTRY", ("_lock_renamed", "_systems_renamed", "_counts_renamed"))
    home = tmp_path / "home"
    open_index(home).sync(make_records())
    store = ChromaStore(CopilotSettings(home=home))
    before = sorted(store.load_tools().ids)

    run_python(EDIT, str(home))

    after = store.load_tools()
    assert sorted(after.ids) == sorted([*before[2:], "added/one"])
    assert after.vectors.shape == (len(before) - 1, 384)
