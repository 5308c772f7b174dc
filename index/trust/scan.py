"""Tool-poisoning scan: what published attacks hide in tool definitions, found before a model reads it.

Every text a model may read -- name, title, description, and each string and property name in
the input and output schemas -- is checked against the attack classes of the published
tool-poisoning work (Invariant Labs' ``<IMPORTANT>`` tool, tool shadowing, "line jumping",
full-schema poisoning, ASCII smuggling, rug pulls):

- ``instructions``: text that addresses the model rather than describing the tool -- override
  phrases and concealment from the user (both in English, Chinese and eight more languages),
  pseudo-system tags, role hijacks;
- ``secrets``: requests to read or pass on credentials and files unrelated to a tool
  (``~/.ssh``, ``.env``, ``mcp.json``, ``*_API_KEY`` values);
- ``shadowing``: rules about *other* tools ("when this tool is available, send_email must…"),
  names of other servers' tools in imperative sentences;
- ``hidden``: invisible Unicode (zero-width and other format characters, Unicode tag characters
  and runs of variation selectors that smuggle text, both decoded and scanned), bidi
  controls, ANSI escapes, whitespace padding that pushes text out of view, homoglyph names
  that impersonate another server's tool;
- ``exfiltration``: URLs and addresses that would carry conversation data or secrets out.

Matching runs on a normalized copy (NFKC, confusable letters folded to ASCII, invisible
characters removed), so ``ignоre`` with a Cyrillic ``о`` or ``ig\u200bnore`` still match. The
prose fields are also read together, as a model reads them, so an instruction split over
several parameter descriptions is found too, and every field is also read as words: a name split
at ``_``, ``-``, ``.`` and case changes (``ignore_all_previous_instructions``), prose with its line
breaks as spaces.
Each finding has a severity; a ``high`` finding quarantines the tool. The thresholds were
set so that no tool of the real LiveMCPTool catalogs (488 crawled here, 527 in LiveMCPBench's
snapshot) is high (``python -m bench trust``).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Literal

from pydantic import BaseModel

from index.catalog.records import ToolRecord

Severity = Literal["high", "medium", "low"]
Category = Literal["instructions", "secrets", "shadowing", "hidden", "exfiltration"]
SEVERITY_ORDER: dict[str, int] = {"low": 1, "medium": 2, "high": 3}

#: Longest excerpt kept in a finding.
EXCERPT_CHARS = 160


class Finding(BaseModel):
    """One suspicious thing in one field of a tool definition (or a tool result)."""

    rule: str
    category: Category
    severity: Severity
    field: str
    message: str
    excerpt: str = ""

    def line(self) -> str:
        """One line for people (the excerpt is made visible and bounded)."""
        shown = f": {self.excerpt}" if self.excerpt else ""
        return f"[{self.severity}] {self.field}: {self.message}{shown}"


def worst(findings: Iterable[Finding]) -> Severity | None:
    best: Severity | None = None
    for finding in findings:
        if best is None or SEVERITY_ORDER[finding.severity] > SEVERITY_ORDER[best]:
            best = finding.severity
    return best


# ---------------------------------------------------------------------------------------------
# characters

_TAG_CHARS = range(0xE0000, 0xE0080)
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_DIRECTION_MARKS = frozenset("\u200e\u200f\u061c")
_ZERO_WIDTH = frozenset(
    "\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e\u034f\u00ad\u115f\u1160\u3164\uffa0"
)
_ZWJ = "\u200d"
#: Variation selectors (standard, Mongolian, supplement). One after an emoji or an ideograph picks
#: its glyph; a run of them carries bytes a model can read but people cannot see ("emoji smuggling").
_VARIATION_SELECTORS = frozenset(
    chr(code) for code in (*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0), *range(0x180B, 0x1810))
)
_VARIATION_RUN = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2,}")
#: Format characters that render as a visible sign (Arabic number signs and the like): not hidden.
_VISIBLE_FORMAT = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd")
_KEYCAP = "\u20e3"
_WIDE_SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"


def visible(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` with every invisible or control character shown as ``<U+XXXX>``, bounded."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if char in "\n\t":
            out.append(" ")
        elif (
            code in _TAG_CHARS
            or char in _BIDI_CONTROLS
            or char in _ZERO_WIDTH
            or char in _DIRECTION_MARKS
            or char in _VARIATION_SELECTORS
            or unicodedata.category(char) in ("Cc", "Cf", "Co", "Cn")
        ):
            out.append(f"<U+{code:04X}>")
        else:
            out.append(char)
    shown = re.sub(r" {2,}", " ", "".join(out)).strip()
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _is_emoji(char: str) -> bool:
    return unicodedata.category(char) == "So" or 0x1F000 <= ord(char) <= 0x1FAFF


def _invisible(char: str) -> bool:
    """A character that shows nothing: zero-width, variation selector, or any other format character."""
    return (
        char in _ZERO_WIDTH
        or char in _VARIATION_SELECTORS
        or char in "\u17b4\u17b5"  # Khmer inherent vowels, invisible combining marks
        or (unicodedata.category(char) == "Cf" and char not in _VISIBLE_FORMAT)
    )


def _in_selector_run(raw: str, index: int) -> bool:
    return (index > 0 and raw[index - 1] in _VARIATION_SELECTORS) or (
        index + 1 < len(raw) and raw[index + 1] in _VARIATION_SELECTORS
    )


def _selects_a_glyph(raw: str, index: int) -> bool:
    """Whether the variation selector at ``index`` is the ordinary kind: one, after an emoji, a
    symbol, an ideograph, or a keycap base (``1\ufe0f\u20e3``)."""
    before = raw[index - 1] if index > 0 else ""
    after = raw[index + 1] if index + 1 < len(raw) else ""
    if not before or before in _VARIATION_SELECTORS or after in _VARIATION_SELECTORS:
        return False
    if after == _KEYCAP:
        return True
    return not before.isascii() and (_is_emoji(before) or unicodedata.category(before) in ("Lo", "Sm", "Sc", "Sk", "Mn"))


@lru_cache(maxsize=4096)
def _ascii_lookalike(char: str) -> str:
    """The ASCII letter or digit ``char`` is confusable with (TR39 data), else ``char``."""
    from confusable_homoglyphs import categories, confusables

    if categories.alias(char) not in ("CYRILLIC", "GREEK", "LATIN", "ARMENIAN", "CHEROKEE", "COMMON"):
        return char
    found = confusables.is_confusable(char, greedy=True, preferred_aliases=["latin"])
    if not found:
        return char
    for homoglyph in found[0]["homoglyphs"]:
        candidate = homoglyph["c"]
        if len(candidate) == 1 and candidate.isascii() and candidate.isalnum():
            return candidate
    return char


def skeleton(text: str) -> str:
    """NFKC, invisible characters removed, confusable letters folded to their ASCII look-alikes."""
    if text.isascii():
        return text
    folded = unicodedata.normalize("NFKC", text)
    out = []
    for char in folded:
        if char.isascii():  # (most of any text: no category lookup for it)
            out.append(char)
            continue
        if _invisible(char) or char in _BIDI_CONTROLS or char in _DIRECTION_MARKS or ord(char) in _TAG_CHARS:
            continue  # also every other format character and variation selector: ig\u206anore is ignore
        if unicodedata.combining(char) and out and out[-1].isascii() and out[-1].isalpha():
            continue  # a mark stacked on a Latin letter: "g\u0308" (no precomposed form) reads as g
        out.append(_latin_base(char) or _ascii_lookalike(char))
    return "".join(out)


@lru_cache(maxsize=4096)
def _latin_base(char: str) -> str | None:
    """The ASCII letter an accented letter is written on ("ï" -> "i"), else ``None``: "Ïgnörë
    prëvïöüs ïnstrüctïöns" read as ignore previous instructions to a model, not to the rules."""
    decomposed = unicodedata.normalize("NFD", char)
    base, marks = decomposed[0], decomposed[1:]
    if base.isascii() and base.isalpha() and marks and all(unicodedata.combining(mark) for mark in marks):
        return base
    return None


def decode_tag_characters(text: str) -> str:
    """The ASCII text smuggled in Unicode tag characters (U+E0020..U+E007E), if any."""
    return "".join(chr(ord(c) - 0xE0000) for c in text if 0xE0020 <= ord(c) <= 0xE007E)


def _selector_byte(char: str) -> int:
    code = ord(char)
    return code - 0xFE00 if code < 0xE0100 else code - 0xE0100 + 16


def decode_variation_selectors(text: str) -> str:
    """Bytes smuggled in runs of variation selectors (U+FE00..FE0F = 0..15, U+E0100..E01EF = 16..255)."""
    runs = (bytes(_selector_byte(c) for c in run.group(0)) for run in _VARIATION_RUN.finditer(text))
    return " ".join(run.decode("utf-8", errors="replace") for run in runs)


#: A run that may be base64 (standard or URL-safe alphabet) long enough to hold an instruction.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/=_-])")
#: Runs longer than this are data (an image, a file), not a hidden sentence; and at most this many
#: runs are decoded per text, so a result full of base64 costs a bounded amount.
_BASE64_MAX_RUN = 8192
_BASE64_MAX_RUNS = 32


def decode_base64_runs(text: str) -> str:
    """The text hidden in base64 runs of ``text`` that decode to readable UTF-8 prose, if any: a
    model decodes "SWdub3JlIGFsbCBwcmV2aW91cyBpbnN0cnVjdGlvbnM=" when told to, and the rules did not."""
    found: list[str] = []
    decoded_runs = 0
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0)
        if len(run) > _BASE64_MAX_RUN or run.isalpha() or run.isdigit():
            continue  # data, or a long word or number: no base64 of a sentence is all letters or digits
        decoded_runs += 1
        if decoded_runs > _BASE64_MAX_RUNS:
            break
        prose = _base64_prose(run)
        if prose:
            found.append(prose)
    return " ".join(found)


def _base64_prose(run: str) -> str | None:
    """The prose a base64 run (standard or URL-safe alphabet, padding optional) decodes to, or None."""
    body = run.rstrip("=")
    alphabet = b"-_" if ("-" in body or "_" in body) else None
    if alphabet and ("+" in body or "/" in body):
        return None
    if len(body) % 4 == 1:  # one stray character cannot end base64: a run cut out of longer text
        body = body[:-1]
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=alphabet, validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    readable = sum(char.isprintable() or char in "\n\t" for char in decoded)
    if " " not in decoded or readable < 0.95 * len(decoded):
        return None
    return decoded


#: Single letters kept apart by a separator ("i g n o r e", "i-g-n-o-r-e", "i.g.n.o.r.e"), five or more.
_SPACED_LETTERS = re.compile(r"(?<![A-Za-z0-9])(?:[A-Za-z][ .\-_*|·/]{1,3}){4,}[A-Za-z](?![A-Za-z0-9])")


_LETTER_OR_GAP = re.compile(r"[A-Za-z]|[^A-Za-z]+")


def join_spaced_letters(text: str) -> str:
    """``text`` with each run of spaced-out letters written as words: the separator seen most
    often in a run is the one inside words, any other a word break ("i g n o r e   a l l" and
    "i-g-n-o-r-e a-l-l" both read "ignore all")."""

    def joined(match: re.Match[str]) -> str:
        tokens = _LETTER_OR_GAP.findall(match.group(0))
        counts = Counter(tokens[1::2])  # the run alternates letter, gap, letter ...
        inside = max(sorted(counts), key=lambda gap: (counts[gap], -len(gap)))
        return "".join(token if index % 2 == 0 else ("" if token == inside else " ") for index, token in enumerate(tokens))

    return _SPACED_LETTERS.sub(joined, text)


def _smuggled(text: str) -> str:
    """Text hidden in invisible characters (tag characters, variation-selector runs), if any."""
    if text.isascii():
        return ""
    return " ".join(part for part in (decode_tag_characters(text), decode_variation_selectors(text)) if part)


# ---------------------------------------------------------------------------------------------
# patterns (matched on the skeleton, case-insensitively)

_F = re.IGNORECASE
_SENTENCE = r"(?:[^.\n!?。！？]|[.!?](?=\S))"

_OVERRIDE = re.compile(
    r"\b(ignore|disregard|forget|override|bypass|overrule)\b" + _SENTENCE + r"{0,40}?"
    r"\b(previous|prior|above|earlier|preceding|all|any|other|system|original|existing|your|safety)\b"
    + _SENTENCE
    + r"{0,30}?\b(instructions?|prompts?|rules|guidelines|directives|messages|guardrails|constraints|polic(y|ies))\b",
    _F,
)
#: The override with its noun first: "ignore the instructions above", "disregard the prompt you were
#: given". Only nouns that name what a model was told: "ignore lint rules above level 3" is no attack.
_OVERRIDE_NOUN_FIRST = re.compile(
    r"\b(ignore|disregard|forget|override|bypass|overrule)\b" + _SENTENCE + r"{0,20}?"
    r"\b(instructions|prompts?|directives|guidelines|guardrails)\b" + _SENTENCE + r"{0,20}?"
    r"\b(above|before\s+this|so\s+far|you\s+(were|have\s+been)\s+given|you\s+(got|received|have))\b",
    _F,
)
_CONCEAL_TELL = re.compile(
    r"\b(do not|don'?t|dont|never|must not|should not|shouldn'?t|cannot|without|avoid)\s+(ever\s+)?"
    r"(let(ting)?\s+(the\s+)?(users?|human|person|operator|owner)\s+(know|see|notice|find\s+out)\b|"
    r"(tell(ing)?|inform(ing)?|notify(ing)?|alert(ing)?|mention(ing)?|reveal(ing)?|disclos(e|ing)|show(ing)?|warn(ing)?|"
    r"report(ing)?|explain(ing)?)\b" + _SENTENCE + r"{0,30}?\b(the\s+)?(users?|human|person|operator|owner)\b)",
    _F,
)
_CONCEAL_KNOW = re.compile(
    r"\b(users?|human)\b" + _SENTENCE + r"{0,20}?\b(must|should|shall|will|need|may)\s*(not|never|n't)\s+"
    r"(know|see|notice|find out|learn|be\s+(told|informed|aware|notified|shown|alerted))\b",
    _F,
)
_CONCEAL_HIDE = re.compile(
    r"\b(keep|hide|conceal|mask)\b" + _SENTENCE + r"{0,40}?\bfrom\s+the\s+(users?|human)\b", _F
)
_STEALTH = re.compile(
    r"\b(silently|secretly|covertly|stealthily|quietly|invisibly|discreetly)\b" + _SENTENCE + r"{0,30}?"
    r"\b(send|read|include|add|forward|upload|copy|exfiltrate|call|pass|post|append|attach|transmit|leak|bcc|cc)\b",
    _F,
)
_OVERRIDE_ZH = re.compile(
    r"(忽略|无视|無視|忘记|忘記|忘掉|不要理会|不要理會)(之前|以前|先前|上面|上述|前面|所有|一切|系统|系統|原有)(的)?(所有|全部|一切)?(的)?"
    r"(指令|指示|说明|說明|规则|規則|提示|设定|設定|要求)"
)


def _override_words(verbs: str, qualifiers: str, nouns: str, *, verb_last: bool = False) -> str:
    """An override in another language: "ignore" then "all previous instructions" (either word order
    of the two), and, for a language that may put the verb last, "all previous instructions ignore"."""
    s = _SENTENCE
    first = rf"(?:{verbs}){s}{{0,40}}?(?:(?:{qualifiers}){s}{{0,25}}?(?:{nouns})|(?:{nouns}){s}{{0,25}}?(?:{qualifiers}))"
    return first + (rf"|(?:{qualifiers}){s}{{0,25}}?(?:{nouns}){s}{{0,30}}?(?:{verbs})" if verb_last else "")


#: The override in the other languages an attacker may write it in (English and Chinese above):
#: Spanish, Portuguese, Italian, French, German, Russian, Japanese, Korean; each with its gate
#: (:data:`_GATES`), so a text without what it needs is not searched for it.
_OVERRIDE_OTHER_LANGUAGES = (
    (
        "latin-override",
        _override_words(
            r"\b(?:ignora|ignore|ignoren|ignorem|ignorate|ignori|ignorez|ignorer|olvida|olvide|olviden|omite|descarta|"
            r"esque[çc]a|esque[çc]am|desconsidere|dimentica|dimentichi|dimenticate|oublie[rz]?|"
            r"ne\s+tiens\s+pas\s+compte|ne\s+tenez\s+pas\s+compte)\b",
            r"\b(?:anteriores|previas|pr[ée]vias|precedentes|precedenti|todas|tutte|toutes|pr[ée]c[ée]dentes|"
            r"ant[ée]rieures|ci-dessus)\b",
            r"\b(?:instrucciones|indicaciones|reglas|instru[çc][õo]es|regras|orienta[çc][õo]es|istruzioni|regole|"
            r"indicazioni|instructions|consignes|r[èe]gles|directives)\b",
        ),
    ),
    (
        "latin-override",
        _override_words(
            r"\b(?:ignorier\w*|vergiss|vergessen|missachte\w*)\b",
            r"\b(?:vorherige\w*|bisherige\w*|fr[üu]here\w*|obige\w*|alle)\b",
            r"\b(?:anweisungen|instruktionen|regeln|befehle|vorgaben)\b",
            verb_last=True,
        ),
    ),
    (
        "cyrillic",
        _override_words(
            r"(?:игнорируй\w*|игнорировать|забудь\w*|забыть|не\s+обращай\w*\s+внимани\w*)",
            r"(?:предыдущ\w*|прежн\w*|вс[еёя]\w*|системн\w*|выше)",
            r"(?:инструкци\w*|указани\w*|правил\w*|команд\w*)",
            verb_last=True,
        ),
    ),
    (
        "cjk",
        r"(?:以前|前|これまで|今まで|上記|上|すべて|全て|システム)の?(?:すべての|全ての)?(?:指示|命令|ルール|指令|プロンプト)"
        r"(?:を|は)?(?:すべて|全て)?(?:無視|忘れ)",
    ),
    (
        "cjk",
        r"(?:이전|앞|위|모든|기존|시스템)(?:의)?\s*(?:모든\s*)?(?:지시|명령|지침|규칙|프롬프트)(?:사항)?(?:을|를|은|는)?\s*"
        r"(?:모두\s*|전부\s*)?(?:무시|잊)",
    ),
)


#: Keeping something from the user, in the same languages ("do not tell the user").
_CONCEAL_OTHER_LANGUAGES = (
    ("latin-conceal", r"\bno\s+(?:le\s+|les\s+)?(?:digas|diga|digan|menciones|mencione|informes|informe|reveles|revele|cuentes|cuente)\b"
     + _SENTENCE + r"{0,30}?\b(?:al|a\s+los)\s+usuarios?\b"),
    ("latin-conceal", r"\bn[ãa]o\s+(?:conte|diga|mencione|informe|revele)\b" + _SENTENCE + r"{0,30}?\b(?:ao|aos)\s+usu[áa]rios?\b"),
    ("latin-conceal", r"\bnon\s+(?:dire|dirlo|menzionare|informare|rivelare|dica|dite)\b" + _SENTENCE + r"{0,30}?\butent[ei]\b"),
    ("latin-conceal", r"\bne\s+(?:le\s+|lui\s+)?(?:dis|dites|mentionne[rz]?|r[ée]v[èe]le[rz]?|informe[rz]?|signale[rz]?)\s+(?:rien\s+|pas\s+)"
     + _SENTENCE + r"{0,30}?\b(?:l'|les?\s+)?utilisateurs?\b"),
    ("latin-conceal", r"\b(?:sag\w*|erw[äa]hn\w*|verr[äa]t\w*|informier\w*|teil\w*)\b" + _SENTENCE
     + r"{0,30}?\b(?:dem|den)\s+(?:benutzer\w*|nutzer\w*|anwender\w*)\b" + _SENTENCE + r"{0,20}?\bnichts?\b"),
    ("latin-conceal", r"\b(?:dem|den)\s+(?:benutzer\w*|nutzer\w*|anwender\w*)\s+nichts?\b" + _SENTENCE
     + r"{0,30}?\b(?:sag\w*|erw[äa]hn\w*|verr[äa]t\w*|mitteil\w*)\b"),
    ("cyrillic", r"не\s+(?:говори\w*|сообщай\w*|рассказывай\w*|упоминай\w*|сообщать|говорить)\s+(?:об\s+этом\s+)?пользовател\w*"),
    ("cjk", r"(?:ユーザー|利用者)(?:に|へ)(?:は)?(?:言わ|伝え|知らせ|教え|報告し)ない"),
    ("cjk", r"(?:사용자|유저)(?:에게|한테)\s*(?:는\s*)?(?:말하지|알리지|알려주지|공개하지)\s*(?:마|말)"),
)
_OtherLanguageRule = Literal["override", "conceal"]
#: What a text must hold for a pattern to be searched in it, which is far cheaper than the
#: pattern (tool results are scanned on every call): the script it is written in (after folding,
#: Russian keeps letters such as и, л, п that have no Latin look-alike), or for the Latin-script
#: languages the nouns each of their patterns needs ("instructions", "the user").
_GATES: dict[str, tuple[str, ...] | re.Pattern[str]] = {
    # Words, looked for in the lowercased text (a plain substring search: a case-insensitive regex
    # alternation of them took longer than the patterns it gates).
    "latin-override": (
        "instru", "istru", "indica", "regl", "regra", "regol", "orienta", "consign", "règle", "regle", "directive",
        "anweisung", "regeln", "befehl", "vorgabe",
    ),
    "latin-conceal": ("usuári", "usuari", "utent", "utilisateur", "benutzer", "nutzer", "anwender"),
    "cyrillic": re.compile("[\u0400-\u04ff]"),
    "cjk": re.compile("[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]"),
}


def _skeleton_pattern(source: str) -> str:
    """``source`` as it must read to match a skeleton: each letter with a look-alike becomes what
    it folds to, in either case ("Н" folds to Latin "H" but "н" stays Cyrillic, so "Не говори"
    would not match "не говори" case-insensitively)."""
    out: list[str] = []
    in_class = False
    for char in source:
        if char == "[" and not in_class:
            in_class = True
            out.append(char)
        elif char == "]" and in_class:
            in_class = False
            out.append(char)
        elif char.isascii() or not char.isalpha():
            out.append(char)
        else:
            forms = "".join(dict.fromkeys(skeleton(form) for form in (char, char.lower(), char.upper())))
            out.append(forms if in_class or len(forms) == 1 else f"[{forms}]")
    return "".join(out)


@lru_cache(maxsize=2)
def _other_languages(kind: _OtherLanguageRule) -> tuple[tuple[tuple[str, ...] | re.Pattern[str], re.Pattern[str]], ...]:
    """(gate, pattern) of the ``"override"`` or ``"conceal"`` patterns in other languages,
    compiled on first use from the words' skeletons (:func:`_skeleton_pattern`), since the text is
    matched as a skeleton (Cyrillic letters with a Latin look-alike are folded to it)."""
    sources = _OVERRIDE_OTHER_LANGUAGES if kind == "override" else _CONCEAL_OTHER_LANGUAGES
    return tuple((_GATES[gate], re.compile(_skeleton_pattern(source), _F)) for gate, source in sources)


def _in_other_languages(kind: _OtherLanguageRule, text: str) -> re.Match[str] | None:
    lowered: str | None = None
    for gate, pattern in _other_languages(kind):
        if isinstance(gate, tuple):
            lowered = text.lower() if lowered is None else lowered
            if not any(word in lowered for word in gate):
                continue
        elif not gate.search(text):
            continue
        if (match := pattern.search(text)) is not None:
            return match
    return None


#: Simplified and Traditional forms (用户 / 用戶, 告诉 / 告訴 ...).
_CONCEAL_ZH = re.compile(
    r"(不要|别|別|切勿|不得|禁止|无需|無需|不必)(向|对|對)?(用户|用戶|使用者)?"
    r"(告诉|告訴|通知|提醒|告知|透露|提及|说明|說明)(用户|用戶|使用者)?"
)
_ASK_USER = re.compile(r"\b(do not|don'?t|never|without)\s+(ask(ing)?|consult(ing)?|confirm(ing)?\s+with)\s+the\s+user\b", _F)
_PSEUDO_TAG = re.compile(
    r"<\s*/?\s*(important|system|sys|instructions?|admin|secret|hidden|prompt|assistant|im_start|im_end|critical|"
    r"override|developer|tool_?instructions?)\b[^<>]{0,40}>|<\|im_(start|end)\|>|\[/?(system|inst|important)\]|<<\s*/?sys\s*>>"
    # Other chat templates' turn markers (Llama 3, Phi-3/Zephyr, GPT, Gemma): nothing a tool describes.
    r"|<\|\s*(start_header_id|end_header_id|eot_id|begin_of_text|end_of_text|endoftext|im_sep|system|user|assistant|end)\s*\|>"
    r"|<\s*(start|end)_of_turn\s*>",
    _F,
)
_ROLE = re.compile(
    r"\byou are now\b|\bnew (system )?instructions?\s*:|\bfrom now on\b" + _SENTENCE + r"{0,40}?\b(you|always|never|must)\b"
    r"|\b(enter|switch to|activate)\b" + _SENTENCE + r"{0,15}?\b(developer|god|admin|jailbreak|dan)\s+mode\b",
    _F,
)
_PRIORITY = re.compile(
    r"\bthis is (very |extremely |critically |really )?(important|critical|mandatory)\b"
    r"|\botherwise\b" + _SENTENCE + r"{0,20}?\b(tool|application|system|server|app|function)\b" + _SENTENCE
    + r"{0,15}?\b(will|would)\s+(not work|crash|fail|break|stop working|be (blocked|disabled))\b"
    r"|\b(system prompt|developer message)\b",
    _F,
)
_ADDRESSED = re.compile(
    r"\b(as an? (ai|assistant|language model|llm)|dear (ai|assistant|model|claude|gpt)|(ai|assistant|model|llm|agent)\s*:\s*(you|please|always))\b",
    _F,
)

_SENSITIVE_PATH = re.compile(
    r"(~|\$home|%userprofile%|/home/[\w.-]+|/root|/users/[\w.-]+)?/?\.ssh\b|\bid_(rsa|dsa|ecdsa|ed25519)\b"
    r"|\.aws/(credentials|config)\b|\.config/gcloud\b|\.azure/|\.kube/config\b|\.docker/config\.json\b"
    r"|\.npmrc\b|\.pypirc\b|\.netrc\b|\.git-credentials\b|\.gnupg\b|/etc/(passwd|shadow|sudoers)\b"
    r"|\bmcp\.json\b|\bclaude_desktop_config\.json\b|\.cursor/|\.codeium/|\bwallet\.dat\b|\bkeychain\b"
    r"|\.(bash|zsh)_history\b|\bcookies\.sqlite\b|\blogin data\b"
    r"|(^|[\s'\"`(/~])\.env(\.[a-z]+)?(?![\w.])",
    _F,
)
_SECRET_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_(API_KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PAT)\b")
_CREDENTIAL = re.compile(
    r"\b(api[ _-]?keys?|passwords?|passphrases?|private keys?|secret keys?|access tokens?|auth(entication)? tokens?|"
    r"bearer tokens?|session (tokens?|cookies?)|credentials|seed phrases?|mnemonic( phrase)?|ssh keys?|"
    r"environment variables?|env vars?)\b",
    _F,
)
_TRANSFER_VERB = re.compile(
    r"\b(include|send|pass|attach|provide|upload|copy|output|print|append|insert|put|forward|share|paste|dump|add|"
    r"embed|enclose|supply|give|post|transmit|submit|leak|exfiltrate)\b|(发送|上传|传入|附加|附上|包含|复制|提供|填入)",
    _F,
)
_READ_VERB = re.compile(
    r"\b(read|cat|open|load|fetch|get|retrieve|extract|collect|access|grab|scan)\b|(读取|获取|打开)", _F
)
_TAKE_VERB = re.compile(_TRANSFER_VERB.pattern + "|" + _READ_VERB.pattern, _F)
_URGENT = re.compile(
    r"\b(must|should|always|first|before (using|calling|invoking|running)|required|mandatory|important|need to|make sure)\b"
    r"|(必须|首先|务必|之前)",
    _F,
)
_NEGATION = re.compile(
    r"\b(not|never|no|cannot|can't|won't|don't|doesn't|refuses? to|deny|denies|block(s|ed)?|protect(s|ed)?|"
    r"exclud(e|es|ed|ing)|without|avoid|redact(s|ed)?|except)\b",
    _F,
)

_AVAILABLE = re.compile(
    r"\bwhen(ever)? (this|the present|the current) (tool|server|function|plugin) is (available|present|loaded|installed|"
    r"enabled|connected|active|in use)\b",
    _F,
)
_OTHER_TOOLS = re.compile(
    r"\b(all|any|every|other)\b" + _SENTENCE + r"{0,15}?\b(tools?|functions?|servers?)\b" + _SENTENCE
    + r"{0,40}?\b(must|should|shall|need to|have to|are required to|are to)\b",
    _F,
)
_REDIRECT = re.compile(
    r"\b(send|sent|forward|redirect|bcc|cc|recipient|to address|instead|replace|change|route|mirror|copy)\b", _F
)
_WHEN_USING = re.compile(
    r"\bwhen(ever)? (using|calling|invoking|running|executing) (the )?[`'\"]?([\w.-]+)[`'\"]?( (tool|function|command))?"
    r",?\s+(you must|you should|always|also|make sure|be sure|first|remember|ensure|never)\b",
    _F,
)
_MODAL = re.compile(r"\b(must|should|always|never|instead|also|whenever|make sure|ensure|required)\b", _F)

_MD_IMAGE = re.compile(r"!\[[^\]]{0,100}\]\(\s*(https?://[^\s)]+)", _F)
_URL = re.compile(r"https?://[^\s)'\"<>`]+", _F)
_URL_TEMPLATE = re.compile(r"[?&#][\w.-]+=\s*(\{\{?|\$\{|<|%s|\[|\$\w)", _F)
_SEND_TO = re.compile(
    r"\b(send|post|upload|forward|transmit|exfiltrate|leak|report|copy|bcc|cc|e-?mail|mail|beacon|ping)\w*\b"
    + _SENTENCE
    + r"{0,60}?\b(to|at|via|into)\s+(https?://\S+|[\w.+-]+@[\w-]+\.[\w.]+)",
    _F,
)
_CONVERSATION = re.compile(
    r"\b(conversation|chat|dialog(ue)?|message history|chat history|context window|previous messages|prior messages|"
    r"earlier messages|all messages|system prompt|instructions you (were|have been) given|user'?s? (messages|data|files)|"
    r"(secret|credential|password|api key|token)s?)\b",
    _F,
)
_WHOLE = re.compile(r"\b(full|entire|complete|whole|all|every|verbatim)\b", _F)
_CONVERSATION_DUMP = re.compile(
    r"\b(full|entire|complete|whole|all( of)?( the)?|every|verbatim)\b" + _SENTENCE + r"{0,20}?"
    r"\b(conversation|chat|dialog(ue)?|message history|chat history|context window|previous messages|prior messages|"
    r"earlier messages|system prompt|messages (so far|above))\b",
    _F,
)
_ANSI = re.compile(r"\x1b[\[\]()#;?]|\x9b")
#: Maximal runs of white space, each matched once (a pattern that must see text after the run
#: backtracks from every line of it: 20,000 newlines with nothing after took 16 s).
_WHITE_RUN = re.compile(r"[\s" + _WIDE_SPACES + r"]+")
_WIDE_RUN = re.compile(r"[ \t" + _WIDE_SPACES + r"]{60,}")
#: Line breaks as text shows them (``\r\n`` counts once): Windows-built servers end lines so.
_LINE_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x85\u2028\u2029]")
#: Blank lines in a row that push the text after them out of view.
PADDING_LINES = 6

#: Descriptions longer than these are reported (real tools here stay under 6,000 characters).
LONG_TEXT = 10_000
VERY_LONG_TEXT = 30_000


# ---------------------------------------------------------------------------------------------
# what is scanned


@dataclass(frozen=True)
class ScanContext:
    """What a tool is compared with: tool names of *other* servers (shadowing, homoglyphs)."""

    other_tools: Mapping[str, str] = field(default_factory=dict)  # tool name -> a server that has it
    own_tools: frozenset[str] = frozenset()

    @classmethod
    def from_records(cls, records: Iterable[ToolRecord], server: str) -> ScanContext:
        other: dict[str, str] = {}
        own: set[str] = set()
        for record in records:
            if record.server == server:
                own.add(record.name)
            else:
                other.setdefault(record.name, record.server)
        return cls(other_tools=other, own_tools=frozenset(own))

    @cached_property
    def own_by_case(self) -> dict[str, list[str]]:
        """The server's own tool names by their case-folded form (case twins share one)."""
        folded: dict[str, list[str]] = {}
        for name in sorted(self.own_tools):
            folded.setdefault(name.casefold(), []).append(name)
        return folded

    @cached_property
    def digest(self) -> str:
        """Identifies what a scan compares against (part of a remembered scan result's key)."""
        shape = [sorted(self.own_tools), sorted(self.other_tools.items())]
        return hashlib.sha256(json.dumps(shape, ensure_ascii=False).encode()).hexdigest()[:16]


#: Schema keywords whose value is a name or a reference, not scanned as prose when it looks like one
#: -- but a model reads them all the same, so a value with spaces in it (prose) is scanned, and
#: one without is read as the words of a name (:data:`AS_NAME`).
_KEYWORD_VALUES = frozenset({"$schema", "$id", "$ref", "type", "format"})
_TOKEN = re.compile(r"[\x21-\x7e]{1,200}")  # printable ASCII without spaces
#: Marks an identifier of a schema (a key, a ``format`` or ``$ref`` value): only read as words, for
#: what quarantines (an ordinary identifier is no prose, and the weaker rules would fire on it).
AS_NAME = "(a name)"


def _schema_texts(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            key = str(key)
            if key in _KEYWORD_VALUES and isinstance(inner, str) and _TOKEN.fullmatch(inner):
                yield f"{path}.{key} {AS_NAME}", inner  # "format": "IgnoreAllPreviousInstructions"
                continue
            if key == "properties" and isinstance(inner, Mapping):
                for name, prop in inner.items():
                    yield f"{path}.properties", str(name)
                    yield from _schema_texts(prop, f"{path}.properties.{name}")
                continue
            if not _TOKEN.fullmatch(key):  # a key that is prose ($defs names, unknown keywords)
                yield f"{path} (a key)", key
            else:  # a $defs name or an x- keyword a model reads as words: "ignore_all_previous_instructions"
                yield f"{path} {AS_NAME}", key
            yield from _schema_texts(inner, f"{path}.{key}")  # additionalProperties, $defs: schemas too
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            yield from _schema_texts(inner, f"{path}[{position}]")


def tool_texts(record: ToolRecord) -> Iterator[tuple[str, str]]:
    """(field, text) of everything a model may read in ``record``."""
    yield "name", record.name
    if record.title:
        yield "title", record.title
    yield "description", record.description
    yield from _schema_texts(record.input_schema, "inputSchema")
    if record.output_schema:
        yield from _schema_texts(record.output_schema, "outputSchema")
    if record.annotations and isinstance(record.annotations.get("title"), str):
        yield "annotations.title", record.annotations["title"]


# ---------------------------------------------------------------------------------------------
# rules


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
    return bool(_NEGATION.search(text[max(0, position - window) : position]))


def _hidden_characters(raw: str, where: str, out: _Collector, *, in_name: bool) -> None:
    tags = [c for c in raw if ord(c) in _TAG_CHARS]
    if tags:
        smuggled = decode_tag_characters(raw)
        out.add("hidden.tag-characters", "hidden", "high", where,
                f"{len(tags)} invisible Unicode tag character(s) (they smuggle ASCII text a model reads but people do not see)",
                smuggled or raw)
    bidi = [c for c in raw if c in _BIDI_CONTROLS]
    if bidi:
        out.add("hidden.bidi", "hidden", "high", where,
                f"{len(bidi)} bidirectional control character(s) (they reorder how text is displayed)", raw)
    if (runs := _VARIATION_RUN.findall(raw)):
        out.add("hidden.variation-selectors", "hidden", "high", where,
                f"{sum(map(len, runs))} variation selector(s) in a row (they smuggle bytes a model reads but people do not see)",
                decode_variation_selectors(raw) or raw)
    zero_width = [
        i for i, c in enumerate(raw)
        if not c.isascii()
        and c not in _BIDI_CONTROLS and c not in _DIRECTION_MARKS and ord(c) not in _TAG_CHARS  # reported above
        and _invisible(c)
        and not (c == _ZWJ and 0 < i < len(raw) - 1 and (_is_emoji(raw[i - 1]) or _is_emoji(raw[i + 1])))
        and not (c == "\ufeff" and i == 0)
        and not (c in _VARIATION_SELECTORS and (_in_selector_run(raw, i) or _selects_a_glyph(raw, i)))
    ]
    if zero_width:
        severity: Severity = "high" if in_name or len(zero_width) >= 3 else "medium"
        out.add("hidden.zero-width", "hidden", severity, where,
                f"{len(zero_width)} zero-width/invisible character(s)", raw[max(0, zero_width[0] - 40) : zero_width[0] + 40])
    if _ANSI.search(raw):
        out.add("hidden.ansi-escape", "hidden", "high", where,
                "terminal escape sequences (they can hide or rewrite text shown in a terminal)", raw)
    controls = [c for c in raw if unicodedata.category(c) == "Cc" and c not in "\n\r\t\x1b\x9b"]
    if controls:
        out.add("hidden.control-characters", "hidden", "medium", where, f"{len(controls)} control character(s)", raw)
    if (after := _after_padding(raw, _WHITE_RUN, lambda run: len(_LINE_BREAK.findall(run)) > PADDING_LINES)) is not None:
        out.add("hidden.padding-lines", "hidden", "high", where,
                "text pushed far below the visible part by a run of blank lines", raw[after : after + 121])
    if (after := _after_padding(raw, _WIDE_RUN, lambda run: True)) is not None:
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
        (_OVERRIDE, "instructions.override", "tells the model to ignore or override its instructions"),
        (_OVERRIDE_NOUN_FIRST, "instructions.override", "tells the model to ignore or override its instructions"),
        (_CONCEAL_TELL, "instructions.conceal", "tells the model to keep something from the user"),
        (_CONCEAL_KNOW, "instructions.conceal", "tells the model to keep something from the user"),
        (_CONCEAL_HIDE, "instructions.conceal", "tells the model to keep something from the user"),
        (_STEALTH, "instructions.stealth", "asks for an action to be done silently/secretly"),
        (_PSEUDO_TAG, "instructions.pseudo-tag", "a pseudo-system tag addressed to the model (e.g. <IMPORTANT>)"),
        (_ROLE, "instructions.role", "tries to change the model's role or instructions"),
        (_OVERRIDE_ZH, "instructions.override", "tells the model to ignore or override its instructions"),
    ):
        if (match := pattern.search(text)) is not None:
            out.add(rule, "instructions", "high", where, message, _sentence_around(text, match.start(), match.end()))
    if (match := _in_other_languages("override", text)) is not None:
        out.add("instructions.override", "instructions", "high", where,
                "tells the model to ignore or override its instructions", _sentence_around(text, match.start(), match.end()))
    if (match := _in_other_languages("conceal", text)) is not None:
        out.add("instructions.conceal", "instructions", "high", where, "tells the model to keep something from the user",
                _sentence_around(text, match.start(), match.end()))
    if (match := _CONCEAL_ZH.search(text)) is not None and re.search("用户|用戶|使用者", match.group(0)):
        out.add("instructions.conceal", "instructions", "high", where, "tells the model to keep something from the user",
                _sentence_around(text, match.start(), match.end()))
    for pattern, rule, message in (
        (_ASK_USER, "instructions.no-confirmation", "tells the model not to ask the user"),
        (_PRIORITY, "instructions.priority", "pressure or meta-instructions aimed at the model"),
        (_ADDRESSED, "instructions.addressed", "addresses the model directly"),
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
        if found is None or _NEGATION.search(self._text[max(left, found - 25) : found]):
            return None
        return found


def _secrets(text: str, where: str, out: _Collector) -> None:
    verbs = _Verbs(text)
    for match in _SENSITIVE_PATH.finditer(text):
        if _path_token(text, match.end()).endswith(".pub") or text[match.end() : match.end() + 4] == ".pub":
            continue  # public keys are meant to be shared
        left, right = verbs.sentence(match.start(), match.end())
        transfer_ok = verbs.unnegated(_TRANSFER_VERB, left, right) is not None
        read_ok = verbs.unnegated(_READ_VERB, left, right) is not None
        if transfer_ok or (read_ok and verbs.first(_URGENT, left, right) is not None):
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
    for match in _SECRET_NAME.finditer(text):
        left, right = verbs.sentence(match.start(), match.end())
        verb = verbs.first(_TRANSFER_VERB, left, right)
        if verb is None:
            verb = verbs.first(_READ_VERB, left, right)
        if verb is not None and not _NEGATION.search(text[max(left, verb - 25) : verb]):
            sentence = text[left:right]
            severity: Severity = (
                "high" if re.search(r"\b(value|contents?)\b", sentence, _F) and _TRANSFER_VERB.search(sentence) else "medium"
            )
            out.add("secrets.env-secret", "secrets", severity, where, "asks for the value of a secret variable", sentence)
            break
    for match in _CREDENTIAL.finditer(text):
        left, right = verbs.sentence(match.start(), match.end())
        if verbs.unnegated(_TRANSFER_VERB, left, right) is None or _NEGATION.search(text[max(left, match.start() - 40) : match.start()]):
            continue
        sentence = text[left:right]
        if re.search(r"\b(user'?s?|your|the model'?s?|all|every|stored|saved|any)\b", sentence, _F) and re.search(
            r"\b(in|into|as|to|within|inside)\s+(the\s+)?([`'\"]?\w+[`'\"]?\s+)?(parameter|field|argument|param|note|sidenote|comment|metadata)\b",
            sentence, _F,
        ):
            out.add("secrets.credential-request", "secrets", "high", where,
                    "asks the model to put credentials into a parameter", sentence)
        else:
            out.add("secrets.credential-mention", "secrets", "low", where, "mentions credentials", sentence)
        break


def _shadowing(text: str, where: str, out: _Collector, context: ScanContext) -> None:
    if (match := _AVAILABLE.search(text)) is not None:
        out.add("shadowing.when-available", "shadowing", "high", where,
                "sets rules that apply whenever this tool is merely present (tool shadowing)",
                _sentence_around(text, match.start(), match.end()))
    for match in _OTHER_TOOLS.finditer(text):
        sentence = _sentence_around(text, match.start(), match.end())
        severity: Severity = "high" if _REDIRECT.search(sentence) else "medium"
        out.add("shadowing.other-tools", "shadowing", severity, where, "sets rules for other tools", sentence)
        break
    for match in _WHEN_USING.finditer(text):
        named = match.group(4)
        if named in context.own_tools or named.lower() in ("this", "it", "the"):
            continue
        severity = "high" if named in context.other_tools or _REDIRECT.search(_sentence_around(text, match.start(), match.end())) else "medium"
        out.add("shadowing.when-using", "shadowing", severity, where,
                "gives the model rules for using another tool", _sentence_around(text, match.start(), match.end()))
        break
    if not context.other_tools:
        return
    for name in _tool_name_mentions(text, context):
        start = text.find(name)
        sentence = _sentence_around(text, start, start + len(name))
        if _MODAL.search(sentence):
            severity = "high" if _REDIRECT.search(sentence) and _MODAL.search(sentence) else "medium"
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
    for match in _MD_IMAGE.finditer(text):
        url = match.group(1)
        severity: Severity = "high" if ("?" in url or _URL_TEMPLATE.search(url) or "{" in url) else "medium"
        out.add("exfiltration.markdown-image", "exfiltration", severity, where,
                "a markdown image whose URL would be fetched when rendered (a known exfiltration channel)", match.group(0))
        break
    for match in _URL.finditer(text):
        url = match.group(0)
        if _URL_TEMPLATE.search(url):
            sentence = _sentence_around(text, match.start(), match.end())
            severity = "high" if _CONVERSATION.search(sentence) or _TAKE_VERB.search(sentence) else "medium"
            out.add("exfiltration.url-template", "exfiltration", severity, where,
                    "a URL with a placeholder to be filled with data", sentence)
            break
    for match in _SEND_TO.finditer(text):
        sentence = _sentence_around(text, match.start(), match.end())
        severity = "high" if _CONVERSATION.search(sentence) or _WHOLE.search(sentence) else "medium"
        out.add("exfiltration.send-to", "exfiltration", severity, where, "asks to send data to an address or URL", sentence)
        break
    verbs = _Verbs(text)  # found once per text: results are scanned on the event loop (200 KB took 4 s)
    for match in _CONVERSATION_DUMP.finditer(text):
        left, right = verbs.sentence(match.start(), match.end())
        if verbs.unnegated(_TAKE_VERB, left, right) is not None:
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
    hidden = _smuggled(text)
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
        (normalized, "result"), (_smuggled(text), "result (hidden characters)"), (encoded, "result (base64-decoded)")
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
