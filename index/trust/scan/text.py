"""The characters a scan reads past: invisible and look-alike characters made visible or folded to
ASCII (the *skeleton* every pattern matches), and text smuggled in tag characters, variation
selectors, base64 runs and spaced-out letters, decoded."""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections import Counter
from functools import lru_cache

from index.trust.scan.findings import EXCERPT_CHARS


TAG_CHARS = range(0xE0000, 0xE0080)
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
DIRECTION_MARKS = frozenset("\u200e\u200f\u061c")
_ZERO_WIDTH = frozenset(
    "\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e\u034f\u00ad\u115f\u1160\u3164\uffa0"
)
ZWJ = "\u200d"
#: Variation selectors (standard, Mongolian, supplement). One after an emoji or an ideograph picks
#: its glyph; a run of them carries bytes a model can read but people cannot see ("emoji smuggling").
VARIATION_SELECTORS = frozenset(
    chr(code) for code in (*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0), *range(0x180B, 0x1810))
)
VARIATION_RUN = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2,}")
#: Format characters that render as a visible sign (Arabic number signs and the like): not hidden.
_VISIBLE_FORMAT = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd")
_KEYCAP = "\u20e3"
WIDE_SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"


def visible(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` with every invisible or control character shown as ``<U+XXXX>``, bounded."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if char in "\n\t":
            out.append(" ")
        elif (
            code in TAG_CHARS
            or char in BIDI_CONTROLS
            or char in _ZERO_WIDTH
            or char in DIRECTION_MARKS
            or char in VARIATION_SELECTORS
            or unicodedata.category(char) in ("Cc", "Cf", "Co", "Cn")
        ):
            out.append(f"<U+{code:04X}>")
        else:
            out.append(char)
    shown = re.sub(r" {2,}", " ", "".join(out)).strip()
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def is_emoji(char: str) -> bool:
    return unicodedata.category(char) == "So" or 0x1F000 <= ord(char) <= 0x1FAFF


def is_invisible(char: str) -> bool:
    """A character that shows nothing: zero-width, variation selector, or any other format character."""
    return (
        char in _ZERO_WIDTH
        or char in VARIATION_SELECTORS
        or char in "\u17b4\u17b5"  # Khmer inherent vowels, invisible combining marks
        or (unicodedata.category(char) == "Cf" and char not in _VISIBLE_FORMAT)
    )


def in_selector_run(raw: str, index: int) -> bool:
    return (index > 0 and raw[index - 1] in VARIATION_SELECTORS) or (
        index + 1 < len(raw) and raw[index + 1] in VARIATION_SELECTORS
    )


def selects_a_glyph(raw: str, index: int) -> bool:
    """Whether the variation selector at ``index`` is the ordinary kind: one, after an emoji, a
    symbol, an ideograph, or a keycap base (``1\ufe0f\u20e3``)."""
    before = raw[index - 1] if index > 0 else ""
    after = raw[index + 1] if index + 1 < len(raw) else ""
    if not before or before in VARIATION_SELECTORS or after in VARIATION_SELECTORS:
        return False
    if after == _KEYCAP:
        return True
    return not before.isascii() and (is_emoji(before) or unicodedata.category(before) in ("Lo", "Sm", "Sc", "Sk", "Mn"))


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
        if is_invisible(char) or char in BIDI_CONTROLS or char in DIRECTION_MARKS or ord(char) in TAG_CHARS:
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
    runs = (bytes(_selector_byte(c) for c in run.group(0)) for run in VARIATION_RUN.finditer(text))
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


def smuggled_text(text: str) -> str:
    """Text hidden in invisible characters (tag characters, variation-selector runs), if any."""
    if text.isascii():
        return ""
    return " ".join(part for part in (decode_tag_characters(text), decode_variation_selectors(text)) if part)
