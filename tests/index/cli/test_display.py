"""``index.cli.display``: child-supplied text shown to people with its control characters visible."""

from __future__ import annotations

import pytest

from index.cli.display import printable, shell_word


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("convert_to_pdf", "convert_to_pdf"),
        ("八字 é — ok [/red]", "八字 é — ok [/red]"),  # printable text, markup-like or not, is left alone
        ("a\x1b[31mb", r"a\x1b[31mb"),
        ("line\nfake\rover\ttab", r"line\nfake\rover\ttab"),
        ("nul\x00del\x7fcsi\x9b", r"nul\x00del\x7fcsi\x9b"),
        ("rtl\u202eevil\u2028sep", r"rtl\u202eevil\u2028sep"),
        ("pair 😀 joined", "pair 😀 joined"),
    ],
)
def test_printable_shows_controls_as_escapes(text: str, shown: str) -> None:
    assert printable(text) == shown


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("notes/read_notes", "notes/read_notes"),
        ("my notes/it's", "'my notes/it'\"'\"'s'"),
        ("ev\\il\x1b]0;x\x07/it's", r"$'ev\\il\x1b]0;x\x07/it\'s'"),
        ("csi\x9b", r"$'csi\u009b'"),  # $'\x9b' would be a byte, not the character
    ],
)
def test_shell_word_quotes_for_pasting(text: str, word: str) -> None:
    assert shell_word(text) == word


def test_lone_surrogates_are_shown_as_escapes_any_utf8_stream_can_write() -> None:
    # JSON's "\ud800" and argv bytes that are not UTF-8 (0xff read as \udcff) are lone surrogates.
    # Encoded first: a failure is then an encoding error, not a diff of unprintable text.
    shown = printable("lone\ud800high\udfffand\udcffbyte").encode("utf-8")
    assert shown == rb"lone\ud800high\udfffand\udcffbyte"
    # The byte Python read as \udcff, pasted back into a shell: Python reads the same text again.
    assert shell_word("argv\udcff").encode("utf-8") == rb"$'argv\xff'"
