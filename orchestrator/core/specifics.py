"""What a sent-back attempt is told besides its gate's verdict: the facts the log holds.

A gate says why an attempt was not accepted (a check's output, a cut-off turn, nothing
changed); these say what else is known, so that the agent need not guess: which of the
files the task names (its `files`, the paths its prompt mentions) the branch has still
not changed, and, for an attempt that changed something yet failed exactly as the one
before it, what it changed and which files the failure names that it left alone. An
agent told only "not done" goes on doing what it did.

`failure_signature` is how two failures are "the same": their output, with what differs
from one run of the same failure to the next (durations, addresses, clock times) blanked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from orchestrator.core.plan import ResolvedSubtask
from orchestrator.core.views import AttemptView

MAX_LISTED = 12  # paths in one list of feedback; the rest are counted
#: A bare file name counts as a path only with one of these endings (a prompt says
#: "e.g." and "v1.2"); a name with a directory in it counts with any.
EXTENSIONS = frozenset(
    {
        "py",
        "pyi",
        "js",
        "jsx",
        "ts",
        "tsx",
        "mjs",
        "cjs",
        "go",
        "rs",
        "java",
        "kt",
        "scala",
        "rb",
        "php",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "cs",
        "swift",
        "m",
        "sh",
        "bash",
        "zsh",
        "sql",
        "html",
        "css",
        "scss",
        "md",
        "rst",
        "txt",
        "json",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "conf",
        "xml",
        "proto",
        "lock",
        "gradle",
        "tf",
        "vue",
        "svelte",
        "ex",
        "exs",
        "erl",
        "hs",
        "ml",
        "clj",
        "lua",
        "r",
        "dart",
    }
)
_PATH = re.compile(
    r"(?<![\w/.:-])"  # not inside a longer token, not after a URL's scheme
    r"((?:[\w.-]+/)*[\w-][\w.-]*\.([A-Za-z][A-Za-z0-9]{0,7}))"
    r"(?![\w/-])"
)
_VARYING = (
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x?"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"), "<when>"),
    (re.compile(r"\b\d+:\d\d:\d\d(?:\.\d+)?\b"), "<duration>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|us|µs|ns|sec|secs|seconds)\b"), "<duration>"),
)


def failure_signature(output: str) -> str:
    """`output` with what varies between two runs of one failure blanked: durations
    ("in 0.31s"), memory addresses, clock times. Two failures are the same when their
    signatures are."""
    for pattern, blank in _VARYING:
        output = pattern.sub(blank, output)
    return output.strip()


def paths_in(text: str) -> list[str]:
    """The file paths `text` mentions, in order, once each (relative ones as written)."""
    found: dict[str, None] = {}
    for match in _PATH.finditer(text):
        path, extension = match.group(1), match.group(2)
        if "/" in path or extension.lower() in EXTENSIONS:
            found.setdefault(path.rstrip("."), None)
    return list(found)


def named_files(spec: ResolvedSubtask) -> list[str]:
    """The files the task names: its `files`, then those its prompt mentions."""
    return list(dict.fromkeys([*spec.files, *paths_in(spec.prompt)]))


def _touched(path: str, changed: Iterable[str]) -> bool:
    # A prompt may name `calc.py` where the branch changed `src/calc.py`.
    return any(c == path or c.endswith("/" + path) for c in changed)


def untouched_files(spec: ResolvedSubtask, attempt: AttemptView) -> list[str]:
    """The named files the subtask's branch has not changed ([] when the log does not say
    what it changed: an attempt committed by an older kairo-orch)."""
    if attempt.branch_paths is None:
        return []
    return [p for p in named_files(spec) if not _touched(p, attempt.branch_paths)]


def listed(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:MAX_LISTED])
    more = len(paths) - MAX_LISTED
    return shown + (f" (and {more} more)" if more > 0 else "")


def untouched_note(spec: ResolvedSubtask, attempt: AttemptView) -> str:
    left = untouched_files(spec, attempt)
    if not left:
        return ""
    return (
        "\n\nOf the files the task names, these are not changed: "
        f"{listed(left)}. If the task needs them changed, that is still to do."
    )


def _verify_failed(attempt: AttemptView) -> bool:
    return attempt.exit_code == 0 and bool(attempt.verify_exit_code)


def same_failure(attempt: AttemptView, previous: AttemptView | None) -> bool:
    """Both failed their check the same way (their output's signatures agree)."""
    return (
        previous is not None
        and _verify_failed(attempt)
        and _verify_failed(previous)
        and attempt.verify_exit_code == previous.verify_exit_code
        and failure_signature(attempt.verify_output_tail)
        == failure_signature(previous.verify_output_tail)
    )


def unchanged_failure_note(attempt: AttemptView, previous: AttemptView | None) -> str:
    """For an attempt that left a new tree and failed its check exactly as the one before:
    what it changed, and the files the failure names that it did not."""
    if previous is None or not same_failure(attempt, previous) or attempt.tree == previous.tree:
        return ""
    changed = attempt.paths or ()
    what = f"changed {listed(changed)}" if changed else "changed the branch"
    left = [
        p
        for p in paths_in(attempt.verify_output_tail)
        if not p.startswith("/") and not _touched(p, changed)
    ]
    named = (
        f" The files the failure names that attempt {attempt.number} did not change: "
        f"{listed(left)}."
        if left
        else ""
    )
    return (
        f"\n\nAttempt {attempt.number} {what}, yet the check fails exactly as it did after "
        f"attempt {previous.number}: what changed is not what the check fails on.{named}"
    )
