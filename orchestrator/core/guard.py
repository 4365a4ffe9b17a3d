"""The guard of what the user owns: what it records at `start`, how a change is found,
told, and undone by hand. Pure: the edge (runtime/guard.py) reads the repository into a
`UserState` and hands two of them to `changes`.

An agent is a program with a shell, running as the user: it can delete a branch, clear
the stash and `gc` the objects away, plant a hook or a `core.fsmonitor` that runs in the
user's next git, or write into the user's checkout. kairo-orch cannot stop that in local
mode (the sandbox can), but it can notice it, name it, keep every object the user had
reachable so that no `gc` destroys it, and say the one command that puts it back. It
never puts anything back itself: a change may be the user's own.

What is compared, by kind of change:

- `ref`: every ref outside kairo-orch's own (branches, tags, notes, replace, remotes;
  those of other, ended executions too), as `oid` or `ref: target`;
- `head`: the HEAD of the user's checkout and of each of their other worktrees;
- `stash`: each stash entry (each a reflog entry of `refs/stash`), by commit;
- `file`: the files of the git directory an agent could plant code or data in (config
  and its includes, hooks, `info/`, `shallow`, alternates, other worktrees' metadata) and
  the user's global git config, by content;
- `checkout`: the files of the user's checkout git does not ignore, by content (a tree);
- `index`: the checkout's index, by its entries;
- `branch`: this execution's own branches, against where its log says they are;
- `worktree`: the files of this execution's worktrees, between an attempt's commit and
  what comes next (its merge, its next attempt);
- `link`: this execution's worktrees' links to the git directory (their `.git` file, and
  its `gitdir` and `commondir`), which must stay as git made them;
- `unreadable`: something git could no longer read, which cannot be vouched for.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.core.event_base import EventModel
from orchestrator.core.ids import SUBTASK_NAMESPACE, named_short_id
from orchestrator.core.inert_text import markdown_code, markdown_text
from orchestrator.core.os_strings import OsStr

ChangeKind = Literal[
    "ref", "head", "stash", "file", "checkout", "index", "branch", "worktree", "link", "unreadable"
]

#: When a comparison ran: after an attempt's agent or check ended, before a merge step or
#: a review step (a push, a pull request), at the end, or when a supervisor resumed.
Moment = Literal["attempt", "verify", "integration_verify", "merge", "review", "end", "resume"]

STASH = "refs/stash"

#: The refs under which kairo-orch keeps what the guard keeps reachable, per execution.
GUARD_NAMESPACE = "refs/kairo/guard"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StashEntry(_Frozen):
    oid: str
    message: str


class FileFacts(_Frozen):
    """A guarded file as found: the SHA-256 of its content (of its target, for a symbolic
    link), which names its copy in the run folder."""

    digest: str
    link: bool = False
    mode: int = 0o644  # its permission bits (a hook's executable ones)


class UserState(_Frozen):
    """What the user owns, as recorded at the start or as a comparison finds it."""

    refs: dict[str, str]  # full ref name -> "<oid>" or "ref: <target>"
    heads: dict[str, str]  # worktree path -> its HEAD, in the same form
    stash: tuple[StashEntry, ...]  # oldest first
    files: dict[str, FileFacts]  # absolute path -> its content; absent: not there
    checkout: str  # the tree of the checkout's files that git does not ignore
    index: str  # a digest of the checkout's index entries


class GuardRecord(_Frozen):
    """The record taken at `start`, kept in the run folder (its digest is in the log)."""

    state: UserState
    #: A commit whose tree is the checkout's snapshot and whose parents are every commit
    #: the user's refs, HEADs and stash entries point at.
    snapshot_commit: str
    #: The refs that keep it all reachable: the snapshot's, and one for each object of
    #: another type (an annotated tag, a tree) that a ref points at.
    kept: dict[str, str]
    checkout_root: str
    index_file: str
    index_copy: str  # the digest of the index file's copy
    copies: str  # the folder of the guarded files' copies, each named by its digest
    #: The files and directories (read whole) of the git directory and the user's
    #: configuration it watches, whether there or not: one written later is a change.
    watched_files: tuple[str, ...] = ()
    watched_directories: tuple[str, ...] = ()
    #: The short ids of other executions that had not ended: their refs move as they run.
    running_executions: tuple[str, ...] = ()


class GuardChange(_Frozen):
    """One change: what it was (None: not there) and what it is, and the command that puts
    it back. Values are oids, `ref: <target>`, stash messages, or content digests."""

    kind: ChangeKind
    # Names as git gives them (any bytes: `OsStr`), and what holds them.
    name: OsStr
    was: OsStr | None
    now: OsStr | None
    restore: OsStr
    subtask_id: str | None = None  # `branch` and `worktree`: the subtask whose they are

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.name

    def sentence(self) -> str:
        """What changed, in a few words: "refs/heads/feature was deleted (it was at …)"."""
        what = _WHAT.get(self.kind, "{}").format(self.name)
        if self.kind in ("link", "unreadable"):
            return self.now or f"{what} was deleted"
        if self.kind == "stash":
            entry = f"{what} '{self.was or self.now}'"
            return f"{entry} was dropped" if self.now is None else f"{entry} was added"
        if self.kind in ("file", "checkout", "index", "worktree"):
            if self.was is None:
                return f"{what} was created"
            return f"{what} was deleted" if self.now is None else f"{what} was changed"
        if self.was is None:
            return f"{what} was created at {_short(self.now)}"
        if self.now is None:
            return f"{what} was deleted (it was at {_short(self.was)})"
        return f"{what} moved from {_short(self.was)} to {_short(self.now)}"


_WHAT: dict[str, str] = {
    "head": "HEAD of {}",
    "stash": "stash entry {:.12}",
    "index": "the index of {}",
}


def _short(value: str | None) -> str:
    if value is None:
        return "nothing"
    if value.startswith("ref: "):
        return value.removeprefix("ref: ")
    return value[:12]


class GuardRecorded(EventModel):
    """The record of what the user owns was taken (before any agent ran): the SHA-256 of
    the record file, so that one changed since is noticed, and the snapshot commit."""

    type: Literal["guard_recorded"] = "guard_recorded"
    record_sha256: str
    snapshot_commit: str
    host: str
    refs: int = 0
    files: int = 0


class GuardBreached(EventModel):
    """A comparison found changes not reported before. `subtask_ids`: the suspects, whose
    agents or checks ran since the last comparison; each fails with `guard_breached`."""

    type: Literal["guard_breached"] = "guard_breached"
    changes: tuple[GuardChange, ...]
    subtask_ids: tuple[str, ...] = ()
    moment: Moment = "attempt"


# -- whose a ref is ---------------------------------------------------------------------


@dataclass(frozen=True)
class Ownership:
    """What tells the user's refs from kairo-orch's: this execution's names, and the
    short ids of executions running beside it."""

    short_id: str
    integration_branch: str
    running_executions: frozenset[str] = frozenset()


def execution_of(ref: str) -> str | None:
    """The short id of the execution a ref in kairo-orch's namespaces belongs to; None for
    any other ref (a user's)."""
    if ref.startswith("refs/heads/"):
        branch = ref.removeprefix("refs/heads/")
        if branch.startswith((f"{SUBTASK_NAMESPACE}/", "kairo/")):
            return named_short_id(branch)
        return None
    parts = ref.split("/")
    if parts[:2] == ["refs", "kairo"] and len(parts) > 3:
        return parts[3]  # refs/kairo/<kind>/<short>/...
    if parts[:2] == ["refs", "kairo-remote"]:
        return named_short_id("/".join(parts[2:]))
    if parts[:2] == ["refs", "remotes"]:  # a push of one (`review.push`) tracks it there
        for start in range(3, len(parts)):  # a remote's name may hold slashes
            short = named_short_id("/".join(parts[start:]))
            if short is not None:
                return short
    return None


def is_ours(ref: str, owner: Ownership) -> bool:
    """This execution's: its branches, its integration branch (and what tracks it once
    `review.push` pushed it), its saved states."""
    integration = owner.integration_branch
    if ref == f"refs/heads/{integration}":
        return True
    if ref.startswith("refs/remotes/") and ref.endswith(f"/{integration}"):
        return True
    return execution_of(ref) == owner.short_id


def is_guarded(ref: str, owner: Ownership) -> bool:
    """A ref the guard records: the user's, and another execution's that had ended (its
    kept work is the user's now). Not this execution's, nor one running beside it, nor
    any execution's guard refs (a `clean` of it removes them)."""
    if is_ours(ref, owner) or ref.startswith(f"{GUARD_NAMESPACE}/") or ref == STASH:
        return False  # the stash is guarded entry by entry
    return execution_of(ref) not in owner.running_executions


def in_kairo_namespace(ref: str) -> bool:
    """Made by some execution: one made during the run is another execution's (or its
    `clean`'s) doing, not a change of the user's."""
    return execution_of(ref) is not None


def is_kairo_worktree(path: str, head: str) -> bool:
    """A worktree kairo-orch made: a subtask's, a spare, an integration check's, or one
    being added. Their metadata moves as executions run; the rest are the user's."""
    parts = path.rstrip("/").split("/")
    if ".spares" in parts or parts[-1] == ".integration" or parts[-1].endswith(".new"):
        return True
    return head.startswith(f"ref: refs/heads/{SUBTASK_NAMESPACE}/")


# -- what changed -----------------------------------------------------------------------


@dataclass(frozen=True)
class PathChange:
    """A path of a tree that differs from the recorded one: `<mode> <oid>` or None."""

    path: str
    was: str | None
    now: str | None


def changes(
    record: GuardRecord, found: UserState, checkout_paths: Sequence[PathChange] = ()
) -> list[GuardChange]:
    """Every difference between the record and what was found, each with the command that
    restores it. `checkout_paths`: the paths where the checkout's trees differ (the edge
    asks git, only when the two trees' ids differ)."""
    recorded = record.state
    out: list[GuardChange] = []
    for name in sorted(recorded.refs.keys() | found.refs.keys()):
        was, now = recorded.refs.get(name), found.refs.get(name)
        if was != now and not (was is None and in_kairo_namespace(name)):
            out.append(
                GuardChange(kind="ref", name=name, was=was, now=now, restore=_ref(name, was))
            )
    for path in sorted(recorded.heads.keys() | found.heads.keys()):
        was, now = recorded.heads.get(path), found.heads.get(path)
        if was != now and was is not None:  # a worktree added since is none of the user's
            restore = _head(path, was)
            out.append(GuardChange(kind="head", name=path, was=was, now=now, restore=restore))
    out += _stash_changes(recorded.stash, found.stash)
    for path in sorted(recorded.files.keys() | found.files.keys()):
        was_file, now_file = recorded.files.get(path), found.files.get(path)
        if was_file != now_file:
            out.append(
                GuardChange(
                    kind="file",
                    name=path,
                    was=was_file.digest if was_file else None,
                    now=now_file.digest if now_file else None,
                    restore=_file(path, was_file, record.copies),
                )
            )
    root = record.checkout_root
    for change in checkout_paths:
        out.append(
            GuardChange(
                kind="checkout",
                name=f"{root}/{change.path}",
                was=change.was,
                now=change.now,
                restore=restore_path(root, change.path, change.was, record.snapshot_commit),
            )
        )
    if recorded.index != found.index:
        copy = f"{record.copies}/{record.index_copy}"
        out.append(
            GuardChange(
                kind="index",
                name=root,
                was=recorded.index,
                now=found.index,
                restore=shlex.join(["install", "-m", "0644", copy, record.index_file]),
            )
        )
    return out


def _stash_changes(
    recorded: Sequence[StashEntry], found: Sequence[StashEntry]
) -> list[GuardChange]:
    """Entries dropped, oldest first (`git stash store` of each in turn rebuilds the list),
    then entries added, the newest last (dropped in that order, their indexes hold)."""
    now = {entry.oid for entry in found}
    was = {entry.oid for entry in recorded}
    out = [
        GuardChange(
            kind="stash",
            name=entry.oid,
            was=entry.message,
            now=None,
            restore=shlex.join(["git", "stash", "store", "-m", entry.message, entry.oid]),
        )
        for entry in recorded
        if entry.oid not in now
    ]
    for position, entry in enumerate(found):
        if entry.oid not in was:
            index = len(found) - 1 - position  # stash@{0} is the newest, the last
            out.append(
                GuardChange(
                    kind="stash",
                    name=entry.oid,
                    was=None,
                    now=entry.message,
                    restore=f"git stash drop 'stash@{{{index}}}'",
                )
            )
    return out


def _ref(name: str, was: str | None) -> str:
    if was is None:
        return shlex.join(["git", "update-ref", "--no-deref", "-d", name])
    if was.startswith("ref: "):
        return shlex.join(["git", "symbolic-ref", name, was.removeprefix("ref: ")])
    return shlex.join(["git", "update-ref", "--no-deref", name, was])


def _head(worktree: str, was: str) -> str:
    if was.startswith("ref: "):
        return shlex.join(
            ["git", "-C", worktree, "symbolic-ref", "HEAD", was.removeprefix("ref: ")]
        )
    return shlex.join(["git", "-C", worktree, "update-ref", "--no-deref", "HEAD", was])


def _file(path: str, was: FileFacts | None, copies: str) -> str:
    if was is None:
        return shlex.join(["rm", "-f", path])
    copy = f"{copies}/{was.digest}"
    if was.link:
        return f'ln -sfn "$(cat {shlex.quote(copy)})" {shlex.quote(path)}'
    # `install` replaces whatever is in the file's place (a link put there is not written
    # through) and gives it back its mode (an executable hook stays one).
    return shlex.join(["install", "-m", f"{was.mode:04o}", copy, path])


_PATHSPEC_MAGIC = frozenset("*?[\\:")


def restore_path(root: str, path: str, was: str | None, source: str) -> str:
    """The command that puts one path of a worktree back as it is in the tree or commit
    `source`: `git restore` from it, or removing a file that was not there."""
    if was is None:
        return shlex.join(["rm", "-f", f"{root}/{path}"])
    # A path with glob characters would name others too: taken literally.
    spec = f":(literal){path}" if _PATHSPEC_MAGIC & set(path) else path
    return shlex.join(["git", "-C", root, "restore", f"--source={source}", "--", spec])


def branch_change(
    subtask_id: str | None, ref: str, logged: str, found: str | None
) -> GuardChange | None:
    """One of this execution's branches not where its log says: a sibling moved it."""
    if found == logged:
        return None
    return GuardChange(
        kind="branch",
        name=ref,
        was=logged,
        now=found,
        restore=_ref(ref, logged),
        subtask_id=subtask_id,
    )


def news(
    found: Iterable[GuardChange], reported: Mapping[tuple[str, str], str | None]
) -> tuple[list[GuardChange], dict[tuple[str, str], str | None]]:
    """The changes not reported yet (a thing reported as changed to a value is not again,
    while it stays at it), and what is reported from now on: one changed back is
    forgotten, so that a change of it again is new."""
    found = list(found)
    new = [
        change
        for change in found
        if change.key not in reported or reported[change.key] != change.now
    ]
    return new, {change.key: change.now for change in found}


def reported_in(breaches: Iterable[GuardBreached]) -> dict[tuple[str, str], str | None]:
    """What a log's breaches reported, the latest value of each: where a resumed
    supervisor's guard picks up."""
    return {change.key: change.now for breach in breaches for change in breach.changes}


# -- saying it --------------------------------------------------------------------------

#: What a reason's detail names at most; `status` and `report` list them all.
NAMED_IN_A_REASON = 3

IF_IT_WAS_YOU = (
    "if this was you, working in the repository while agents ran, kairo-orch cannot tell "
    "you from an agent: leave the repository alone during a run"
)


def reason_detail(breach: GuardBreached) -> str:
    """The suspect's reason: what changed, and how to put the first things back."""
    shown = breach.changes[:NAMED_IN_A_REASON]
    said = "; ".join(f"{change.sentence()} ({_restored_by(change)})" for change in shown)
    more = len(breach.changes) - len(shown)
    rest = f"; and {more} more (`kairo-orch status` lists them)" if more else ""
    return f"while its agent or check ran, {said}{rest}; {IF_IT_WAS_YOU}"


def _restored_by(change: GuardChange) -> str:
    return f"`{change.restore}` restores it" if change.restore else "no command restores it"


def breach_documents(breaches: Sequence[GuardBreached]) -> list[dict[str, object]]:
    """Every change the guard found, in order, as `status --json` and `report --json`
    give them (cli.md): what, the command that restores it, and whom it was blamed on."""
    return [
        {
            "kind": change.kind,
            "name": change.name,
            "was": change.was,
            "now": change.now,
            "sentence": change.sentence(),
            "restore": change.restore,
            "found": breach.moment,
            "suspects": list(breach.subtask_ids),
        }
        for breach in breaches
        for change in breach.changes
    ]


def breach_lines(documents: Sequence[Mapping[str, object]]) -> list[str]:
    """The same as Markdown list items, each with its restoring command."""
    return [
        f"- {markdown_text(str(item['sentence']))}: {markdown_code(str(item['restore']))}"
        if item["restore"]
        else f"- {markdown_text(str(item['sentence']))}"
        for item in documents
    ]


#: What `status`, `report` and the HTML page say under the list of changes.
NOTHING_RESTORED = (
    "kairo-orch restores nothing itself: each command puts one change back. "
    + IF_IT_WAS_YOU[0].upper()
    + IF_IT_WAS_YOU[1:]
    + "."
)
