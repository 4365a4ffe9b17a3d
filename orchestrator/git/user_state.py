"""Reading what the user owns in a repository, for the guard (core/guard.py), and keeping
every object of it reachable while a run lasts.

Most of it is files read directly (the git directory's config, hooks, `info/`, each
worktree's HEAD): a few milliseconds for the lot, no git process. Refs, the stash and the
checkout's tree are git's to say. The checkout is snapshotted through an index file of
the guard's own, never the user's, kept between comparisons so that git rehashes only
the files whose stat data changed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.guard import FileFacts, PathChange, StashEntry
from orchestrator.errors import StepFailed
from orchestrator.git.invocation import git
from orchestrator.git.refs import commit_tree
from orchestrator.git.repo import Identity, add_all_but, write_tree


@dataclass(frozen=True)
class RefTarget:
    value: str  # "<oid>", or "ref: <target>" for a symbolic ref
    oid: str  # what it resolves to
    type: str  # commit, tag, tree, blob


async def read_all_refs(cwd: Path) -> dict[str, RefTarget]:
    """Every ref of the repository (kairo-orch's own too) and what type of object it
    points at, one git process: what the record keeps reachable, and how."""
    result = await git(
        "for-each-ref", "--format=%(refname)%00%(objectname)%00%(objecttype)%00%(symref)", cwd=cwd
    )
    refs: dict[str, RefTarget] = {}
    for line in result.stdout.splitlines():  # no ref name holds a newline or a NUL
        name, oid, type_, symref = line.split("\0")
        refs[name] = RefTarget(f"ref: {symref}" if symref else oid, oid, type_)
    return refs


async def read_ref_values(cwd: Path) -> dict[str, str]:
    """Every ref of the repository, as `<oid>` or `ref: <target>`: what a comparison
    needs. Without the objects' types, which git reads object by object (a fourth of the
    time, at a thousand refs)."""
    result = await git("for-each-ref", "--format=%(refname)%00%(objectname)%00%(symref)", cwd=cwd)
    refs: dict[str, str] = {}
    for line in result.stdout.splitlines():
        name, oid, symref = line.split("\0")
        refs[name] = f"ref: {symref}" if symref else oid
    return refs


def stash_log(common_dir: Path) -> Path:
    """Where git keeps the stash's entries, for a look at whether they changed."""
    return common_dir / "logs" / "refs" / "stash"


async def read_stash(cwd: Path) -> tuple[StashEntry, ...]:
    """Every stash entry, oldest first: each is an entry of `refs/stash`'s reflog, which
    `git stash clear` or `drop` removes (and then the next gc, the commit)."""
    result = await git(
        "reflog", "show", "--format=%H %gs", "refs/stash", "--", cwd=cwd, check=False
    )
    if result.returncode != 0:  # no stash (or one so broken that git cannot read it)
        return ()
    entries = []
    for line in result.stdout.splitlines():
        oid, _, message = line.partition(" ")
        entries.append(StashEntry(oid=oid, message=message))
    return tuple(reversed(entries))


def read_head(git_dir: Path) -> str | None:
    """A worktree's HEAD, as its file holds it: `ref: <target>` or an oid."""
    try:
        return (git_dir / "HEAD").read_text(encoding="utf-8", errors="surrogateescape").strip()
    except OSError:
        return None


@dataclass(frozen=True)
class LinkedWorktree:
    admin: Path  # <common dir>/worktrees/<name>
    path: str  # the worktree, as its `gitdir` file names it
    head: str


def linked_worktrees(common_dir: Path) -> list[LinkedWorktree]:
    """The repository's linked worktrees, from their administrative directories."""
    found = []
    try:
        admins = sorted((common_dir / "worktrees").iterdir())
    except OSError:
        return []
    for admin in admins:
        try:
            gitfile = (admin / "gitdir").read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            continue  # half made or half removed: git itself would prune it
        path = str(Path(gitfile.strip()).parent)
        found.append(LinkedWorktree(admin, path, read_head(admin) or ""))
    return found


#: The files of a linked worktree's administrative directory that say where it is and
#: what configures it (its index, logs and the like change with every use).
WORKTREE_METADATA = ("commondir", "gitdir", "locked", "config.worktree")


def git_directory_files(common_dir: Path, git_dir: Path) -> tuple[list[Path], list[Path]]:
    """(files, directories) of the git directory where code or data can be planted for
    the user's next git to run or read: config, hooks, `info/` (attributes, exclude,
    grafts, sparse-checkout), `shallow`, alternates. Directories are read whole."""
    files = [
        common_dir / "config",
        common_dir / "config.worktree",
        common_dir / "shallow",
        common_dir / "objects" / "info" / "alternates",
        common_dir / "objects" / "info" / "http-alternates",
    ]
    if git_dir != common_dir:  # the checkout is itself a linked worktree
        files += [git_dir / "config.worktree", git_dir / "commondir", git_dir / "gitdir"]
    directories = [common_dir / "hooks", common_dir / "info"]
    return files, directories


def global_config_files(environment: Mapping[str, str]) -> list[Path]:
    """The user's own git configuration, which an agent running as the user can write:
    what it plants there runs in every repository of theirs."""
    home = Path(environment.get("HOME") or Path.home())
    xdg = Path(environment.get("XDG_CONFIG_HOME") or home / ".config") / "git"
    files = [xdg / "config", xdg / "attributes"]
    files.append(Path(environment.get("GIT_CONFIG_GLOBAL") or home / ".gitconfig"))
    files.append(Path(environment.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"))
    return files


async def included_files(config: Path, cwd: Path) -> list[Path]:
    """The files `config` includes (`include.path`, `includeIf.<condition>.path`), each
    whatever its condition, whether there or not: one written later would be read."""
    result = await git(
        "config", "--file", str(config), "--null", "--get-regexp", r"^include(if\..*)?\.path$",
        cwd=cwd, check=False,
    )  # fmt: skip
    found = []
    for entry in result.stdout.split("\0"):
        _, _, value = entry.partition("\n")
        if value:
            found.append(_include_path(config, value))
    return found


def _include_path(config: Path, value: str) -> Path:
    """Relative to the including file; `~` is the user's home (git-config(1))."""
    return config.parent / Path(value).expanduser()


def read_files(
    files: Iterable[Path], directories: Iterable[Path]
) -> tuple[dict[str, FileFacts], dict[str, bytes]]:
    """Each file that is there (directories: every file in them, at any depth), with its
    content: ({path: facts}, {digest: content})."""
    facts: dict[str, FileFacts] = {}
    contents: dict[str, bytes] = {}
    paths = list(files)
    for directory in directories:
        for parent, subdirectories, names in os.walk(directory):
            subdirectories.sort()
            paths += [Path(parent) / name for name in sorted(names)]
            # A link to a directory is a file here: os.walk does not follow it.
            paths += [Path(parent) / d for d in subdirectories if (Path(parent) / d).is_symlink()]
    for path in paths:
        read = _read_one(path)
        if read is not None:
            facts[str(path)], content = read
            contents[facts[str(path)].digest] = content
    return facts, contents


def _read_one(path: Path) -> tuple[FileFacts, bytes] | None:
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            content = os.fsencode(path.readlink())
            link = True
        elif stat.S_ISREG(info.st_mode):
            content = path.read_bytes()
            link = False
        else:
            return None
    except OSError:
        return None
    digest = hashlib.sha256(content).hexdigest()
    return FileFacts(digest=digest, link=link, mode=stat.S_IMODE(info.st_mode)), content


def save_copies(folder: Path, contents: Mapping[str, bytes]) -> None:
    """Each content in `folder`, named by its digest (which a user can check with
    `sha256sum`), written once."""
    folder.mkdir(parents=True, exist_ok=True)
    for digest, content in contents.items():
        copy = folder / digest
        if not copy.exists():
            temporary = copy.with_name(f".{digest}.tmp")
            temporary.write_bytes(content)
            temporary.chmod(0o600)
            temporary.replace(copy)


def copy_index(index: Path, folder: Path) -> str:
    """A copy of an index file in `folder`, named by its digest; the digest."""
    content = index.read_bytes() if index.exists() else b""
    digest = hashlib.sha256(content).hexdigest()
    save_copies(folder, {digest: content})
    return digest


async def index_entries(worktree: Path, index: Path) -> str:
    """A digest of an index's entries (mode, object, stage, path): what `git status`
    refreshing its stat data leaves as it is."""
    listed = await git(
        "ls-files", "--stage", "-z", cwd=worktree, env={"GIT_INDEX_FILE": str(index)}
    )
    return hashlib.sha256(listed.stdout.encode("utf-8", "surrogateescape")).hexdigest()


class TreeSnapshots:
    """The tree of a worktree's files (those git does not ignore), through an index file
    of our own at `index`: seeded from `seed` (an index whose stat data is fresh, the
    worktree's own, copied and never written), then kept, so that each snapshot rehashes
    only the files whose stat data changed. The kept file is checked against what we
    last wrote before it is used: one changed by another hand (whose entries could hide a
    change) is replaced by a new seed."""

    def __init__(self, worktree: Path, index: Path, seed: Path) -> None:
        self.worktree = worktree
        self.index = index
        self.seed = seed
        self._written: str | None = None  # the digest of the index file we last left
        self._tree: str | None = None  # ... and the tree it held

    async def tree(self) -> str:
        if self._written is None or _digest_of(self.index) != self._written:
            self._seed()
        await add_all_but(self.worktree, (), index=self.index)
        if self._tree is not None and _digest_of(self.index) == self._written:
            return self._tree  # `add` left the index as it was: no file changed
        self._tree = await write_tree(self.worktree, index=self.index)
        self._written = _digest_of(self.index)
        return self._tree

    def _seed(self) -> None:
        self.index.parent.mkdir(parents=True, exist_ok=True)
        if self.seed.exists():
            shutil.copyfile(self.seed, self.index)
        else:
            self.index.unlink(missing_ok=True)
        self._tree = None

    def forget(self) -> None:
        self.index.unlink(missing_ok=True)
        self._written = self._tree = None


def _digest_of(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


async def tree_changes(cwd: Path, was: str, now: str) -> list[PathChange]:
    """The paths where tree `now` differs from tree `was`, each as `<mode> <oid>`."""
    result = await git("diff-tree", "-r", "-z", "--no-renames", was, now, cwd=cwd)
    fields = result.stdout.split("\0")
    changes = []
    for header, path in zip(fields[0::2], fields[1::2], strict=False):
        mode_was, mode_now, oid_was, oid_now, _ = header.lstrip(":").split(" ")
        changes.append(
            PathChange(
                path=path,
                was=None if set(mode_was) == {"0"} else f"{mode_was} {oid_was}",
                now=None if set(mode_now) == {"0"} else f"{mode_now} {oid_now}",
            )
        )
    return changes


async def index_tree(worktree: Path, index: Path, scratch: Path) -> str | None:
    """The tree of an index's entries, written from a copy of it (write-tree writes the
    index it reads); None when it has unmerged entries, which no tree holds."""
    import trio  # here, as in refs.py: `list` and `status` import this package untouched

    if not await trio.to_thread.run_sync(_copied, index, scratch):
        return None
    try:
        return await write_tree(worktree, index=scratch)
    except StepFailed:  # unmerged entries: no tree holds them
        return None
    finally:
        await trio.Path(scratch).unlink(missing_ok=True)


def _copied(source: Path, to: Path) -> bool:
    to.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copyfile(source, to)
    except FileNotFoundError:
        return False
    return True


async def keep_reachable(
    cwd: Path,
    *,
    namespace: str,
    tree: str,
    commits: Sequence[str],
    others: Sequence[str],
    identity: Identity,
    message: str,
) -> tuple[str, dict[str, str]]:
    """One commit of `tree` whose parents are `commits`, and a ref to it and to each of
    `others` (objects no commit reaches: annotated tags, trees), under `namespace`: what
    they reach survives any `gc` while the refs are there. (The commit, its ref names)."""
    commit = await commit_tree(cwd, tree, sorted(set(commits)), identity=identity, message=message)
    refs = {f"{namespace}/snapshot": commit}
    refs.update({f"{namespace}/objects/{oid}": oid for oid in sorted(set(others))})
    lines = "".join(f"update {ref} {oid}\n" for ref, oid in refs.items())
    await git("update-ref", "--stdin", cwd=cwd, stdin=lines.encode())
    return commit, refs


async def drop_refs(cwd: Path, namespace: str) -> int:
    """Delete every ref under `namespace` (the guard's of an execution `clean` removes)."""
    listed = await git("for-each-ref", "--format=%(refname)", f"{namespace}/", cwd=cwd)
    refs = listed.stdout.split()
    if refs:
        lines = "".join(f"delete {ref}\n" for ref in refs)
        await git("update-ref", "--stdin", cwd=cwd, stdin=lines.encode())
    return len(refs)


@dataclass(frozen=True)
class WorktreeLink:
    """Where a worktree's `.git` file points, and where that directory points back."""

    points_at: str | None
    points_back: str | None
    common: str | None


def read_link(worktree: Path) -> WorktreeLink:
    """A worktree's link, every path resolved (None where a file is missing or not one
    git would read as such)."""
    try:
        text = (worktree / ".git").read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return WorktreeLink(None, None, None)
    if not text.startswith("gitdir: "):
        return WorktreeLink(None, None, None)
    admin = (worktree / text.removeprefix("gitdir: ").strip()).resolve()
    back = _resolved_content(admin / "gitdir", admin)
    common = _resolved_content(admin / "commondir", admin)
    return WorktreeLink(str(admin), back, common)


def _resolved_content(file: Path, relative_to: Path) -> str | None:
    try:
        text = file.read_text(encoding="utf-8", errors="surrogateescape").strip()
    except OSError:
        return None
    return str((relative_to / text).resolve())
