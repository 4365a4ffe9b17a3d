"""Text from agents and repositories made inert: nothing a terminal acts on or a reader
cannot see survives `inert`, every text stays readable and tells itself apart from every
other (a decoder gets it back), and the Markdown forms are read by a CommonMark parser as
the text itself, never as markup."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from orchestrator.core.inert_text import (
    html_text,
    inert,
    markdown_block,
    markdown_code,
    markdown_text,
)

#: Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), which unicodedata
#: does not give: characters a renderer draws as nothing.
DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
]  # fmt: skip
ESCAPED_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


EVERY_CHARACTER = [chr(code) for code in range(sys.maxunicode + 1)]
#: What `inert` must escape, in a block of lines too (where newlines and tabs are kept).
HIDDEN = frozenset(
    [c for c in EVERY_CHARACTER if unicodedata.category(c) in ESCAPED_CATEGORIES]
    + [chr(code) for low, high in DEFAULT_IGNORABLE for code in range(low, high + 1)]
) - {"\n", "\t"}


def test_it_escapes_exactly_the_characters_unicode_says_control_or_hide_text() -> None:
    # Every code point at once, a line each: each line is its character, or its escape.
    everything = [char for char in EVERY_CHARACTER if char != "\n"]
    shown = inert("\n".join(everything), lines=True).split("\n")
    escaped = {char for char, line in zip(everything, shown, strict=True) if line != char}
    missed = HIDDEN - escaped
    assert missed == set()
    # More only where this Python's Unicode has no character yet (a later one has: 15.0's
    # Egyptian format controls, U+13439 to U+1343F).
    assert {unicodedata.category(char) for char in escaped - HIDDEN} == {"Cn"}


@pytest.mark.parametrize(
    ("text", "one_line", "lines"),
    [
        ("clear\x1b[2J", r"clear\x1b[2J", r"clear\x1b[2J"),  # readable, not dropped
        ("osc 52 \x1b]52;c;cHduZWQ=\x07", r"osc 52 \x1b]52;c;cHduZWQ=\x07", None),
        ("a\nb\tc\r", r"a\nb\tc\r", "a\nb\tc\\r"),
        ("csi \x9b2J", r"csi \u009b2J", None),  # a C1 character: \u, as any character
        ("bad\udcff.txt", r"bad\xff.txt", None),  # a byte that is not UTF-8: \x
        ("\u202eevil\u202c \u2066x\u2069", r"\u202eevil\u202c \u2066x\u2069", None),
        ("zero\u200bwidth\ufeff", r"zero\u200bwidth\ufeff", None),
        ("tag \U000e0041", r"tag \U000e0041", None),
        ("é ✓ 日本 🙂 src/a.py", "é ✓ 日本 🙂 src/a.py", None),
        (r"C:\temp \d \x1b", r"C:\\temp \d \\x1b", None),  # a backslash that reads as one
        ("\\\x1b", r"\\\x1b", None),
    ],
)
def test_what_each_escape_looks_like(text: str, one_line: str, lines: str | None) -> None:
    assert inert(text) == one_line
    assert inert(text, lines=True) == (one_line if lines is None else lines)


def uninert(shown: str) -> str:
    """What `inert` was given: its escapes read back (a backslash before anything else is
    itself)."""

    def back(match: re.Match[str]) -> str:
        escape = match.group()
        if escape == "\\\\" or len(escape) == 2:
            return {"\\\\": "\\", "\\n": "\n", "\\r": "\r", "\\t": "\t"}[escape]
        code = int(escape[2:], 16)
        return chr(code + 0xDC00 if escape[1] == "x" and code >= 0x80 else code)

    return re.sub(r"\\(?:\\|[nrt]|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})", back, shown)


TRICKY = st.sampled_from(list("\\xuUnrt0123456789abcdef\x1b\x9b\x07\n\t\r\u202e\udc80\udcff"))
CONTROLS = st.characters(categories=["Cc", "Cf", "Cs", "Zl", "Zp"])
TEXTS = st.text(st.one_of(TRICKY, CONTROLS, st.characters(exclude_categories=())), max_size=40)


@given(TEXTS)
def test_nothing_hidden_survives_and_every_text_reads_back(text: str) -> None:
    shown = inert(text)
    assert not any(c in HIDDEN or c in "\n\t" for c in shown)
    assert uninert(shown) == text  # so two texts never look the same
    block = inert(text, lines=True)
    assert not any(c in HIDDEN for c in block)
    assert uninert(block) == text


@given(TEXTS, TEXTS)
def test_distinct_texts_are_shown_distinctly(first: str, second: str) -> None:
    if first != second:
        assert inert(first) != inert(second)
        assert inert(first, lines=True) != inert(second, lines=True)


# GitHub's Markdown is CommonMark with extensions (tables, strikethrough, autolinks); a
# parser that allows raw HTML reads what our Markdown would make of each text.
MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
MARKUP = st.sampled_from(
    ["<!--", "-->", "<b>", "<img src=x>", "&#x202e;", "&amp;", "`", "``", "```", "*", "_",
     "~~", "[a](http://evil)", "![i](http://evil/x.png)", "$x$", "\\", "|", "<http://a>"]
)  # fmt: skip
MARKDOWN_TEXTS = st.lists(st.one_of(MARKUP, TEXTS), max_size=6).map("".join)


def inline_of(source: str) -> list[tuple[str, str]]:
    opened, inline, closed = MARKDOWN.parse(source)
    assert (opened.type, closed.type) == ("paragraph_open", "paragraph_close")
    assert inline.children is not None
    return [(token.type, token.content) for token in inline.children]


@given(MARKDOWN_TEXTS)
def test_markdown_text_is_read_as_its_text_alone(text: str) -> None:
    assert inline_of(f"said: {markdown_text(text)} end") == [("text", f"said: {inert(text)} end")]


@given(MARKDOWN_TEXTS)
def test_a_markdown_code_span_holds_its_text_whole(text: str) -> None:
    if not text:
        return
    assert inline_of(f"path {markdown_code(text)} end") == [
        ("text", "path "),
        ("code_inline", inert(text)),
        ("text", " end"),
    ]


@pytest.mark.parametrize("text", [" a ", "  ", " ", "`a", "a`", "``", " `` ", "a  b"])
def test_a_code_span_keeps_its_spaces_and_backticks(text: str) -> None:
    assert inline_of(f"path {markdown_code(text)} end")[1] == ("code_inline", text)


@given(MARKDOWN_TEXTS)
def test_no_line_closes_a_markdown_block_early(text: str) -> None:
    source = "\n".join(["- item", "", *markdown_block(text, indent="  "), "", "after"])
    fences = [t for t in MARKDOWN.parse(source) if t.type == "fence"]
    assert [fence.content for fence in fences] == [inert(text, lines=True) + "\n"]


def test_a_block_has_its_language() -> None:
    assert markdown_block("+a", info="diff") == ["```diff", "+a", "```"]


def test_html_text_is_escaped_and_inert() -> None:
    assert html_text('<a href="x">\u202e\x1b') == "&lt;a href=&quot;x&quot;&gt;\\u202e\\x1b"
    assert html_text("a\nb") == "a\\nb"
    assert html_text("a\nb", lines=True) == "a\nb"
