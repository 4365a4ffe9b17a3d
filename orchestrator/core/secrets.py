"""What of an environment is a secret, and text with the secrets in it redacted.

A variable is a secret by its name, as people name them (`KEY`, `TOKEN`, `SECRET`,
`PASSWORD`... anywhere in it), or by its value whatever its name: a URL with a password
in it (`postgres://u:PASSWORD@host/db`), a token of a shape its issuer gives every one of
its own (GitHub's `ghp_`, Anthropic's `sk-ant-`, AWS's `AKIA`..., a private key block, a
JWT), or, under a name that hints at one (`PASS`, `PAT`, `DSN`, `SESSION`...), a long
string that looks random. kairo-orch's own `KAIRO_*` names are no secrets by name
(KAIRO_IDEMPOTENCY_KEY), only by value.

What is not a secret must stay so: `PATH`, `LS_COLORS`, a certificate bundle's path, a
hash or a URL without a password pass (tests/core/test_secrets.py tries this machine's
environment and generated ones).

`Redactor` replaces, in what an agent or a check printed, each secret value of an
environment by `[redacted: NAME]` and any credential-shaped string by what it is
(`[redacted: GitHub token]`), before the text is logged or reported. Only values long
enough to be told apart from ordinary text are replaced as such (TOKENIZERS_PARALLELISM's
`false` is withheld from agents, never cut out of their output).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH", re.IGNORECASE
)
#: Words of a name (between underscores) that make a random-looking value a secret.
_HINT_WORDS = frozenset(
    {"PASS", "PWD", "PAT", "API", "DSN", "PRIVATE", "SIGNING", "SESSION", "COOKIE", "SALT"}
    | {"HMAC", "BEARER", "CRED", "CREDS", "SIG", "SIGNATURE"}
)
_OURS = "KAIRO_"

#: A URL's userinfo with a password (group 2), whatever the scheme; the last `@` before
#: the path ends it, so that a password holding an `@` is cut out whole. It starts at the
#: `://`, a literal, which the regex engine finds fast: every output is searched.
_URL_PASSWORD = re.compile(r"://([^\s/?#@:]*):([^\s/?#]+)@")


@dataclass(frozen=True)
class _Shape:
    """A credential's shape: what it is, the literals one of which each holds (searched
    for first, far faster than the pattern), and the pattern."""

    label: str
    literals: tuple[str, ...]
    pattern: re.Pattern[str]

    def is_in(self, text: str) -> bool:
        return any(literal in text for literal in self.literals)


_GITHUB = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")
_SHAPES = tuple(
    _Shape(label, literals, re.compile(pattern))
    for label, literals, pattern in (
        ("GitHub token", _GITHUB, r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
        ("GitHub token", ("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
        ("GitLab token", ("glpat-",), r"\bglpat-[A-Za-z0-9_-]{20,}"),
        ("Anthropic key", ("sk-ant-",), r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
        # Mixed case and a digit: `sk-` and a long branch or package name is no key.
        (
            "OpenAI key",
            ("sk-",),
            r"\bsk-(?:proj-|svcacct-|admin-)?(?=[\w-]*[0-9])(?=[\w-]*[A-Z])(?=[\w-]*[a-z])"
            r"[A-Za-z0-9_-]{20,}",
        ),
        ("AWS access key id", ("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("Slack token", ("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ("npm token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),
        ("Stripe key", ("k_live_",), r"\b[rs]k_live_[A-Za-z0-9]{20,}"),
        ("Google API key", ("AIza",), r"\bAIza[0-9A-Za-z_-]{35}"),
        ("Hugging Face token", ("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),
        ("JWT", ("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    )
)
_KEY_LITERAL = "PRIVATE KEY-----"
_KEY = r"-----{} (?:[A-Z0-9]+ )*PRIVATE KEY-----"
_KEY_LINE = re.compile(_KEY.format("(?:BEGIN|END)"))
_PRIVATE_KEY = re.compile(f"{_KEY.format('BEGIN')}.*?(?:{_KEY.format('END')}|\\Z)", re.DOTALL)
#: The end of a key whose beginning was cut off (an output's tail starts mid-key).
_KEY_END = re.compile(f"\\A.*?{_KEY.format('END')}", re.DOTALL)
_RANDOM_LOOKING = re.compile(r"[A-Za-z0-9+/=_-]{16,}")

#: Values shorter than this are withheld from agents but not cut out of text: `false`,
#: a port, a short word would be cut out of everything.
_SHORTEST_REDACTED = 8
#: The least of a secret's end (or beginning) that is cut off a text it starts (or ends)
#: with: an output's tail may begin in the middle of a secret.
_SHORTEST_PIECE = 6


def secret_name(name: str) -> bool:
    """Whether `name` says its value is a secret (kairo-orch's own names never do)."""
    return not name.startswith(_OURS) and _SECRET_NAME.search(name) is not None


def credential_in(value: str) -> bool:
    """Whether `value` holds a credential of a shape that says so: a URL with a password,
    a well-known token, a private key."""
    return bool(
        ("://" in value and _URL_PASSWORD.search(value))
        or any(shape.is_in(value) and shape.pattern.search(value) for shape in _SHAPES)
        or (_KEY_LITERAL in value and _KEY_LINE.search(value))
    )


def is_secret(name: str, value: str) -> bool:
    """Whether the variable `name=value` is a secret: by its name, or by its value."""
    if secret_name(name) or credential_in(value):
        return True
    words = set(name.upper().split("_"))
    return not name.startswith(_OURS) and bool(words & _HINT_WORDS) and random_looking(value)


def random_looking(value: str) -> bool:
    """A long run of letters and digits (base64's alphabet), of both, with no structure a
    path, a version or a word would have: nearly as many different characters as it has."""
    if not _RANDOM_LOOKING.fullmatch(value) or value.startswith("/"):
        return False
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    counts = Counter(value).values()
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts)
    return entropy >= 3.0


def secrets_of(environment: Mapping[str, str]) -> dict[str, str]:
    """The secret variables of `environment`."""
    return {name: value for name, value in environment.items() if is_secret(name, value)}


def _url_passwords(value: str) -> list[str]:
    """The passwords of the URLs in `value`."""
    return [found.group(2) for found in _URL_PASSWORD.finditer(value)]


def _redactable(value: str) -> bool:
    """Whether `value` is long enough to be cut out of text as it is."""
    return len(value) >= _SHORTEST_REDACTED


def _mark(name: str) -> str:
    """What a secret value is replaced by: the name of the variable that holds it."""
    return f"[redacted: {name}]"


@dataclass(frozen=True)
class Redactor:
    """Cuts secrets out of text: `known` values (of variables, by name), and any credential
    of a known shape."""

    #: (name, value), the longest value first: one that holds another is cut out whole.
    known: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, environment: Mapping[str, str]) -> Redactor:
        """The redactor of `environment`'s secrets: each value long enough to be told
        apart, and the password of each URL in one."""
        found: dict[str, str] = {}  # value -> the first name that holds it
        for name, value in secrets_of(environment).items():
            for piece in (value, *_url_passwords(value)):
                if _redactable(piece):
                    found.setdefault(piece, name)
        ordered = sorted(found.items(), key=lambda item: -len(item[0]))
        return cls(tuple((name, value) for value, name in ordered))

    def text(self, text: str) -> str:
        """`text` with every secret cut out."""
        if not text:
            return text
        text = self._cut_pieces(text)  # first: a piece may hold a whole shorter value
        for name, value in self.known:
            if value in text:
                text = text.replace(value, _mark(name))
        if "://" in text:
            text = _URL_PASSWORD.sub(r"://\1:[redacted: password]@", text)
        for shape in _SHAPES:
            if shape.is_in(text):
                text = shape.pattern.sub(_mark(shape.label), text)
        if _KEY_LITERAL in text:
            text = _PRIVATE_KEY.sub(_mark("private key"), text)
            text = _KEY_END.sub(_mark("private key"), text)
        return text

    def _cut_pieces(self, text: str) -> str:
        """A text that starts with the end of a known value, or ends with its beginning (a
        tail cut in the middle of one), loses that piece too."""
        for name, value in self.known:
            size = _end_it_starts_with(text, value)
            if size:
                text = _mark(name) + text[size:]
            size = _beginning_it_ends_with(text, value)
            if size:
                text = text[:-size] + _mark(name)
        return text


def _end_it_starts_with(text: str, value: str) -> int:
    """The length of the longest end of `value` (less than the whole, at least
    _SHORTEST_PIECE long) that `text` starts with; 0 for none."""
    head = text[:_SHORTEST_PIECE]
    if len(head) < _SHORTEST_PIECE:
        return 0
    at = value.find(head, 1)
    while at != -1:  # the first place found is the longest end
        if text.startswith(value[at:]):
            return len(value) - at
        at = value.find(head, at + 1)
    return 0


def _beginning_it_ends_with(text: str, value: str) -> int:
    """The length of the longest beginning of `value` (less than the whole, at least
    _SHORTEST_PIECE long) that `text` ends with; 0 for none."""
    tail = text[-_SHORTEST_PIECE:]
    if len(tail) < _SHORTEST_PIECE:
        return 0
    at = value.rfind(tail, 0, len(value) - 1)
    while at != -1:  # the last place found is the longest beginning
        if text.endswith(value[: at + _SHORTEST_PIECE]):
            return at + _SHORTEST_PIECE
        at = value.rfind(tail, 0, at + _SHORTEST_PIECE - 1)
    return 0
