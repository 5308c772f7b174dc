"""The scan's rules, each finding what one attack class leaves in a text, and the entry points that
run them: :func:`scan_tool` on a definition, :func:`scan_text` on one field,
:func:`scan_result_text` on what a tool returned."""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable

from index.catalog.records import ToolRecord
from index.trust.scan.context import AS_NAME, ScanContext, tool_texts
from index.trust.scan.findings import SEVERITY_ORDER, Category, Finding, Severity
from index.trust.scan.patterns import (
    ADDRESSED,
    ANSI,
    ASK_USER,
    AVAILABLE,
    CONCEAL_HIDE,
    CONCEAL_KNOW,
    CONCEAL_TELL,
    CONCEAL_ZH,
    CONVERSATION,
    CONVERSATION_DUMP,
    CREDENTIAL,
    LINE_BREAK,
    LONG_TEXT,
    MD_IMAGE,
    MODAL,
    NEGATION,
    OTHER_TOOLS,
    OVERRIDE,
    OVERRIDE_NOUN_FIRST,
    OVERRIDE_ZH,
    PADDING_LINES,
    PRIORITY,
    PSEUDO_TAG,
    READ_VERB,
    REDIRECT,
    ROLE,
    SECRET_NAME,
    SEND_TO,
    SENSITIVE_PATH,
    STEALTH,
    TAKE_VERB,
    TRANSFER_VERB,
    URGENT,
    URL,
    URL_TEMPLATE,
    VERY_LONG_TEXT,
    WHEN_USING,
    WHITE_RUN,
    WHOLE,
    WIDE_RUN,
    in_other_languages,
)
from index.trust.scan.text import (
    BIDI_CONTROLS,
    DIRECTION_MARKS,
    TAG_CHARS,
    VARIATION_RUN,
    VARIATION_SELECTORS,
    ZWJ,
    decode_base64_runs,
    decode_tag_characters,
    decode_variation_selectors,
    in_selector_run,
    is_emoji,
    is_invisible,
    join_spaced_letters,
    selects_a_glyph,
    skeleton,
    smuggled_text,
    visible,
)


class _Collector:
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, str]] = set()

    def has(self, rule: str, where: str) -> bool:
        return (rule, where) in self._seen

    def add(self, rule: str, category: Category, severity: Severity, where: str, message: str, excerpt: str = "") -> None:
        key = (rule, where)
        if key in self._seen:
            return
        self._seen.add(key)
        self.findings.append(
            Finding(rule=rule, category=category, severity=severity, field=where, message=message, excerpt=visible(excerpt))
        )


_BOUNDARY = re.compile(r"[.!?](?=\s|$)|[\n。！？]")


#: Characters a sentence may reach on either side of a match. Without a bound, a description
#: that is one endless "sentence" full of matches costs (matches x length) per rule: 46 KB of
#: "see ~/.ssh/config here" took 34 s, and twice that the next size up.
SENTENCE_REACH = 600


def _sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the sentence holding ``text[start:end]`` starts and ends (dots inside paths and URLs
    do not end it), at most :data:`SENTENCE_REACH` characters either side."""
    left = max(0, start - SENTENCE_REACH)
    for boundary in _BOUNDARY.finditer(text, left, start):
        left = boundary.end()
    right = min(len(text), end + SENTENCE_REACH)
    after = _BOUNDARY.search(text, end, right)
    return left, after.start() if after else right


def _sentence_around(text: str, start: int, end: int) -> str:
    left, right = _sentence_bounds(text, start, end)
    return text[left:right]


def _negated_before(text: str, position: int, window: int = 25) -> bool:
    return bool(NEGATION.search(text[max(0, position - window) : position]))


def _hidden_characters(raw: str, where: str, out: _Collector, *, in_name: bool) -> None:
    tags = [c for c in raw if ord(c) in TAG_CHARS]
    if tags:
        smuggled = decode_tag_characters(raw)
        out.add("hidden.tag-characters", "hidden", "high", where,
                f"{len(tags)} invisible Unicode tag character(s) (they smuggle ASCII text a model reads but people do not see)",
                smuggled or raw)
    bidi = [c for c in raw if c in BIDI_CONTROLS]
    if bidi:
        out.add("hidden.bidi", "hidden", "high", where,
                f"{len(bidi)} bidirectional control character(s) (they reorder how text is displayed)", raw)
    if (runs := VARIATION_RUN.findall(raw)):
        out.add("hidden.variation-selectors", "hidden", "high", where,
                f"{sum(map(len, runs))} variation selector(s) in a row (they smuggle bytes a model reads but people do not see)",
                decode_variation_selectors(raw) or raw)
    zero_width = [
        i for i, c in enumerate(raw)
        if not c.isascii()
        and c not in BIDI_CONTROLS and c not in DIRECTION_MARKS and ord(c) not in TAG_CHARS  # reported above
        and is_invisible(c)
        and not (c == ZWJ and 0 < i < len(raw) - 1 and (is_emoji(raw[i - 1]) or is_emoji(raw[i + 1])))
        and not (c == "\ufeff" and i == 0)
        and not (c in VARIATION_SELECTORS and (in_selector_run(raw, i) or selects_a_glyph(raw, i)))
    ]
    if zero_width:
        severity: Severity = "high" if in_name or len(zero_width) >= 3 else "medium"
        out.add("hidden.zero-width", "hidden", severity, where,
                f"{len(zero_width)} zero-width/invisible character(s)", raw[max(0, zero_width[0] - 40) : zero_width[0] + 40])
    if ANSI.search(raw):
        out.add("hidden.ansi-escape", "hidden", "high", where,
                "terminal escape sequences (they can hide or rewrite text shown in a terminal)", raw)
    controls = [c for c in raw if unicodedata.category(c) == "Cc" and c not in "\n\r\t\x1b\x9b"]
    if controls:
        out.add("hidden.control-characters", "hidden", "medium", where, f"{len(controls)} control character(s)", raw)
    if (after := _after_padding(raw, WHITE_RUN, lambda run: len(LINE_BREAK.findall(run)) > PADDING_LINES)) is not None:
        out.add("hidden.padding-lines", "hidden", "high", where,
                "text pushed far below the visible part by a run of blank lines", raw[after : after + 121])
    if (after := _after_padding(raw, WIDE_RUN, lambda run: True)) is not None:
        out.add("hidden.padding-spaces", "hidden", "high", where,
                "text pushed out of view by a long run of spaces", raw[after : after + 121])
    if (comment := _html_comment(raw)) is not None:
        out.add("hidden.html-comment", "hidden", "medium", where,
                "an HTML comment (invisible when the description is rendered)", comment)


def _after_padding(raw: str, runs: re.Pattern[str], pads: Callable[[str], bool]) -> int | None:
    """Where visible text starts after the first run of ``runs`` that ``pads``, else ``None``."""
    for run in runs.finditer(raw):
        end = run.end()
        if end < len(raw) and not raw[end].isspace() and pads(run.group()):
            return end
    return None


def _html_comment(raw: str) -> str | None:
    """The first HTML comment with something in it. Found by position, not by ``<!--(.*?)-->``,
    which scans to the end from every opening when none is closed (quadratic)."""
    start = raw.find("<!--")
    while start >= 0:
        end = raw.find("-->", start + 4)
        if end < 0:
            return None  # no comment closes after this opening, nor after any later one
        if raw[start + 4 : end].strip():
            return raw[start : end + 3]
        start = raw.find("<!--", end + 3)
    return None


def _instructions(text: str, where: str, out: _Collector) -> None:
    for pattern, rule, message in (
        (OVERRIDE, "instructions.override", "tells the model to ignore or override its instructions"),
        (OVERRIDE_NOUN_FIRST, "instructions.override", "tells the model to ignore or override its instructions"),
        (CONCEAL_TELL, "instructions.conceal", "tells the model to keep something from the user"),
        (CONCEAL_KNOW, "instructions.conceal", "tells the model to keep something from the user"),
        (CONCEAL_HIDE, "instructions.conceal", "tells the model to keep something from the user"),
        (STEALTH, "instructions.stealth", "asks for an action to be done silently/secretly"),
        (PSEUDO_TAG, "instructions.pseudo-tag", "a pseudo-system tag addressed to the model (e.g. <IMPORTANT>)"),
        (ROLE, "instructions.role", "tries to change the model's role or instructions"),
        (OVERRIDE_ZH, "instructions.override", "tells the model to ignore or override its instructions"),
    ):
        if (match := pattern.search(text)) is not None:
            out.add(rule, "instructions", "high", where, message, _sentence_around(text, match.start(), match.end()))
    if (match := in_other_languages("override", text)) is not None:
        out.add("instructions.override", "instructions", "high", where,
                "tells the model to ignore or override its instructions", _sentence_around(text, match.start(), match.end()))
    if (match := in_other_languages("conceal", text)) is not None:
        out.add("instructions.conceal", "instructions", "high", where, "tells the model to keep something from the user",
                _sentence_around(text, match.start(), match.end()))
    if (match := CONCEAL_ZH.search(text)) is not None and re.search("用户|用戶|使用者", match.group(0)):
        out.add("instructions.conceal", "instructions", "high", where, "tells the model to keep something from the user",
                _sentence_around(text, match.start(), match.end()))
    for pattern, rule, message in (
        (ASK_USER, "instructions.no-confirmation", "tells the model not to ask the user"),
        (PRIORITY, "instructions.priority", "pressure or meta-instructions aimed at the model"),
        (ADDRESSED, "instructions.addressed", "addresses the model directly"),
    ):
        if (match := pattern.search(text)) is not None:
            out.add(rule, "instructions", "medium", where, message, _sentence_around(text, match.start(), match.end()))


#: The rest of a path after a sensitive part, read up to a bound: a text without spaces made every
#: match read to the text's end ("~/.ssh/" 13,000 times: 18 s), and no real path is this long.
_PATH_TOKEN = re.compile(r"[^\s'\"`)]{0,256}")


def _path_token(text: str, end: int) -> str:
    return _PATH_TOKEN.match(text, end).group(0)  # type: ignore[union-attr] -- it matches the empty string


class _Verbs:
    """Where each pattern matches in one text, found once: asked per sentence, a text that is one
    long run of matches ("~/.ssh/" 13,000 times, 90 KB) searched each match's sentence again with
    every pattern -- 13 s for one definition, on the event loop for a prompt or resource."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._starts: dict[re.Pattern[str], list[int]] = {}
        self._boundaries: list[int] | None = None

    def sentence(self, start: int, end: int) -> tuple[int, int]:
        """``_sentence_bounds(text, start, end)``, from the text's sentence ends found once (each
        match scanned up to 1,200 characters around it again)."""
        text = self._text
        if self._boundaries is None:
            self._boundaries = [match.start() for match in _BOUNDARY.finditer(text)]
        ends = self._boundaries
        low = max(0, start - SENTENCE_REACH)
        left = low
        # ``_sentence_bounds`` searches up to ``start``: a stop just before it ends a sentence there
        # even when no space follows (the search's end counts as the text's end).
        if start > low and (_BOUNDARY.match(text[start - 1]) is not None):
            left = start
        else:
            position = bisect.bisect_left(ends, start - 1) - 1
            if position >= 0 and ends[position] >= low:
                left = ends[position] + 1
        right = min(len(text), end + SENTENCE_REACH)
        position = bisect.bisect_left(ends, end)
        if position < len(ends) and ends[position] < right - 1:
            return left, ends[position]
        if right - 1 >= end and _BOUNDARY.match(text[right - 1]) is not None:
            return left, right - 1
        return left, right

    def first(self, pattern: re.Pattern[str], left: int, right: int) -> int | None:
        """Where ``pattern``'s first match within ``text[left:right]`` starts, or None."""
        starts = self._starts.get(pattern)
        if starts is None:
            starts = self._starts[pattern] = [match.start() for match in pattern.finditer(self._text)]
        position = bisect.bisect_left(starts, left)
        return starts[position] if position < len(starts) and starts[position] < right else None

    def unnegated(self, pattern: re.Pattern[str], left: int, right: int) -> int | None:
        """``first``, when no negation comes just before it within the sentence."""
        found = self.first(pattern, left, right)
        if found is None or NEGATION.search(self._text[max(left, found - 25) : found]):
            return None
        return found


def _secrets(text: str, where: str, out: _Collector) -> None:
    verbs = _Verbs(text)
    for match in SENSITIVE_PATH.finditer(text):
        if _path_token(text, match.end()).endswith(".pub") or text[match.end() : match.end() + 4] == ".pub":
            continue  # public keys are meant to be shared
        left, right = verbs.sentence(match.start(), match.end())
        transfer_ok = verbs.unnegated(TRANSFER_VERB, left, right) is not None
        read_ok = verbs.unnegated(READ_VERB, left, right) is not None
        if transfer_ok or (read_ok and verbs.first(URGENT, left, right) is not None):
            out.add("secrets.sensitive-file", "secrets", "high", where,
                    "asks for a credential or configuration file unrelated to the tool", text[left:right])
        else:
            out.add("secrets.mentions-sensitive-file", "secrets", "medium", where,
                    "mentions a credential or configuration file", text[left:right])
        if out.has("secrets.sensitive-file", where) and out.has("secrets.mentions-sensitive-file", where):
            break  # nothing more to find: each rule is reported once per field
    if where.endswith(".properties"):  # a parameter name
        words = set(re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", text.lower()))
        if words & {"ssh", "rsa", "passwd", "mcp", "credentials", "dotenv", "keychain", "wallet"} and words & {
            "content", "contents", "reading", "read", "file", "data", "value",
        }:
            out.add("secrets.parameter-name", "secrets", "high", where,
                    "a parameter whose name asks for the contents of a credential file", text)
    for match in SECRET_NAME.finditer(text):
        left, right = verbs.sentence(match.start(), match.end())
        verb = verbs.first(TRANSFER_VERB, left, right)
        if verb is None:
            verb = verbs.first(READ_VERB, left, right)
        if verb is not None and not NEGATION.search(text[max(left, verb - 25) : verb]):
            sentence = text[left:right]
            severity: Severity = (
                "high" if re.search(r"\b(value|contents?)\b", sentence, re.IGNORECASE) and TRANSFER_VERB.search(sentence) else "medium"
            )
            out.add("secrets.env-secret", "secrets", severity, where, "asks for the value of a secret variable", sentence)
            break
    for match in CREDENTIAL.finditer(text):
        left, right = verbs.sentence(match.start(), match.end())
        if verbs.unnegated(TRANSFER_VERB, left, right) is None or NEGATION.search(text[max(left, match.start() - 40) : match.start()]):
            continue
        sentence = text[left:right]
        if re.search(r"\b(user'?s?|your|the model'?s?|all|every|stored|saved|any)\b", sentence, re.IGNORECASE) and re.search(
            r"\b(in|into|as|to|within|inside)\s+(the\s+)?([`'\"]?\w+[`'\"]?\s+)?(parameter|field|argument|param|note|sidenote|comment|metadata)\b",
            sentence, re.IGNORECASE,
        ):
            out.add("secrets.credential-request", "secrets", "high", where,
                    "asks the model to put credentials into a parameter", sentence)
        else:
            out.add("secrets.credential-mention", "secrets", "low", where, "mentions credentials", sentence)
        break


def _shadowing(text: str, where: str, out: _Collector, context: ScanContext) -> None:
    if (match := AVAILABLE.search(text)) is not None:
        out.add("shadowing.when-available", "shadowing", "high", where,
                "sets rules that apply whenever this tool is merely present (tool shadowing)",
                _sentence_around(text, match.start(), match.end()))
    for match in OTHER_TOOLS.finditer(text):
        sentence = _sentence_around(text, match.start(), match.end())
        severity: Severity = "high" if REDIRECT.search(sentence) else "medium"
        out.add("shadowing.other-tools", "shadowing", severity, where, "sets rules for other tools", sentence)
        break
    for match in WHEN_USING.finditer(text):
        named = match.group(4)
        if named in context.own_tools or named.lower() in ("this", "it", "the"):
            continue
        severity = "high" if named in context.other_tools or REDIRECT.search(_sentence_around(text, match.start(), match.end())) else "medium"
        out.add("shadowing.when-using", "shadowing", severity, where,
                "gives the model rules for using another tool", _sentence_around(text, match.start(), match.end()))
        break
    if not context.other_tools:
        return
    for name in _tool_name_mentions(text, context):
        start = text.find(name)
        sentence = _sentence_around(text, start, start + len(name))
        if MODAL.search(sentence):
            severity = "high" if REDIRECT.search(sentence) and MODAL.search(sentence) else "medium"
            out.add("shadowing.names-other-tool", "shadowing", severity, where,
                    f"an imperative sentence about another server's tool ({context.other_tools[name]})", sentence)
            break


_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]+)+")
#: Runs of identifier characters. ``_IDENTIFIER`` is searched within each run only, and only in runs
#: of at most ``_LONGEST_WORD`` characters: searched over a whole text it backtracks from every
#: position to the end of the word, and one 2 MB "word" in a description froze a crawl for minutes.
_WORD = re.compile(r"[A-Za-z0-9_-]+")
_LONGEST_WORD = 256  # twice the longest tool name a host accepts


def _identifiers(text: str) -> set[str]:
    return {
        name
        for word in _WORD.findall(text)
        if len(word) <= _LONGEST_WORD
        for name in _IDENTIFIER.findall(word)
    }


def _tool_name_mentions(text: str, context: ScanContext) -> list[str]:
    """Distinctive names of other servers' tools (``send_email``, ``getWeather``) found in ``text``."""
    found = []
    for token in _identifiers(text):
        if token in context.other_tools and token not in context.own_tools and len(token) >= 6:
            found.append(token)
    return sorted(found)


def _exfiltration(text: str, where: str, out: _Collector) -> None:
    for match in MD_IMAGE.finditer(text):
        url = match.group(1)
        severity: Severity = "high" if ("?" in url or URL_TEMPLATE.search(url) or "{" in url) else "medium"
        out.add("exfiltration.markdown-image", "exfiltration", severity, where,
                "a markdown image whose URL would be fetched when rendered (a known exfiltration channel)", match.group(0))
        break
    for match in URL.finditer(text):
        url = match.group(0)
        if URL_TEMPLATE.search(url):
            sentence = _sentence_around(text, match.start(), match.end())
            severity = "high" if CONVERSATION.search(sentence) or TAKE_VERB.search(sentence) else "medium"
            out.add("exfiltration.url-template", "exfiltration", severity, where,
                    "a URL with a placeholder to be filled with data", sentence)
            break
    for match in SEND_TO.finditer(text):
        sentence = _sentence_around(text, match.start(), match.end())
        severity = "high" if CONVERSATION.search(sentence) or WHOLE.search(sentence) else "medium"
        out.add("exfiltration.send-to", "exfiltration", severity, where, "asks to send data to an address or URL", sentence)
        break
    verbs = _Verbs(text)  # found once per text: results are scanned on the event loop (200 KB took 4 s)
    for match in CONVERSATION_DUMP.finditer(text):
        left, right = verbs.sentence(match.start(), match.end())
        if verbs.unnegated(TAKE_VERB, left, right) is not None:
            out.add("exfiltration.conversation", "exfiltration", "high", where,
                    "asks for the conversation or system prompt to be passed on", text[left:right])
            break


def _name_rules(record: ToolRecord, context: ScanContext, out: _Collector) -> None:
    name = record.name
    twins = [own for own in context.own_by_case.get(name.casefold(), ()) if own != name]
    if twins:
        # "Wipe" beside "wipe": a deny rule, an approval or a reader takes one for the other.
        out.add("hidden.case-twin-name", "hidden", "high", "name",
                f"the name differs only in letter case from the server's own '{twins[0]}'", name)
    if name.isascii():
        return
    folded = skeleton(name)
    if folded != name and folded in context.other_tools:
        out.add("hidden.homoglyph-name", "hidden", "high", "name",
                f"the name imitates '{folded}' of server '{context.other_tools[folded]}' with look-alike characters", name)
    elif folded != name and folded.isascii():
        out.add("hidden.lookalike-name", "hidden", "high" if folded in context.own_tools else "medium", "name",
                "the name mixes look-alike characters from other scripts", name)


def _length_rules(record: ToolRecord, out: _Collector) -> None:
    description = record.description
    if len(description) > VERY_LONG_TEXT:
        out.add("hidden.very-long", "hidden", "medium", "description",
                f"a very long description ({len(description):,} characters)")
    elif len(description) > LONG_TEXT:
        out.add("hidden.long", "hidden", "low", "description", f"a long description ({len(description):,} characters)")
    if len(description) > 2000:
        blank = sum(1 for c in description if c.isspace())
        if blank / len(description) > 0.5:
            out.add("hidden.whitespace-padding", "hidden", "high", "description",
                    f"{blank:,} of {len(description):,} characters are whitespace (padding that hides text)")


def scan_text(
    text: str, where: str, out: _Collector | None = None, *, context: ScanContext | None = None, in_name: bool = False
) -> list[Finding]:
    """Findings in one text (a tool field, or a tool result)."""
    collector = out or _Collector()
    if not text:
        return collector.findings
    _hidden_characters(text, where, collector, in_name=in_name)
    normalized = skeleton(text)
    hidden = smuggled_text(text)
    encoded = skeleton(decode_base64_runs(normalized))
    for candidate, label in (
        (normalized, where), (hidden, f"{where} (hidden characters)"), (encoded, f"{where} (base64-decoded)")
    ):
        if not candidate:
            continue
        _instructions(candidate, label, collector)
        _secrets(candidate, label, collector)
        _exfiltration(candidate, label, collector)
        if context is not None:
            _shadowing(candidate, label, collector, context)
    _read_letters_joined(normalized, where, collector)
    return collector.findings


def _read_letters_joined(normalized: str, where: str, out: _Collector) -> None:
    """An instruction spelled out letter by letter ("i g n o r e  a l l ...") read as words
    (:func:`join_spaced_letters`); only what quarantines is added."""
    joined = join_spaced_letters(normalized)
    if joined == normalized:
        return
    found = _Collector()
    label = f"{where} (letters joined)"
    _instructions(joined, label, found)
    _add_new_highs(out, found, label)


#: Where a name meets its next word: a run of ``_``, ``-``, ``.`` or spaces, or a change of case.
#: Not index.search.text.split_identifier: the scan cache's digest covers this module only, so what
#: decides a verdict stays in it.
_NAME_BREAK = re.compile(r"[\s_.\-]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
#: What a model reads past as a space in prose: a single line break inside running text (not a
#: blank line, nor one before a list item, heading, quote or table row, which separate), and the
#: joins of a name written in it (not ``.`` or ``-``, which end sentences and join ordinary words).
#: Begun only where a run of blanks begins (``(?<![ \t\n])``): from every blank of a long run, the
#: search for a line break after it took time quadratic in the run (100,000 spaces: 15 s).
_LINE_IN_PROSE = r"(?<![ \t\n])[ \t]*\n[ \t]*(?![\s\-*+#>|\u2022]|\d+[.)])"
_PROSE_BREAK = re.compile(
    _LINE_IN_PROSE + r"|(?<=[A-Za-z0-9])_+(?=[A-Za-z0-9])|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])"
)
#: Only the line breaks of :data:`_PROSE_BREAK`: a result's identifiers stay as they are.
_LINE_BREAK_IN_PROSE = re.compile(_LINE_IN_PROSE)


def _is_name(where: str) -> bool:
    """A field whose text is a name: the tool's, a parameter's, or a schema key's."""
    return where == "name" or where.endswith((".properties", "(a key)", AS_NAME))


def _read_as_words(text: str, where: str, out: _Collector) -> None:
    """``text`` read as the words a model reads in it. An instruction spelled as a name
    (``ignore_all_previous_instructions``, ``doNotTellTheUser``) or one word per line is one the
    phrase rules see only once its words are apart, or together on one line.

    Only what quarantines is added, for a rule not already raised: a name is a label, and the
    weaker rules fire on ordinary ones (a language-model tool's ``system_prompt`` reads as
    "system prompt"). Prose read this way is checked for instructions only."""
    normalized = skeleton(text)
    words = " ".join(part for part in (_NAME_BREAK if _is_name(where) else _PROSE_BREAK).split(normalized) if part)
    if words == normalized and not where.endswith(AS_NAME):
        return  # read already, as it is (a keyword value or key is read only here: "format": "<system>")
    found = _Collector()
    label = f"{where} (read as words)"
    _instructions(words, label, found)
    if _is_name(where):  # in prose the split would break paths apart (id_ed25519.pub is no private key)
        _secrets(words, label, found)
        _exfiltration(words, label, found)
    _add_new_highs(out, found, label)


def _add_new_highs(out: _Collector, found: _Collector, label: str) -> None:
    """The high findings of a second reading (``found``) whose rule ``out`` has not raised yet, under ``label``."""
    raised = {finding.rule for finding in out.findings if finding.severity == "high"}
    for finding in found.findings:
        if finding.severity == "high" and finding.rule not in raised:
            out.add(finding.rule, finding.category, finding.severity, label, finding.message, finding.excerpt)


def scan_tool(record: ToolRecord, context: ScanContext | None = None) -> list[Finding]:
    """Every finding in ``record``'s definition, worst first."""
    context = context or ScanContext()
    out = _Collector()
    _name_rules(record, context, out)
    _length_rules(record, out)
    texts = []
    for where, text in tool_texts(record):
        if not where.endswith(AS_NAME):
            scan_text(text, where, out, context=context, in_name=where == "name")
            texts.append((where, text))
        _read_as_words(text, where, out)
    _split_across_fields(texts, out)
    return sorted(out.findings, key=lambda f: -SEVERITY_ORDER[f.severity])


#: The field named by a finding in text that is only an attack when its fields are read together.
ACROSS_FIELDS = "description and schema, read together"


#: Characters at each end of a field that the reading across fields keeps (a split sentence meets there).
EDGE_CHARS = 500


def _edges(text: str) -> str:
    """``text``, or only its two ends when it is long: each field's inside is scanned on its own
    already, and a line break between the ends keeps a match from spanning the cut."""
    return text if len(text) <= 2 * EDGE_CHARS else f"{text[:EDGE_CHARS]}\n{text[-EDGE_CHARS:]}"


def _split_across_fields(texts: list[tuple[str, str]], out: _Collector) -> None:
    """High findings that only show when the prose fields are read in a row, as a model reads them.

    A model reads the whole definition at once, so "Ignore all" in one parameter's description
    and "previous instructions" in the next is one instruction to it, though neither field
    holds one. Only ``high`` findings of rules no single field already raised are added.
    """
    prose = [_edges(text.strip()) for where, text in texts if where != "name" and not where.endswith(".properties")]
    prose = [text for text in prose if text]
    if len(prose) < 2:
        return
    combined = _Collector()
    joined = skeleton(" ".join(prose))
    _instructions(joined, ACROSS_FIELDS, combined)
    _secrets(joined, ACROSS_FIELDS, combined)
    _exfiltration(joined, ACROSS_FIELDS, combined)
    raised = {finding.rule for finding in out.findings if finding.severity == "high"}
    for finding in combined.findings:
        if finding.severity == "high" and finding.rule not in raised:
            out.findings.append(finding)


def scan_result_text(text: str) -> list[Finding]:
    """Injection markers in a tool *result* (flagged in the trajectory, never blocked)."""
    out = _Collector()
    if not text:
        return []
    _hidden_characters(text, "result", out, in_name=False)
    normalized = skeleton(text)
    encoded = skeleton(decode_base64_runs(normalized))
    for candidate, label in (
        (normalized, "result"), (smuggled_text(text), "result (hidden characters)"), (encoded, "result (base64-decoded)")
    ):
        if candidate:
            _instructions(candidate, label, out)
            _exfiltration(candidate, label, out)
    _read_letters_joined(normalized, "result", out)
    # A hard-wrapped instruction ("ignore all previous\ninstructions") reads as one line to a model.
    joined = _LINE_BREAK_IN_PROSE.sub(" ", normalized) if "\n" in normalized else normalized
    if joined != normalized:
        found = _Collector()
        _instructions(joined, "result (lines joined)", found)
        _add_new_highs(out, found, "result (lines joined)")
    return [f for f in out.findings if f.severity == "high"]  # web pages often carry a stray zero-width space
