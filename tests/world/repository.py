"""An in-memory repository: commits whose trees are dicts of path -> text, refs, and
worktrees as dicts of files. A second implementation of the ports Repository and
WorkspaceProvider (orchestrator/runtime/ports.py, orchestrator/git/workspace_port.py),
modelling what the supervisor relies on of git: compare-and-swap refs, a branch per
worktree, commits of what an agent left, three-way merges that conflict on a path both
sides changed. Only the in-process tests use it; the real suites run real git."""

from __future__ import annotations

import collections
import difflib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.errors import StepFailed
from orchestrator.git.commit import CommitOutcome
from orchestrator.git.history import CommitSummary, DiffStat
from orchestrator.git.merge import Conflicted, ConflictedPath, Merged, MergeOutcome
from orchestrator.git.refs import BranchExists, branch_ref
from orchestrator.git.workspace_port import Workspace, WorkspaceKind

Tree = dict[str, str]


@dataclass(frozen=True)
class Commit:
    tree: Tree
    parents: tuple[str, ...]
    message: str


@dataclass
class Worktree:
    branch: str | None  # None: a detached checkout (the integration check's)
    files: Tree = field(default_factory=dict)


def _hash(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode(), usedforsecurity=False).hexdigest()


def tree_id(tree: Mapping[str, str]) -> str:
    return _hash(sorted(tree.items()))


class MemoryRepository:
    """The Repository port over dicts."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.commits: dict[str, Commit] = {}
        self.refs: dict[str, str] = {}
        self.worktrees: dict[Path, Worktree] = {}
        self.base = self.commit(dict(files), (), "initial")
        self.refs[branch_ref("main")] = self.base

    # What the tests read and write directly.

    def commit(self, tree: Tree, parents: tuple[str, ...], message: str) -> str:
        oid = _hash(sorted(tree.items()), parents, message, len(self.commits))
        self.commits[oid] = Commit(dict(tree), parents, message)
        return oid

    def tree_at(self, rev: str) -> Tree:
        return dict(self.commits[self._resolve(rev)].tree)

    def _resolve(self, rev: str) -> str:
        if rev in self.commits:
            return rev
        for name in (rev, branch_ref(rev)):
            if name in self.refs:
                return self.refs[name]
        raise StepFailed(f"no commit {rev!r} in the in-memory repository")

    def _head(self, worktree: Path) -> str:
        branch = self.worktrees[worktree].branch
        assert branch is not None, f"{worktree} is detached"
        return self.refs[branch_ref(branch)]

    def ancestors(self, oid: str) -> list[str]:
        """`oid` and every commit it descends from, nearest first (breadth first)."""
        seen: dict[str, None] = {}  # an ordered set: a plan of a thousand merges
        queue = collections.deque([oid])
        while queue:
            current = queue.popleft()
            if current not in seen:
                seen[current] = None
                queue.extend(self.commits[current].parents)
        return list(seen)

    # The port.

    async def create_branch(self, name: str, commit: str) -> None:
        if branch_ref(name) in self.refs:
            raise BranchExists(f"branch {name!r} already exists", branch=name)
        self.refs[branch_ref(name)] = self._resolve(commit)

    async def rev_parse(self, rev: str) -> str:
        return self._resolve(rev)

    async def ref_exists(self, ref: str) -> bool:
        return ref in self.refs

    async def branch_exists(self, name: str) -> bool:
        return branch_ref(name) in self.refs

    async def update_ref(self, ref: str, new: str, old: str) -> None:
        if self.refs.get(ref) != old:
            raise StepFailed(f"{ref} moved while kairo-orch was updating it")
        self.refs[ref] = new

    async def tree_of(self, rev: str) -> str:
        return tree_id(self.tree_at(rev))

    async def diffstat(self, base: str, head: str) -> DiffStat:
        old, new = self.tree_at(base), self.tree_at(head)
        paths = tuple(sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p)))
        insertions = deletions = 0
        for path in paths:
            for line in difflib.ndiff(
                old.get(path, "").splitlines(), new.get(path, "").splitlines()
            ):
                insertions += line.startswith("+ ")
                deletions += line.startswith("- ")
        text = f"{len(paths)} files changed, {insertions} insertions(+), {deletions} deletions(-)"
        return DiffStat(len(paths), insertions, deletions, text, paths)

    async def commits_between(self, base: str, head: str) -> list[CommitSummary]:
        excluded = set(self.ancestors(self._resolve(base)))
        return [
            CommitSummary(oid, self.commits[oid].message.partition("\n")[0])
            for oid in self.ancestors(self._resolve(head))
            if oid not in excluded
        ]

    async def merge(
        self, *, target_ref: str, source_commit: str, message: str, made_on: str | None
    ) -> MergeOutcome:
        target = self.refs[target_ref]
        if source_commit in self.ancestors(target):
            return Merged(target, target, tree_id(self.tree_at(target)), already_merged=True)
        in_source = set(self.ancestors(source_commit))
        base = next(oid for oid in self.ancestors(target) if oid in in_source)
        ours, theirs, common = self.tree_at(target), self.tree_at(source_commit), self.tree_at(base)
        merged: Tree = {}
        conflicts: list[ConflictedPath] = []
        for path in sorted(ours.keys() | theirs.keys() | common.keys()):
            o, t, b = ours.get(path), theirs.get(path), common.get(path)
            if o == t or t == b:
                chosen = o
            elif o == b:
                chosen = t
            else:
                message_ = f"CONFLICT (content): Merge conflict in {path}"
                conflicts.append(ConflictedPath(path, "content", message_))
                continue
            if chosen is not None:
                merged[path] = chosen
        if conflicts:
            return Conflicted(tuple(conflicts))
        oid = self.commit(merged, (target, source_commit), message)
        self.refs[target_ref] = oid
        return Merged(oid, target, tree_id(merged))

    async def tracked_files(self, worktree: Path, commit: str) -> list[str]:
        return sorted(self.tree_at(commit))

    async def commit_all(
        self,
        worktree: Path,
        *,
        message: str,
        trailers: Mapping[str, str],
        start_commit: str,
        expected_branch: str | None,
        leave_out: Sequence[str],
    ) -> CommitOutcome:
        checkout = self.worktrees[worktree]
        if expected_branch is not None and checkout.branch != expected_branch:
            raise StepFailed(f"{worktree} is not on {expected_branch}")
        head = self._head(worktree)
        tree = {p: t for p, t in checkout.files.items() if p not in leave_out}
        if tree != self.tree_at(head):
            trailer_lines = "".join(f"\n{k}: {v}" for k, v in trailers.items())
            head = self.commit(tree, (head,), message + "\n" + trailer_lines)
            self.refs[branch_ref(str(checkout.branch))] = head
        if head == start_commit:
            return CommitOutcome(head, False, 0)
        stat = await self.diffstat(start_commit, head)
        return CommitOutcome(head, True, stat.files, paths=stat.paths)

    async def save_worktree_state(
        self,
        worktree: Path,
        *,
        ref: str,
        safe_commit: str,
        message: str,
        leave_out: Sequence[str],
    ) -> str | None:
        head = self._head(worktree)
        tree = {p: t for p, t in self.worktrees[worktree].files.items() if p not in leave_out}
        if head == safe_commit and tree == self.tree_at(safe_commit):
            return None
        self.refs[ref] = self.commit(tree, (head,), message)
        return ref

    async def reset_worktree(
        self, worktree: Path, commit: str, *, branch: str, leave_out: Sequence[str]
    ) -> None:
        checkout = self.worktrees[worktree]
        checkout.branch = branch
        kept = {p: t for p, t in checkout.files.items() if p in leave_out}
        self.refs[branch_ref(str(checkout.branch))] = commit
        checkout.files = {**self.tree_at(commit), **kept}


class MemoryWorkspaces:
    """The WorkspaceProvider port: worktrees of a MemoryRepository."""

    def __init__(self, repository: MemoryRepository) -> None:
        self.repository = repository

    async def create(self, subtask_id: str, branch: str, base_commit: str, path: Path) -> Workspace:
        repo = self.repository
        if branch_ref(branch) in repo.refs or path in repo.worktrees:
            raise StepFailed(f"cannot create the worktree {path} on {branch}")
        repo.refs[branch_ref(branch)] = base_commit
        repo.worktrees[path] = Worktree(branch, repo.tree_at(base_commit))
        return Workspace(subtask_id, path, branch, base_commit, WorkspaceKind.LOCAL)

    async def release(self, workspace_path: Path) -> None:
        self.repository.worktrees.pop(workspace_path, None)

    async def adopt(self, subtask_id: str, branch: str, path: Path) -> Workspace | None:
        repo = self.repository
        if branch_ref(branch) not in repo.refs:
            return None
        head = repo.refs[branch_ref(branch)]
        repo.worktrees.setdefault(path, Worktree(branch, repo.tree_at(head)))
        return Workspace(subtask_id, path, branch, head, WorkspaceKind.LOCAL)

    async def exists(self, path: Path) -> bool:
        return path in self.repository.worktrees

    async def check_out_detached(self, path: Path, commit: str) -> Path:
        self.repository.worktrees[path] = Worktree(None, self.repository.tree_at(commit))
        return path
