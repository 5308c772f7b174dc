"""Text the index embeds and the lexical tokenizer (English identifiers and Chinese text alike).

Tool names are identifiers (``get_weather``, ``createDocument``, ``get-weread-rank``): they are
split into words so "weather" in a query meets ``get_weather``. Runs of CJK characters are
segmented with jieba (loaded lazily, once), because Chinese has no spaces and 61 of the
LiveMCPBench tool descriptions are Chinese.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

from index.search.gloss import CJK_IDEOGRAPHS, english_gloss
from index.catalog.records import ToolRecord

#: Bump when the embedded text changes, so existing indexes are rebuilt rather than mixed.
#: 3: English gloss of Chinese descriptions; BM25 over the tool's own fields and server name.
DOCUMENT_VERSION = 3

_CJK_RUN = re.compile(f"[{CJK_IDEOGRAPHS}]+")
_WORD = re.compile(rf"[A-Za-z0-9]+|[{CJK_IDEOGRAPHS}]+")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_IDENTIFIER_SEPARATORS = re.compile(r"[_\-./:]+")

#: Function words that only add noise to BM25 (both languages); kept short on purpose.
STOPWORDS = frozenset(
    """a an the and or of to in on for with by from at as is are be been was were it its this that
    these those into than then there their them they we you your our i me my he she his her
    do does did can could should would will shall may might must not no yes if so such which who
    whom what when where why how all any each other some more most only own same too very just
    also about over under again further once here both few nor up down out off s t
    的 了 和 是 在 我 有 就 不 人 都 一 一个 上 也 很 到 说 要 去 你 会 着 没有 看 好 自己 这 那 与 及 或 等 并 把 被 对 中 为 以 之 其
    """.split()
)

_jieba_lock = threading.Lock()
_jieba_ready = False


def segment_cjk(run: str) -> list[str]:
    """Chinese words of a run of CJK characters (jieba, its dictionary loaded once)."""
    global _jieba_ready
    import jieba

    if not _jieba_ready:
        with _jieba_lock:
            if not _jieba_ready:
                jieba.setLogLevel(60)  # jieba logs its dictionary loading to stderr at INFO
                jieba.initialize()
                _jieba_ready = True
    return [token for token in jieba.lcut(run) if token.strip()]


def split_identifier(name: str) -> list[str]:
    """``getWeatherForecast`` / ``get_weather-forecast`` -> ``['get', 'weather', 'forecast']``."""
    words: list[str] = []
    for part in _IDENTIFIER_SEPARATORS.split(name):
        words.extend(w for w in _CAMEL_BOUNDARY.split(part) if w)
    return words


def humanize(name: str) -> str:
    return " ".join(split_identifier(name)).lower()


def stem(word: str) -> str:
    """A deliberately tiny English plural folding (files -> file, queries -> query)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def latin_words(text: str) -> set[str]:
    """The lowercased words of ``text``'s Latin letters and digits, identifiers split and plurals
    folded as :func:`tokenize` does, stopwords kept and CJK left out (names, parameters, the words
    of a description that can name them)."""
    return {
        stem(word.lower())
        for piece in _WORD.findall(text)
        if not _CJK_RUN.fullmatch(piece)
        for word in _CAMEL_BOUNDARY.split(piece)
        if word
    }


def tokenize(text: str, *, cjk: bool = True) -> list[str]:
    """Lowercased word tokens for BM25: identifiers split, CJK segmented, stopwords dropped.
    ``cjk=False`` leaves CJK out, without loading jieba (a query against a corpus with none)."""
    tokens: list[str] = []
    for match in _WORD.finditer(text):
        piece = match.group()
        if _CJK_RUN.fullmatch(piece):
            if cjk:
                tokens.extend(t for t in segment_cjk(piece) if t not in STOPWORDS)
            continue
        for word in _CAMEL_BOUNDARY.split(piece):
            word = word.lower()
            if word and word not in STOPWORDS:
                tokens.append(stem(word))
    return tokens


def has_words(text: str) -> bool:
    """Whether ``text`` contains anything searchable (letters, digits or CJK)."""
    return _WORD.search(text) is not None


def _parameter_words(schema: dict[str, Any]) -> str:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return ""
    return ", ".join(humanize(str(name)) for name in properties)


_KIND_WORDS = {"tool": "tool", "prompt": "prompt", "resource": "resource", "resource_template": "resource template"}


def tool_document(record: ToolRecord) -> str:
    """The text embedded for a tool: its name in words, description, parameter names, English gloss.

    Prompts and resources (typed like tools) say what they are first, and resources their URI.
    """
    parts = [f"{humanize(record.name)} ({record.server})"]
    if record.kind != "tool":
        parts[0] = f"{_KIND_WORDS[record.kind]}: {parts[0]}"
        if record.uri:
            parts.append(f"uri: {record.uri}" + (f" ({record.mime_type})" if record.mime_type else ""))
    if record.title:
        parts.append(record.title)
    if record.description:
        parts.append(record.description)
    parameters = _parameter_words(record.input_schema)
    if parameters:
        parts.append(f"parameters: {parameters}")
    gloss = english_gloss(record.description)
    if gloss:
        parts.append(f"English: {gloss}")
    return ". ".join(parts)


def tool_lexical_text(record: ToolRecord) -> str:
    """The text BM25 sees: the tool's own fields, its server's name and the English gloss.

    The server's description and category are left out: they are shared by every tool of the
    server, so they drown the one tool that does the operation (measured in bench/retrieval.py;
    the server signal covers them).
    """
    extra = [_KIND_WORDS[record.kind], record.uri or ""] if record.kind != "tool" else []
    return " ".join(
        [
            *extra,
            record.name,
            humanize(record.server),
            record.title or "",
            record.description,
            _parameter_words(record.input_schema),
            english_gloss(record.description),
        ]
    )


def server_document(name: str, description: str, category: str, tool_names: Iterable[str]) -> str:
    """The text embedded for a server (the first level of the paper's two-level score)."""
    tools = ", ".join(humanize(t) for t in tool_names)
    text = f"{humanize(name)}: {description}" if description else humanize(name)
    gloss = english_gloss(description)
    if gloss:
        text += f" (English: {gloss})"
    if category:
        text += f". Category: {category}"
    if tools:
        text += f". Tools: {tools}"
    return text
