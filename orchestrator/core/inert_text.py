"""Text that came from an agent or a repository, made inert before it is shown.

An agent's output, a file name, a commit message, a branch name, git's own messages about
them: any of it may hold what a terminal acts on (ESC and C1 sequences that write the
clipboard, retitle a pane, clear the screen, open a link), or characters that hide or
reorder text where it is read (bidi overrides, zero-width and other invisible characters),
or bytes that are not UTF-8 at all (a file name git took as it was, decoded with
`surrogateescape`). Whatever shows such text (`status`, the live view, pane titles, the
reports) passes it through `inert` first; what stores it never does (the log keeps what
happened, byte for byte).

`inert` writes each such character as an escape one can read, never drops it: `\\x1b` for
ESC, `\\u202e` for a right-to-left override, `\\xff` for a byte that is not UTF-8, `\\n` for
a newline in a one-line field. A backslash that would read as the start of such an escape
is doubled, so two different texts are never shown alike. The Markdown and HTML forms
below add what those formats would otherwise interpret (raw HTML, comments, entities,
code spans and fences a text could close).
"""

from __future__ import annotations

import html
import re
from functools import lru_cache

#: Everything escaped but the newline and the tab: C0 and DEL, C1, and every character of
#: Unicode's general categories Cf (format: bidi embeddings, overrides and isolates,
#: zero-width ones, tags), Zl and Zp (line and paragraph separators) and Cs (surrogates,
#: which only `surrogateescape` puts in a str), and its Default_Ignorable_Code_Point
#: property (characters drawn as nothing: Hangul fillers, variation selectors); those
#: beyond the BMP apart. Written out rather than derived from `unicodedata` at import (a
#: million code points, every CLI start); tests/core/test_inert_text.py holds the two
#: equal to what `unicodedata` says.
_HIDDEN = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
    "\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\u3164\ud800-\udfff\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
)
_HIDDEN_ASTRAL = (
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
_IS_HIDDEN_ASTRAL = re.compile(f"[{_HIDDEN_ASTRAL}]").match
# What `inert` looks at, a backslash included (it may have to double it), and every
# character beyond the BMP, one not hidden given back as it is: a class of a few ranges of
# them would be tested range by range at every character (several times slower on plain
# text), where a single range keeps re's table lookup.
_ONE_LINE = re.compile(f"[\\\\\t\n{_HIDDEN}\U00010000-\U0010ffff]")
_LINES = re.compile(f"[\\\\{_HIDDEN}\U00010000-\U0010ffff]")
#: What an escape starts with after its backslash: a backslash before one is doubled.
_ESCAPE_LETTERS = frozenset("\\nrtxuU")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def inert(text: str, *, lines: bool = False) -> str:
    """`text` with nothing a terminal or a reader's screen would act on or hide: each such
    character escaped. `lines`: a block of lines (an output's tail), whose newlines and
    tabs are kept; else one line, where they are escaped too."""
    return (_LINES if lines else _ONE_LINE).sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char != "\\":
        return _escaped(char)
    # A backslash is doubled where it would read as the start of an escape: before a
    # letter one starts with, or before a character escaped itself.
    end = match.end()
    following = match.re.match(match.string, end)
    if match.string[end : end + 1] in _ESCAPE_LETTERS or (
        following is not None and _escaped(following.group()) != following.group()
    ):
        return "\\\\"
    return char


@lru_cache(maxsize=4096)  # few distinct characters, met again and again (ESC, emoji)
def _escaped(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x80:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as surrogateescape kept it
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}" if _IS_HIDDEN_ASTRAL(char) else char


# Markdown (a pull request's body, as GitHub renders it). Escaped in running text: what
# would start raw HTML or a comment (<), an entity (&: `&#x202e;` is an override again),
# a code span (`), emphasis or strikethrough that swallows its marks (* ~, and _ but
# between two letters or digits, where it cannot: `max_attempts` stays as it is), a link
# or an image ([ ]), math ($), and the backslash itself.
_MARKDOWN_ACTIVE = re.compile(r"[\\`*~\[\]<&$]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_BACKTICKS = re.compile("`+")


def markdown_text(text: str) -> str:
    """`text` inert, for running Markdown text: shown as it is, interpreted as nothing."""
    return _MARKDOWN_ACTIVE.sub(r"\\\g<0>", inert(text))


def markdown_code(text: str) -> str:
    """`text` inert, as a Markdown code span: a fence of more backticks than any run of
    them in it, so that it cannot close the span early."""
    shown = inert(text)
    fence = "`" * (_longest_backticks(shown) + 1)
    # A span's content loses one space at each end when it has one at both (and is not
    # all spaces), and a backtick at either end would join the fence: a space each side
    # keeps it as it is.
    padded = "`" in (shown[:1], shown[-1:]) or (
        shown[:1] == shown[-1:] == " " and shown.strip(" ") != ""
    )
    return f"{fence} {shown} {fence}" if padded else f"{fence}{shown}{fence}"


def markdown_block(text: str, *, indent: str = "", info: str = "") -> list[str]:
    """`text` inert, as the lines of a fenced code block (`info`: its language, `diff`),
    each prefixed with `indent`: a fence of more backticks than any run in it, so that no
    line of it closes the block."""
    shown = inert(text, lines=True)
    fence = "`" * max(3, _longest_backticks(shown) + 1)
    return [
        f"{indent}{fence}{info}",
        *(f"{indent}{line}" for line in shown.split("\n")),
        f"{indent}{fence}",
    ]


def _longest_backticks(text: str) -> int:
    return max(map(len, _BACKTICKS.findall(text)), default=0)


def html_text(text: str, *, lines: bool = False) -> str:
    """`text` inert and HTML-escaped, for an element's text or an attribute's value;
    `lines` for a `<pre>`."""
    return html.escape(inert(text, lines=lines))
