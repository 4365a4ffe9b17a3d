"""Merging a finished subtask branch into the integration branch, without a checkout.

`git merge-tree --write-tree` computes the merge entirely in the object database; a
clean result becomes a two-parent commit (`commit-tree`) and the integration ref moves
by compare-and-swap (`update-ref NEW OLD`). No index, working tree or HEAD is involved,
so merging never touches the user's checkout, and it is faster than merging in a
checked-out worktree (scripts/bench.py merge_32). A conflicted merge moves no ref; it only
leaves unreachable objects for `git gc`.

Output of `merge-tree --write-tree -z --messages` on git 2.38/2.39, as parsed here:

    TREE NUL
    (MODE SP OID SP STAGE TAB PATH NUL)*        conflicted index entries; none when clean
    NUL
    (COUNT NUL (PATH NUL){COUNT} TYPE NUL MESSAGE NUL)*

TYPE is a fixed token such as `Auto-merging`, `CONFLICT (contents)` or `CONFLICT (binary)`;
MESSAGE is git's sentence, e.g. `CONFLICT (add/add): Merge conflict in n.txt\\n`. The
message names the specific kind (add/add is TYPE `CONFLICT (contents)`), so the kind is
read from the message and only falls back to TYPE. Exit status: 0 clean, 1 conflicted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import StepFailed, UsageError
from orchestrator.git.invocation import common_of, first_line, git_isolated
from orchestrator.git.loose_refs import plain_tip
from orchestrator.git.refs import (
    commit_tree,
    is_ancestor,
    is_full_oid,
    parents_of,
    read_refs,
    rev_parse,
    tree_of,
    update_ref,
)
from orchestrator.git.repo import Identity

#: How far below the tip a merge of ours is looked for: more than a merge step makes.
MERGES_LOOKED_BACK = 32
_KIND = re.compile(r"^CONFLICT \(([^)]+)\)")
_PAREN = re.compile(r"\(([^)]+)\)")


@dataclass(frozen=True)
class Merged:
    merge_commit: str
    previous_commit: str
    tree: str
    #: True when the source was already contained in the target, and nothing was written.
    #: When the target's tip is itself the merge of the source (see `merge_branch`),
    #: `merge_commit` is that tip and `previous_commit` its first parent, as for the merge
    #: that wrote it; otherwise (an empty subtask, a user's own merge) `merge_commit ==
    #: previous_commit`, the target's tip.
    already_merged: bool = False


@dataclass(frozen=True)
class ConflictedPath:
    path: str
    #: git's name for it: content, add/add, modify/delete, rename/delete, rename/rename,
    #: file/directory, binary, distinct modes, ... (an open set, as git words it).
    kind: str
    #: git's sentence about it, e.g. "CONFLICT (content): Merge conflict in a.txt".
    message: str


@dataclass(frozen=True)
class Conflicted:
    conflicts: tuple[ConflictedPath, ...]


MergeOutcome = Merged | Conflicted


@dataclass(frozen=True)
class _Message:
    paths: tuple[str, ...]
    kind: str | None  # None: informational, such as "Auto-merging"
    text: str


def _rank(message: _Message) -> int:
    # A structural kind says more than "content", which says more than a remark.
    if message.kind is None:
        return 0
    return 1 if message.kind == "content" else 2


def _parse_message(paths: tuple[str, ...], type_: str, text: str) -> _Message:
    text = text.rstrip("\n")
    if not type_.startswith("CONFLICT"):
        return _Message(paths, None, text)
    match = _KIND.match(text) or _PAREN.search(type_)
    kind = match.group(1) if match else "unknown"
    return _Message(paths, "content" if kind == "contents" else kind, text)


def parse_merge_tree(output: str) -> tuple[str, tuple[ConflictedPath, ...]]:
    """The tree oid and the conflicts in `merge-tree --write-tree -z --messages` output."""
    fields = output.split("\0")
    tree, i = fields[0], 1
    conflicted: dict[str, None] = {}  # an ordered set: paths in git's order
    while i < len(fields) and fields[i]:
        conflicted[fields[i].split("\t", 1)[1]] = None
        i += 1
    i += 1
    messages: list[_Message] = []
    while i < len(fields) and fields[i]:
        count = int(fields[i])
        paths = tuple(fields[i + 1 : i + 1 + count])
        messages.append(_parse_message(paths, fields[i + 1 + count], fields[i + 2 + count]))
        i += count + 3

    def best(path: str) -> _Message | None:
        about = [m for m in messages if path in m.paths]
        # max() keeps the first of equals: git's first word on a path wins ties.
        return max(about, key=_rank, default=None)

    found = {path: best(path) for path in conflicted}
    # A conflict git reports only through its message (no unmerged entry under any of
    # its paths) is still a conflict: report it under its first path.
    for message in messages:
        if message.kind is not None and not any(p in found for p in message.paths):
            found[message.paths[0] if message.paths else "."] = message
    conflicts = tuple(
        ConflictedPath(path, (m.kind if m else None) or "unknown", m.text if m else "")
        for path, m in found.items()
    )
    return tree, conflicts


async def integration_tree(repo_root: Path, ref: str) -> str:
    """The tree oid `ref` points at, for comparing integration results."""
    return await tree_of(repo_root, ref)


def _missing(repo_root: Path, rev: str) -> str:
    return f"{rev!r} does not name a commit in the repository at {repo_root}"


async def merge_branch(
    repo_root: Path,
    *,
    target_ref: str,
    source_commit: str,
    message: str,
    identity: Identity,
    git_common_dir: Path | None = None,
    made_on: str | None = None,
) -> MergeOutcome:
    """Merge `source_commit` into `target_ref` (always a merge commit, never fast-forward).

    A tip that is itself the merge of the source (written by a process that died before
    recording it) is found as that merge; `made_on`, when given, is the tip the caller
    knew, and a merge of the source onto any other commit (a user's own) is not taken
    for it.

    Conflicted leaves `target_ref` exactly where it was. If the target moves while the
    merge is computed, `StepFailed` is raised and the ref keeps the other writer's value.

    Three git processes for a merge of a commit oid onto a tip this process merged before
    (the supervisor's every merge but its first): merge-tree, commit-tree and update-ref.
    Otherwise, or without the repository's `git_common_dir`, the target is read by a
    for-each-ref first; a source given by name is resolved by one more. When the merged
    tree is the target's, the tip's parents are read (`rev-list`), then, unless the tip is
    the merge of the source, `merge-base --is-ancestor` runs.
    """
    branch = target_ref.removeprefix("refs/heads/")
    if not target_ref.startswith("refs/heads/"):
        raise ValueError(
            f"target_ref must be a full branch ref (refs/heads/...), got {target_ref!r}"
        )
    previous, previous_tree = await _target_tip(repo_root, git_common_dir, target_ref)
    if is_full_oid(source_commit):
        # An oid never moves: merge-tree and commit-tree may each read it, and a missing
        # one fails merge-tree (below). The supervisor always merges a recorded oid.
        source_oid, source = source_commit.lower(), f"{source_commit}^{{commit}}"
    else:
        try:
            source_oid = source = await rev_parse(repo_root, source_commit)
        except UsageError as exc:
            raise StepFailed(exc.message, branch=branch) from None

    # Isolated (invocation.py): the repository's attributes and configuration could name
    # a merge driver, which merge-tree would run. The checkout's `.gitattributes` are still
    # read, as git's own merge reads them: git's own drivers (union, binary) apply.
    result = await git_isolated(
        "merge-tree", "--write-tree", "-z", "--messages", previous, source,
        common=git_common_dir or common_of(repo_root), work_tree=repo_root, check=False,
    )  # fmt: skip
    if result.returncode not in (0, 1) or not result.stdout:
        # Exit 1 with no tree is a failure too: "X - not something we can merge".
        if "not something we can merge" in result.stderr:
            raise StepFailed(_missing(repo_root, source_commit), branch=branch)
        raise StepFailed(f"git merge-tree failed: {first_line(result)}", branch=branch)
    tree, conflicts = parse_merge_tree(result.stdout)
    if result.returncode == 1:
        if not conflicts:  # exit 1 promises conflicts; never report one as clean
            conflicts = (ConflictedPath(".", "unknown", result.stdout.replace("\0", " ")),)
        return Conflicted(conflicts)
    # A source the target already contains merges to the target's own tree; so does one
    # whose changes the target already has by other commits, which still gets its merge
    # commit (a later merge of it must find it contained). Any other tree needs no check.
    if tree == previous_tree:
        parents = await parents_of(repo_root, previous)
        if len(parents) == 2 and parents[1] == source_oid and made_on in (None, parents[0]):
            return Merged(previous, parents[0], tree, already_merged=True)  # this very merge
        if made_on is not None and made_on != previous:
            found = await _merge_made_on(repo_root, previous, made_on, source_oid)
            if found is not None:
                return found
        if await is_ancestor(repo_root, source, previous):
            return Merged(previous, previous, tree, already_merged=True)

    merge_commit = await commit_tree(
        repo_root, tree, (previous, source), identity=identity, message=message.rstrip("\n") + "\n"
    )
    await update_ref(repo_root, target_ref, merge_commit, previous)
    _TREES.remember(merge_commit, tree)
    return Merged(merge_commit, previous, tree)


async def _merge_made_on(repo_root: Path, tip: str, made_on: str, source_oid: str) -> Merged | None:
    """The merge of the source onto `made_on`, among the merges of ours between `made_on`
    and `tip` (a merge step's later merges, written by a process that died before it
    recorded any): followed down the first parents, as far as a merge step goes."""
    commit = tip
    for _ in range(MERGES_LOOKED_BACK):
        parents = await parents_of(repo_root, commit)
        if len(parents) != 2:
            return None
        if parents[0] == made_on:
            if parents[1] != source_oid:
                return None
            return Merged(commit, made_on, await tree_of(repo_root, commit), already_merged=True)
        commit = parents[0]
    return None


class _CommitTrees:
    """Commit oid -> its tree oid, for the last commits merged into or written by a merge.

    A commit's tree never changes, so an entry can be forgotten but never go stale."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._trees: dict[str, str] = {}

    def get(self, commit: str) -> str | None:
        return self._trees.get(commit)

    def remember(self, commit: str, tree: str) -> None:
        self._trees[commit] = tree
        while len(self._trees) > self._size:
            del self._trees[next(iter(self._trees))]  # the oldest: dicts keep their order


_TREES = _CommitTrees(size=64)


async def _target_tip(
    repo_root: Path, git_common_dir: Path | None, target_ref: str
) -> tuple[str, str]:
    """The commit the target branch points at, and its tree; `StepFailed` when the
    branch is missing or checked out in a worktree.

    From the branch's own file when a merge of this process left it there (so its tree is
    known); otherwise from git."""
    import trio  # here: `start` and `validate` import this module but run no trio loop

    if git_common_dir is not None:
        tip = await trio.to_thread.run_sync(plain_tip, git_common_dir, target_ref)
        tree = _TREES.get(tip) if tip is not None else None
        if tip is not None and tree is not None:
            return tip, tree
    branch = target_ref.removeprefix("refs/heads/")
    target = (await read_refs(repo_root, (target_ref,))).get(target_ref)
    if target is not None and target.worktree is not None:
        # Moving a checked-out branch behind its worktree's back would make the whole
        # merge look like staged changes, undone, in that checkout: the user's, maybe.
        raise StepFailed(
            f"refusing to merge into {branch!r}: it is checked out at {target.worktree}",
            branch=branch,
        )
    if target is None or target.type != "commit":
        # Both come from the supervisor, not the user: a missing one is a failed step.
        raise StepFailed(_missing(repo_root, target_ref), branch=branch)
    _TREES.remember(target.oid, target.tree)
    return target.oid, target.tree
