"""The agent-query dev set: step-level ``route`` queries written by rules from LiveMCPBench's annotations.

Mid-task an agent does not paste the task: it asks for one sub-step at a time, mostly as
``<tool_assistant>\\nserver: <kind of service>\\ntool: <operation>\\n</tool_assistant>``. This module
turns each task's annotated ``Steps`` (aligned with its annotated ``Tools``) into such queries, with
no model involved, and writes them to ``bench/data/agent_queries.jsonl`` (committed):

* **alignment** -- each annotated tool goes to one step: a monotone assignment (tools are listed
  in step order) maximizing the words a step shares with the tool's name and description, with a
  small prior for the position; steps left without a tool are reasoning steps ("write the answer")
  and get no query. A short override table fixes what review found wrong.
* **operation** -- the step cut to its operation: fillers, paths, URLs and trailing purpose
  clauses removed, typos fixed, at most :data:`MAX_OPERATION_WORDS` words.
* **kind of service** -- what an agent would write after ``server:``: keyword rules over the step
  (then the task question) name a kind of service in the agent's words, never a server name from
  the catalog.

Five forms per step (``form`` in each line): ``assistant`` (the paper's block), ``plain`` (the
operation as text), ``synonym`` (the block with verbs/nouns swapped for synonyms and another
phrasing of the kind), ``multi`` (this step and the next joined with ``+``, the way the paper's
agent packs several operations into one query; relevant = both steps' tools) and ``terse``
(three or four keywords). ``assistant``, ``plain`` and ``synonym`` follow the route description's
guidance (one operation per query); ``multi`` does not.

``python -m bench.retrieval.agent_queries`` regenerates the file (and ``--review N`` prints N random steps
next to their queries for checking by hand). Only the generated queries and the tool names are
committed, never the annotation text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from index.cli.console import HelpFormatter
from index.search.text import tokenize

DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "agent_queries.jsonl"
FORMS = ("assistant", "plain", "synonym", "multi", "terse")
#: Forms that follow route's guidance (one operation per query).
GUIDED_FORMS = ("assistant", "plain", "synonym", "terse")
MAX_OPERATION_WORDS = 12
_NUMBERED = re.compile(r"^\s*\d+\s*[.)、]\s*")


# -- reading the annotations -----------------------------------------------------------------------


def numbered_lines(text: str) -> list[str]:
    """``"1. a\\n2. b"`` -> ``["a", "b"]`` (unnumbered lines continue the previous item)."""
    items: list[str] = []
    for line in str(text or "").splitlines():
        if not line.strip():
            continue
        if _NUMBERED.match(line) or not items:
            items.append(_NUMBERED.sub("", line).strip())
        else:
            items[-1] += " " + line.strip()
    return [item for item in items if item]


@dataclass(frozen=True)
class AnnotatedTask:
    task_id: str
    category: str
    question: str
    steps: list[str]
    tools: list[str]


def read_tasks(path: Path) -> list[AnnotatedTask]:
    tasks = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        meta = item.get("Annotator Metadata") or {}
        tasks.append(
            AnnotatedTask(
                task_id=str(item["task_id"]),
                category=str(item.get("category") or ""),
                question=str(item.get("Question") or ""),
                steps=numbered_lines(meta.get("Steps", "")),
                tools=numbered_lines(meta.get("Tools", "")),
            )
        )
    return tasks


# -- alignment -------------------------------------------------------------------------------------

#: Words that mean the same thing for alignment (step wording vs tool names/descriptions).
_CONCEPTS: dict[str, str] = {
    "coordinate": "geocode", "geographic": "geocode", "address": "geocode", "geocode": "geocode", "place": "geocode",
    "ppt": "presentation", "powerpoint": "presentation", "slide": "presentation", "presentation": "presentation",
    "excel": "sheet", "xlsx": "sheet", "sheet": "sheet", "spreadsheet": "sheet",
    "dir": "directory", "folder": "directory", "directory": "directory",
    "save": "write", "write": "write", "path": "write",
    "docx": "document", "word": "document", "document": "document",
    "picture": "image", "image": "image", "photo": "image", "png": "image",
    "ticket": "ticket", "tick": "ticket", "train": "ticket", "12306": "ticket",
    "station": "station", "trending": "trend", "trend": "trend", "trendings": "trend", "rank": "trend", "hot": "trend",
    "paper": "paper", "arxiv": "paper", "article": "article",
    "wiki": "wikipedia", "wikipedia": "wikipedia", "deepwiki": "deepwiki",
    "calculate": "calculate", "caculate": "calculate", "compute": "calculate", "bmi": "calculate",
    "time": "time", "date": "time", "today": "time", "data": "data",
    "browser": "navigate", "navigate": "navigate", "website": "navigate", "click": "click", "fill": "fill",
    "parking": "parking", "park": "parking", "charging": "charging", "nearby": "nearby", "near": "nearby",
    "interest": "nearby", "amenity": "nearby", "restaurant": "nearby",
    "route": "route", "direction": "route", "commute": "commute", "neighborhood": "neighborhood",
    "stock": "stock", "price": "price", "news": "news", "weather": "weather", "forecast": "weather",
    "chart": "chart", "bar": "bar", "pie": "pie", "cloud": "cloud", "mindmap": "mindmap",
    "pdf": "pdf", "merge": "merge", "convert": "convert", "read": "read", "open": "read", "load": "load",
    "create": "create", "make": "create", "new": "create", "add": "add", "insert": "add",
    "search": "search", "find": "search", "look": "search", "lookup": "search", "query": "search",
    "whois": "whois", "domain": "whois", "sitemap": "sitemap", "git": "git", "log": "log", "status": "status",
    "random": "random", "diff": "diff", "compare": "compare", "differences": "diff",
    "recipe": "recipe", "meal": "recipe", "dish": "recipe", "dishes": "recipe",
}


def concepts(text: str) -> set[str]:
    return {_CONCEPTS.get(token, token) for token in tokenize(text)}


def _similarity(step: set[str], name: set[str], description: set[str]) -> float:
    return 2.0 * len(step & name) + 0.5 * len(step & description)


def align(steps: Sequence[str], tools: Sequence[str], descriptions: dict[str, str]) -> list[list[str]]:
    """For each step, the annotated tools it uses (monotone in the listing order, every tool placed once)."""
    if not steps:
        return []
    if len(steps) == 1:
        return [list(tools)]
    step_concepts = [concepts(s) for s in steps]
    n, m = len(steps), len(tools)
    score = [[0.0] * n for _ in range(m)]
    for i, tool in enumerate(tools):
        name = concepts(tool.replace("-", " ").replace("_", " "))
        description = concepts(descriptions.get(tool, ""))
        for j in range(n):
            # A weak prior for the same relative position breaks ties between empty matches.
            prior = -0.1 * abs((i + 0.5) / m - (j + 0.5) / n)
            score[i][j] = _similarity(step_concepts[j], name, description) + prior
    # best[i][j]: best total for tools[0..i] with tool i on step j (steps non-decreasing).
    best = [[float("-inf")] * n for _ in range(m)]
    back = [[0] * n for _ in range(m)]
    for j in range(n):
        best[0][j] = score[0][j]
    for i in range(1, m):
        running, arg = float("-inf"), 0
        for j in range(n):
            if best[i - 1][j] > running:
                running, arg = best[i - 1][j], j
            best[i][j] = running + score[i][j]
            back[i][j] = arg
    j = max(range(n), key=lambda k: best[m - 1][k])
    assignment = [0] * m
    for i in range(m - 1, -1, -1):
        assignment[i] = j
        j = back[i][j]
    aligned: list[list[str]] = [[] for _ in steps]
    for tool, step in zip(tools, assignment, strict=True):
        aligned[step].append(tool)
    return aligned


#: Review fixes: (task id prefix, step number) -> the tools that step uses ([] = no tool).
OVERRIDES: dict[tuple[str, int], list[str]] = {
    ("0e3287cb", 3): ["create_document"],
    ("0e3287cb", 4): ["add_paragraph", "add_picture"],
    ("99d7541a", 3): ["mfcc"],
    ("99d7541a", 4): ["chroma_cqt"],
    ("dda8ea55", 3): ["find_nearby_places"],
    ("dda8ea55", 4): ["reverse_geocode"],
    ("567c79c3", 1): ["list-components"],
    ("567c79c3", 3): ["list-component-examples", "get-component-docs"],
    ("9fc8b7f3", 2): ["fetch"],
    ("2bf318d4", 1): ["article_searcher", "trial_searcher", "variant_searcher"],
    ("2bf318d4", 2): [],
    ("1a3ffa81", 2): [],
    ("1a3ffa81", 3): ["convert_markdown_to_mindmap"],
    ("10b5dbf7", 1): ["get-current-date"],
    ("10b5dbf7", 2): ["get-station-code-of-citys", "get-tickets"],
    ("00e13e2e", 2): ["search-museum-objects"],
    ("00e13e2e", 3): ["get-museum-object"],
    ("3819a831", 2): ["playwright_fill"],
    ("3819a831", 4): ["playwright_get_visible_html", "playwright_screenshot"],
    ("ea6e95fa", 2): ["playwright_fill"],
    ("ea6e95fa", 4): ["playwright_get_visible_html", "playwright_screenshot"],
    ("470f7ac1", 2): ["get_stock_ohlcv"],
    ("470f7ac1", 4): ["get_stock_market_cap"],
    ("90098a9c", 3): [],
    ("90098a9c", 4): ["write_file"],
    ("6265fd4a", 1): ["get-ifanr-news", "get-smzdm-rank"],
    ("6265fd4a", 2): [],
    ("5c19a347", 3): ["download_paper"],
    ("5c19a347", 4): ["read_paper"],
    ("2f8db365", 1): ["search_wikipedia"],
    ("2f8db365", 2): ["playwright_navigate", "playwright_get_visible_html", "playwright_fill", "playwright_click"],
    ("2f8db365", 3): [],
    ("04282571", 2): ["get_route_directions"],
    ("9bc7feb8", 2): [],
    ("9bc7feb8", 3): ["write_file"],
    ("1f6a6db5", 3): ["get_route_directions"],
    ("2293b5eb", 3): ["find_nearby_places"],
    ("15aa8d9b", 2): ["playwright_fill", "playwright_click", "playwright_get_visible_html"],
    ("15aa8d9b", 3): [],
    ("39c4c9fc", 1): [],
    ("39c4c9fc", 2): ["get_ticker_info"],
    ("4cbd9682", 2): ["duckduckgo_web_search", "search_wikipedia", "get_article"],
    ("4cbd9682", 3): [],
    ("b050f277", 1): ["docx_to_pdf"],
    ("b050f277", 2): ["pdf_merger"],
    ("cf1fca1e", 1): ["npmDeps", "npmSize", "npmCompare"],
    ("cf1fca1e", 2): [],
}


# -- rewriting a step as an agent's query ----------------------------------------------------------

_TYPOS = {
    "looksup": "look up", "caculate": "calculate", "conver": "convert", "broswer": "browser",
    "donwnload": "download", "acctording": "according", "compoents": "components", "informatin": "information",
    "ticks": "tickets", "treendings": "trending topics", "beginer": "beginner",
}
#: A step's first word, as the imperative an agent writes.
_LEADING_VERBS = {
    "summary": "summarize", "retrieves": "retrieve", "fetches": "fetch", "validates": "validate", "realizes": "find out",
    "getting": "get", "decoding": "decode", "looking": "look", "finding": "find", "reading": "read",
    "recommendations": "recommend",
}
_LEADING_FILLER = re.compile(
    r"^(?:(?:then|and|also|must use|must|help me|please|try to|you should|i need to|use)\s+)+", re.IGNORECASE
)
_PATH = re.compile(r"(?:\b(?:in|to|at|under|on)\s+)?(?:the\s+)?/root/\S*|(?:\b(?:in|to|at|into)\s+)?(?:the\s+)?\bpath\b")
_URL = re.compile(r"https?://\S+|www\.\S+")
_PARENS = re.compile(r"\([^)]*\)")
#: Where a step's purpose or details start: everything after is dropped.
_TAIL = re.compile(
    r"(?:;|\bto (?:understand|visualize|analyze|facilitate|identify)\b|\bfocusing on\b|\bsuch as\b|\bincluding\b"
    r"|\bfiltering\b|\band provide\b|\band identify\b|\bbased on the user\b|\bwith detailed\b|\bacc?ording to\b|\bwhich\b)",
    re.IGNORECASE,
)


def operation(step: str) -> str:
    """The step's operation in a few plain words (what goes after ``tool:``)."""
    text = _URL.sub("the web page", step)
    text = _PARENS.sub(" ", text)
    text = _PATH.sub(" to a file", text)
    words = []
    for word in _LEADING_FILLER.sub("", text.strip()).split():
        key = word.lower().strip(".,;:!?")
        if not words and key in _LEADING_VERBS:
            word = _LEADING_VERBS[key]
        elif key in _TYPOS:
            word = _TYPOS[key]
        elif key == "the":  # agents write "get stock prices", not "get the stock prices"
            continue
        words.append(word)
    text = " ".join(words)
    cut = _TAIL.search(text)
    if cut and cut.start() > 8:
        text = text[: cut.start()]
    text = re.sub(r"\bto a file(?:\s+to a file)+", "to a file", text)
    text = " ".join(text.replace(" .", ".").split()).strip(" .,:;!?")
    kept = text.split()[:MAX_OPERATION_WORDS]
    text = " ".join(kept)
    if text and not text[:2].isupper():
        text = text[0].lower() + text[1:]
    return text


#: Keyword rules -> kinds of service in an agent's words (two phrasings each). Checked in order;
#: the step's text first, then the task question.
_KINDS: list[tuple[tuple[str, ...], tuple[str, str]]] = [
    (("word document", "docx", "word file", "a word"), ("office documents or Word processing", "document editor for .docx files")),
    (("pdf",), ("PDF tools or document conversion", "document processing platform")),
    (("excel", "xlsx", "spreadsheet"), ("spreadsheet or Excel tools", "office data tools for workbooks")),
    (("ppt", "presentation", "powerpoint", "slide"), ("presentation or PowerPoint platform", "office slides creation")),
    (("word cloud", "chart", "plot", "visualiz"), ("data visualization or charting", "chart generation service")),
    (("mindmap", "mind map"), ("mind map or diagram tools", "visualization tools for outlines")),
    (("mermaid", "flowchart", "diagram"), ("diagram rendering or validation", "code diagram tools")),
    (("canvas", "drawing", "draw "), ("drawing or canvas tools", "image painting utilities")),
    (("coordinates", "geographic", "address", "parking", "nearby", "points of interest", "meeting place",
      "route directions", "commute", "neighborhood", "charging station", "restaurant", "places"),
     ("maps or location services", "geolocation and navigation platform")),
    (("weather", "forecast"), ("weather service", "weather and climate data")),
    (("train", "ticket", "12306", "station"), ("railway tickets or travel booking", "train timetable service")),
    (("homestay", "airbnb", "lodging"), ("lodging or travel booking", "accommodation search platform")),
    (("crypto", "bitcoin", "btc"), ("cryptocurrency data", "crypto market analytics")),
    (("fear & greed", "fear and greed"), ("market sentiment indicators", "financial market data")),
    (("gold", "silver", "asset price"), ("commodity or asset prices", "precious metals market data")),
    (("exchange rate", "usd", "currency"), ("currency exchange rates", "foreign exchange data")),
    (("stock", "ticker", "market cap", "cashflow", "income statement", "fundamental", "kospi", "company"),
     ("financial data or stock market platform", "stock market information service")),
    (("arxiv", "paper"), ("academic paper search", "research publication database")),
    (("clinical trial", "publications", "treatment", "cancer", "nct"), ("biomedical research database", "medical literature search")),
    (("wikipedia", "wiki "), ("encyclopedia or knowledge base", "Wikipedia access")),
    (("deepwiki",), ("repository documentation wiki", "code knowledge base")),
    (("hacker news", "story", "comments"), ("tech news community", "Hacker News access")),
    (("news", "trending", "trends", "trendings", "goodies", "electronics", "douban", "weread", "wechat reading"),
     ("news or trending topics aggregator", "hot lists and headlines service")),
    (("github", "repositories"), ("code hosting or developer trends", "GitHub data service")),
    (("git ", "git", "repository"), ("version control or git", "source code repository tools")),
    (("npm", "package", "bundle"), ("package registry or dependency analysis", "JavaScript package tools")),
    (("maven", "versions", "libs"), ("Java dependency management", "build dependency checker")),
    (("library id", "documentation for a library", "library"), ("developer documentation", "code library docs")),
    (("component",), ("UI component library docs", "frontend component reference")),
    (("leetcode",), ("coding challenge platform", "programming practice site")),
    (("youtube", "transcript", "video"), ("video transcripts", "YouTube utilities")),
    (("whois", "domain"), ("domain lookup or network tools", "internet registry lookup")),
    (("sitemap",), ("website analysis", "site structure crawler")),
    (("image", "picture", "base64"), ("image processing", "image analysis utilities")),
    (("audio", "beat", "mfcc", "chroma", "music"), ("audio analysis or music processing", "signal processing tools")),
    (("recipe", "meal", "dishes", "cook"), ("recipes or cooking", "meal planning service")),
    (("champion", "league of legends", "valorant", "character", "echo", "card", "game"),
     ("gaming data or game guides", "game statistics service")),
    (("museum", "painting", "metropolitan"), ("museum or art collection", "art database")),
    (("八字", "almanac", "bazi"), ("Chinese astrology or calendar", "traditional calendar service")),
    (("random",), ("random number utilities", "randomness tools")),
    (("differences", "compare two text", "diff"), ("text processing", "file comparison tools")),
    (("calculate", "calculator", "bmi", "percentage"), ("calculator or math", "math utilities")),
    (("current time", "current date", "today", "date", "time"), ("time and date utilities", "clock or timezone service")),
    (("browser", "website", "amazon", "search box", "click", "navigate", "shopping site"),
     ("browser automation", "web browser control")),
    (("download", "wget", "command"), ("shell or command execution", "terminal tools")),
    (("datasets", "data.gov", "government"), ("open government data", "public dataset catalog")),
    (("fetch", "url", "web page", "resume"), ("web content fetching", "web page reader")),
    (("search", "find", "gather", "information", "materials"), ("web search engine", "internet search")),
    (("write", "save", "file", "dir", "folder", "markdown", "report", "read"), ("file system or local files", "file management tools")),
]
_CATEGORY_KINDS = {
    "Office": ("office productivity tools", "document tools"),
    "Finance": ("financial data platform", "finance tools"),
    "Travel": ("travel planning services", "maps and travel"),
    "Lifestyle": ("everyday information services", "lifestyle tools"),
    "Leisure": ("entertainment services", "leisure and games"),
    "Shopping": ("shopping and deals", "online shopping tools"),
}


def service_kind(step: str, question: str, category: str, variant: int = 0) -> str:
    """What kind of service would have the tool, in an agent's words (``variant``: 0 or 1 phrasing)."""
    for text in (f" {step.lower()} ", f" {question.lower()} "):
        for keys, phrasings in _KINDS:
            if any(key in text for key in keys):
                return phrasings[variant]
    return _CATEGORY_KINDS.get(category, ("general utilities", "general tools"))[variant]


_VERB_SYNONYMS = {
    "get": ("fetch", "retrieve", "look up", "pull"), "find": ("search for", "look up", "locate"),
    "create": ("make", "set up", "start"), "write": ("save", "put"), "generate": ("produce", "make", "build"),
    "convert": ("turn", "transform", "change"), "search": ("look for", "query", "find"), "read": ("open", "load", "view"),
    "check": ("look up", "query", "verify"), "calculate": ("compute", "work out"), "list": ("show", "enumerate"),
    "draw": ("plot", "render"), "add": ("insert", "put"), "download": ("fetch", "save"), "compare": ("diff",),
    "summarize": ("condense",), "extract": ("pull out", "get"), "fetch": ("get", "download"), "make": ("create", "build"),
    "open": ("read", "load"), "navigate": ("go", "open"), "load": ("read", "open"), "compute": ("calculate",),
    "discover": ("find", "explore"), "collect": ("gather", "get"), "recommend": ("suggest", "propose"),
}
_NOUN_SYNONYMS = {
    "document": ("file", "doc"), "pdf": ("PDF file",), "ppt": ("slide deck", "presentation"),
    "presentation": ("slide deck", "deck"), "picture": ("image",), "image": ("picture",),
    "information": ("info", "details"), "news": ("headlines", "articles"), "stock": ("share", "equity"),
    "price": ("quote", "value"), "prices": ("quotes",), "weather": ("forecast",), "coordinates": ("lat/long", "location"),
    "address": ("location",), "papers": ("articles", "publications"), "paper": ("article", "publication"),
    "chart": ("graph", "plot"), "directory": ("folder",), "dir": ("folder",), "file": ("document",),
    "trending": ("popular", "hot"), "trends": ("hot topics", "popular items"), "website": ("site", "web page"),
    "report": ("write-up", "summary"), "tickets": ("seats", "fares"), "places": ("spots", "locations"),
    "excel": ("spreadsheet", "xlsx"), "repository": ("repo",), "repositories": ("repos",), "word": ("docx",),
}


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()
    return random.Random(int(digest[:16], 16))


def paraphrase(text: str, rng: random.Random, swaps: int = 2) -> str:
    """Swap up to ``swaps`` verbs/nouns for synonyms (deterministic per ``rng``)."""
    words = text.split()
    candidates = [
        i for i, w in enumerate(words) if w.lower() in _VERB_SYNONYMS or w.lower() in _NOUN_SYNONYMS
    ]
    rng.shuffle(candidates)
    # The leading verb is the operation: swap it first when it has synonyms.
    if words and words[0].lower() in _VERB_SYNONYMS and 0 in candidates:
        candidates.remove(0)
        candidates.insert(0, 0)
    for i in candidates[:swaps]:
        word = words[i].lower()
        options = _VERB_SYNONYMS.get(word) if i == 0 or word not in _NOUN_SYNONYMS else _NOUN_SYNONYMS[word]
        options = options or _NOUN_SYNONYMS.get(word) or _VERB_SYNONYMS[word]
        fresh = [o for o in options if o.lower() not in (w.lower() for w in words)]
        if fresh:
            words[i] = rng.choice(fresh)
    return " ".join(words)


_TERSE_DROP = frozenset(
    """get find make use all some new file detailed specific information two between within across via using like
    based according related current""".split()
)


def terse(text: str, limit: int = 4) -> str:
    """Three or four keywords, the way some agents search (no verb, no function words)."""
    seen: list[str] = []
    for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9+#./&'-]*|[\u4e00-\u9fff]+", text):
        lowered = word.lower().strip(".'")
        if not tokenize(lowered) or lowered in _TERSE_DROP or lowered in seen:
            continue
        seen.append(lowered)
    return " ".join(seen[:limit]) or text


def assistant_block(server: str, tool: str) -> str:
    return f"<tool_assistant>\nserver: {server}\ntool: {tool}\n</tool_assistant>"


# -- the dev set ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentQuery:
    id: str
    task_id: str
    category: str
    step: int
    form: str
    query: str
    relevant: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, ensure_ascii=False)


@dataclass(frozen=True)
class AlignedStep:
    task: AnnotatedTask
    number: int  # 1-based
    text: str
    tools: list[str]


def aligned_steps(tasks: Iterable[AnnotatedTask], descriptions: dict[str, str]) -> list[AlignedStep]:
    steps = []
    for task in tasks:
        if not task.tools:
            continue
        for number, (text, tools) in enumerate(zip(task.steps, align(task.steps, task.tools, descriptions), strict=True), 1):
            tools = OVERRIDES.get((task.task_id[:8], number), tools)
            if tools:
                steps.append(AlignedStep(task, number, text, tools))
    return steps


def queries_for(step: AlignedStep, following: AlignedStep | None) -> list[AgentQuery]:
    task = step.task
    op = operation(step.text)
    if not op:
        return []
    step_text = _URL.sub("web page", step.text)
    kind = service_kind(step_text, task.question, task.category, 0)
    other_kind = service_kind(step_text, task.question, task.category, 1)
    rng = _rng(task.task_id, step.number)
    prefix = f"{task.task_id[:8]}-s{step.number}"

    def make(form: str, query: str, relevant: Sequence[str]) -> AgentQuery:
        return AgentQuery(f"{prefix}-{form}", task.task_id, task.category, step.number, form, query, sorted(set(relevant)))

    made = [
        make("assistant", assistant_block(kind, op), step.tools),
        make("plain", op, step.tools),
        make("synonym", assistant_block(other_kind, paraphrase(op, rng)), step.tools),
        make("terse", terse(op), step.tools),
    ]
    if following is not None:
        next_op = operation(following.text)
        next_kind = service_kind(_URL.sub("web page", following.text), task.question, task.category, 0)
        # Agents name both kinds briefly: "spreadsheet or data visualization".
        server = kind if next_kind == kind else f"{kind.split(' or ')[0]} or {next_kind.split(' or ')[0]}"
        if next_op:
            made.append(make("multi", assistant_block(server, f"{op} + {next_op}"), [*step.tools, *following.tools]))
    return made


def generate(tasks: Sequence[AnnotatedTask], descriptions: dict[str, str]) -> list[AgentQuery]:
    steps = aligned_steps(tasks, descriptions)
    queries: list[AgentQuery] = []
    for position, step in enumerate(steps):
        following = steps[position + 1] if position + 1 < len(steps) else None
        if following is not None and following.task.task_id != step.task.task_id:
            following = None
        queries.extend(queries_for(step, following))
    return queries


def load_dev_set(path: Path = DATA_FILE) -> list[AgentQuery]:
    """The committed dev set (raises ``ValueError`` naming the line when a line is malformed)."""
    queries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            queries.append(AgentQuery(**json.loads(line)))
        except (json.JSONDecodeError, TypeError) as error:
            raise ValueError(f"{path}:{number}: not an agent query ({error})") from None
    return queries


def tool_descriptions(tools_json: Path) -> dict[str, str]:
    from index.catalog.livemcpbench import load_livemcpbench

    descriptions: dict[str, str] = {}
    for record in load_livemcpbench(tools_json).tools:
        descriptions[record.name] = (descriptions.get(record.name, "") + " " + record.description).strip()
    return descriptions


def main(argv: Sequence[str] | None = None) -> int:
    from index.settings import livemcpbench_dir

    shared = livemcpbench_dir()
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.agent_queries", description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--annotations", type=Path, default=shared / "annotated_data" / "all_annotations.json")
    parser.add_argument("--tools-json", type=Path, default=shared / "tools" / "LiveMCPTool" / "tools.json")
    parser.add_argument("--out", type=Path, default=DATA_FILE)
    parser.add_argument("--review", type=int, default=0, metavar="N", help="print N random steps with their queries")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for path in (args.annotations, args.tools_json):
        if not path.exists():
            print(f"skipped: {path} not found (LiveMCPBench data is read from {shared}).", file=sys.stderr)
            return 0
    tasks = read_tasks(args.annotations)
    descriptions = tool_descriptions(args.tools_json)
    if args.review:
        steps = aligned_steps(tasks, descriptions)
        sample = random.Random(args.seed).sample(steps, min(args.review, len(steps)))
        for step in sample:
            print(f"--- {step.task.task_id[:8]} step {step.number} ({step.task.category}): {step.text}")
            print(f"    tools: {', '.join(step.tools)}")
            for query in queries_for(step, None):
                print(f"    [{query.form}] {query.query!r}")
        return 0
    queries = generate(tasks, descriptions)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(q.to_json() + "\n" for q in queries), encoding="utf-8")
    steps = {(q.task_id, q.step) for q in queries}
    print(f"wrote {len(queries)} queries for {len(steps)} steps of {len({q.task_id for q in queries})} tasks -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
