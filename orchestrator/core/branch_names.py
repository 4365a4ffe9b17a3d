"""Which branch names git takes: git-check-ref-format(1)'s rules, and `git branch`'s own.

Pure, so that `validate` refuses a name git would refuse only once the supervisor moves
the branch (`update-ref` mid-run, the execution then stuck). What lies outside a name
alone (a branch `kairo` where `kairo/x` is wanted: git keeps refs as paths) is the
runtime's to check, against the repository.
"""

from __future__ import annotations

import re

MAX_LENGTH = 200  # each component is a file name too: well under the usual 255 bytes
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def branch_name_problem(name: str) -> str | None:
    """Why git would refuse `name` as a branch name (a phrase), or None."""
    if len(name) > MAX_LENGTH:
        return f"is longer than {MAX_LENGTH} characters"
    found = _FORBIDDEN.search(name)
    if found is not None:
        char = found.group()
        shown = "a space" if char == " " else f"'{char}'" if char.isprintable() else repr(char)
        return f"holds {shown}, which git allows in no branch name"
    if name in ("@", "HEAD") or name.startswith("-"):
        return "is not a branch name git takes ('@', 'HEAD' and names starting with '-' are not)"
    if "@{" in name or ".." in name or "//" in name:
        which = "@{" if "@{" in name else ".." if ".." in name else "//"
        return f"holds '{which}', which git allows in no branch name"
    if name.startswith("/") or name.endswith(("/", ".")):
        return "may not start with '/' nor end with '/' or '.'"
    for component in name.split("/"):
        if component.startswith(".") or component.endswith(".lock"):
            return "has a part starting with '.' or ending with '.lock', which git refuses"
    return None
