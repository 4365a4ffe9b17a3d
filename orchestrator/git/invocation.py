"""How every git command of kairo-orch runs: against git directories it names itself, with
nothing a repository or an agent wrote able to choose a program for it to run.

An agent is untrusted code with a shell (docs/security.md), and everything git reads from a
repository is writable by it: the config (and the files it includes), attributes, hooks, a
worktree's `.git` file, its `commondir`. A setting of a fixed name (`core.fsmonitor`,
`core.hooksPath`, `gpg.program`) can be overridden on the command line; but filters, merge
drivers and diff drivers are settings of any name (`filter.<x>.clean`), chosen by
attributes of any file, so no list of overrides covers them. Hence two ways to run git:

- `git()`: the commands that read and write refs and objects (rev-parse, update-ref,
  for-each-ref, commit-tree, worktree add --no-checkout...), against the repository's own
  git directories, every setting that names a program fixed (`_FIXED_SETTINGS`). The
  commands that read a work tree, apply attributes, merge or reach another repository are
  refused there (`_ISOLATED_ONLY`): a programming error, not a user's.
- `git_isolated()`: those commands, in a git directory of kairo-orch's own
  (`kairo_dir.isolated_git`) that borrows the repository's objects (`GIT_OBJECT_DIRECTORY`)
  and reads no configuration but the few harmless settings copied from the repository's
  (`_CARRIED_SETTINGS`: line endings, file modes, renames): a filter, driver or hook no
  configuration defines cannot run. It has no refs: it is given object ids, work trees
  and index files by name.

Every command names its directories (`GIT_DIR`, `GIT_COMMON_DIR`, `GIT_WORK_TREE`): the
common directory is one the user named (`trust_repository`, which `discover_repo` calls),
and a linked worktree's own directory is taken from its `.git` file only where it lies
directly under that common directory's `worktrees/` and git's record there points back at
the worktree. A `.git` file or `commondir` rewritten to name another git directory (with a
config of its own) is refused, never followed.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from orchestrator import kairo_dir
from orchestrator.errors import EnvironmentProblem, KairoError, StepFailed

# Variables that point git at some other repository, index or object store, or hand it
# configuration: a supervisor started from inside a git hook (or a shell that exported
# GIT_DIR) would otherwise run every command against the wrong repository.
_LOCATING_VARIABLES = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_EXTERNAL_DIFF",
        "GIT_REPLACE_REF_BASE",
    }
)

# Every setting of a fixed name that makes git run a program, reach the network, or do
# more than it was asked (a `gc --auto` pruning beside us), overridden on every command
# line, where it wins over any file's. Those of any name (filters, drivers) are why
# `git_isolated` exists.
_FIXED_SETTINGS: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("core.alternateRefsCommand", ""),
    ("core.gitProxy", ""),
    ("diff.external", ""),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("merge.verifySignatures", "false"),
    ("merge.renormalize", "false"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("protocol.ext.allow", "never"),
)

# What a command that reaches no other repository adds: no transport at all (a partial
# clone's lazy fetch would run the remote's upload-pack), no credential helper.
_NO_TRANSPORT: tuple[tuple[str, str], ...] = (
    ("protocol.allow", "never"),
    ("credential.helper", ""),
)

# Commands `git()` refuses: they read a work tree or apply attributes (clean and smudge
# filters, text conversion), merge (merge drivers), show diffs of blobs (diff drivers'
# textconv), or reach another repository (transport settings, credential helpers).
_ISOLATED_ONLY = frozenset(
    {
        "add", "am", "apply", "archive", "blame", "checkout", "checkout-index", "cherry-pick",
        "clean", "clone", "commit", "diff", "diff-files", "diff-index", "difftool", "fetch",
        "format-patch", "grep", "hash-object", "log", "ls-remote", "merge", "merge-file",
        "merge-tree", "mergetool", "mv", "pull", "push", "read-tree", "rebase", "reset",
        "restore", "revert", "rm", "show", "stash", "status", "submodule", "switch",
        "update-index",
    }
)  # fmt: skip

# Settings copied from the repository's configuration into the isolated one: they change
# what a work tree's files are as objects (line endings, modes, case), or how a merge
# pairs renames, and none names a program.
_CARRIED_SETTINGS = frozenset(
    {
        "core.autocrlf", "core.eol", "core.safecrlf", "core.filemode", "core.symlinks",
        "core.ignorecase", "core.precomposeunicode", "core.protecthfs", "core.protectntfs",
        "core.checkroundtripencoding", "core.bigfilethreshold", "core.compression",
        "core.loosecompression", "core.excludesfile", "core.attributesfile",
        "merge.renames", "merge.directoryrenames", "merge.renamelimit",
        "merge.conflictstyle", "diff.renames", "diff.renamelimit", "diff.algorithm",
    }
)  # fmt: skip


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class GitDirs:
    """The git directories a command runs against, named explicitly."""

    common: Path
    #: The common directory itself for a main worktree (or none), else its own under
    #: `<common>/worktrees/`.
    git_dir: Path
    work_tree: Path | None


class UntrustedGitDirectory(StepFailed):
    """A directory whose git metadata names a git directory that is not the repository's
    own: rewritten, most likely by an agent, to have our git read another's config."""


# The repositories the user named: toplevel -> its directories, and their common dirs.
_TRUSTED: dict[Path, GitDirs] = {}
_TRUSTED_COMMON: set[Path] = set()
_LOCK = threading.Lock()


def trust_repository(toplevel: Path | None, git_dir: Path, common: Path) -> None:
    """Record a repository the user named (their checkout, or a clone kairo-orch made), so
    that git commands may run in it and in its linked worktrees."""
    common = common.resolve()
    with _LOCK:
        _TRUSTED_COMMON.add(common)
        if toplevel is not None:
            _TRUSTED[toplevel.resolve()] = GitDirs(common, git_dir.resolve(), toplevel.resolve())


def locate(cwd: Path) -> GitDirs:
    """The git directories a command run in `cwd` must use: those of a trusted checkout
    that holds `cwd`, of a trusted common directory `cwd` is, or of a linked worktree of a
    trusted repository. `UntrustedGitDirectory` for anything else."""
    here = Path(os.path.realpath(cwd))
    for folder in (here, *here.parents):
        found = _TRUSTED.get(folder)
        if found is not None:
            return found
        if folder in _TRUSTED_COMMON:
            return GitDirs(folder, folder, None)
        dot_git = folder / ".git"
        if dot_git.is_file():
            return _linked_worktree(folder, dot_git)
        if dot_git.exists():
            break
    raise UntrustedGitDirectory(
        f"{cwd} is in no repository kairo-orch was given: its git directory is not the one "
        "it was started with"
    )


def common_of(cwd: Path) -> Path:
    """The common git directory of the repository `cwd` is in (`locate`)."""
    return locate(cwd).common


def _linked_worktree(top: Path, dot_git: Path) -> GitDirs:
    try:
        pointer = dot_git.read_bytes()[:4096]
    except OSError as error:
        raise StepFailed(f"cannot read {dot_git}: {error.strerror}") from None
    named = pointer.removeprefix(b"gitdir: ").rstrip(b"\r\n")
    own = Path(os.path.realpath(top / os.fsdecode(named)))
    common = own.parent.parent
    record = own / "gitdir"
    try:
        recorded = Path(os.path.realpath(os.fsdecode(record.read_bytes().rstrip(b"\r\n"))))
    except OSError:
        recorded = None
    if (
        not pointer.startswith(b"gitdir: ")
        or own.parent.name != "worktrees"
        or common not in _TRUSTED_COMMON
        or recorded != Path(os.path.realpath(dot_git))
    ):
        raise UntrustedGitDirectory(
            f"the .git file of the worktree {top} names {os.fsdecode(named)!r}, which is not "
            "a worktree of the repository kairo-orch runs on: it was changed since git made "
            "it; kairo-orch will not run git there"
        )
    return GitDirs(common, own, top)


def _settings(pairs: Sequence[tuple[str, str]]) -> list[str]:
    return [arg for key, value in pairs for arg in ("-c", f"{key}={value}")]


_FIXED = _settings(_FIXED_SETTINGS)
_FIXED_NO_TRANSPORT = _FIXED + _settings(_NO_TRANSPORT)


def git_environment(overrides: Mapping[str, str] | None) -> dict[str, str]:
    """The environment of every git of ours: the process's own, less what would point git
    elsewhere, untranslated (messages are parsed) and never prompting."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _LOCATING_VARIABLES and not k.startswith("GIT_CONFIG")
    }
    env.update(
        LC_ALL="C",
        LANGUAGE="C",
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        GIT_EDITOR=":",
        # refs/replace/ would let a planted ref swap any object for another in our reads.
        GIT_NO_REPLACE_OBJECTS="1",
    )
    if overrides:
        env.update(overrides)
    return env


def hardened_settings_env() -> dict[str, str]:
    """`_FIXED_SETTINGS` as environment variables (`GIT_CONFIG_COUNT`...), for the git that
    a command of the plan's runs (`review.push`, a `gh pr create`): they win over every
    configuration file there too."""
    env = {"GIT_CONFIG_COUNT": str(len(_FIXED_SETTINGS))}
    for i, (key, value) in enumerate(_FIXED_SETTINGS):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _repository_env(dirs: GitDirs, env: Mapping[str, str] | None) -> dict[str, str]:
    named = {"GIT_DIR": str(dirs.git_dir), "GIT_COMMON_DIR": str(dirs.common)}
    if dirs.work_tree is not None:
        named["GIT_WORK_TREE"] = str(dirs.work_tree)
    return git_environment({**named, **(env or {})})


def _subcommand(args: Sequence[str]) -> str:
    rest = list(args)
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-c", "-C") else rest[1:]
    return rest[0] if rest else ""


def _refuse_isolated(args: Sequence[str]) -> None:
    command = _subcommand(args)
    if command in _ISOLATED_ONLY:
        raise ValueError(f"git {command} reads files or attributes: run it with git_isolated()")
    if command == "worktree" and "add" in args and "--no-checkout" not in args:
        raise ValueError("git worktree add checks files out: add with --no-checkout")
    if command == "worktree" and "remove" in args and "--force" not in args:
        raise ValueError("git worktree remove runs `git status` there: remove with --force")


async def git(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    stdin: bytes | None = None,
) -> GitResult:
    """Run `git ARGS` against the repository `cwd` is in (`locate`), for its refs and
    objects; with `check`, a non-zero exit raises `StepFailed`.

    Output is decoded as UTF-8 with `surrogateescape`, so a path that is not valid UTF-8
    still round-trips when it is passed back to git.
    """
    _refuse_isolated(args)
    dirs = locate(cwd)
    return await _run(
        [*_FIXED_NO_TRANSPORT, *args], cwd, _repository_env(dirs, env), stdin, check=check
    )


def git_sync(*args: str, cwd: Path, check: bool = True) -> GitResult:
    """`git()` for code that runs no trio loop: the few queries of a CLI command's start
    (`start` and `validate` read a plan with them), where importing trio would cost more
    than the git processes."""
    _refuse_isolated(args)
    env = _repository_env(locate(cwd), None)
    return _run_sync([*_FIXED_NO_TRANSPORT, *args], cwd, env, check=check)


def git_discovering_sync(*args: str, cwd: Path) -> GitResult:
    """`git rev-parse` (or `git --version`) finding its repository from `cwd` as the user's
    own git would: how the repository the user names is found in the first place."""
    if _subcommand(args) not in ("rev-parse", "") or not args:
        raise ValueError("only rev-parse and --version find their repository themselves")
    return _run_sync([*_FIXED_NO_TRANSPORT, *args], cwd, git_environment(None), check=False)


@dataclass(frozen=True)
class Isolated:
    """Where `git_isolated` runs: kairo-orch's own git directory for a repository, and the
    repository's settings it carries."""

    git_dir: Path
    common: Path
    settings: tuple[str, ...]  # `-c key=value` arguments
    object_format: str | None  # sha256, or None for git's default


_ISOLATIONS: dict[Path, Isolated] = {}


def isolation(common: Path) -> Isolated:
    """The isolated git directory of the repository whose common directory is `common`,
    made (or brought up to date) once a process: what it carries is read then."""
    common = Path(os.path.realpath(common))
    with _LOCK:
        made = _ISOLATIONS.get(common)
    if made is not None:
        return made
    if common not in _TRUSTED_COMMON:
        raise UntrustedGitDirectory(f"{common} is not the git directory of a repository given")
    listed = _run_sync(
        [*_FIXED_NO_TRANSPORT, "config", "--list", "-z"],
        common,
        _repository_env(GitDirs(common, common, None), None),
        check=False,
    )
    values: dict[str, str] = {}
    for entry in listed.stdout.split("\0"):
        key, _, value = entry.partition("\n")
        values[key.lower()] = value
    made = Isolated(
        git_dir=_make_isolated_dir(common, values),
        common=common,
        settings=tuple(
            _settings([(k, v) for k, v in values.items() if k in _CARRIED_SETTINGS and v])
        ),
        object_format=values.get("extensions.objectformat") or None,
    )
    with _LOCK:
        _ISOLATIONS[common] = made
    return made


def _make_isolated_dir(common: Path, values: Mapping[str, str]) -> Path:
    """A git directory of our own: a HEAD, no refs, a config that says only the
    repository's format, and the repository's excludes (so that `add` and `clean` ignore
    what the user's git ignores)."""
    where = kairo_dir.isolated_git(common)
    try:
        excludes = (common / "info" / "exclude").read_bytes()
    except OSError:
        excludes = b""
    _make_git_dir(where, values.get("extensions.objectformat") or None, excludes=excludes)
    return where


def _make_git_dir(where: Path, object_format: str | None, *, excludes: bytes = b"") -> None:
    (where / "refs").mkdir(parents=True, exist_ok=True)
    (where / "info").mkdir(exist_ok=True)
    version = 1 if object_format else 0
    config = f"[core]\n\trepositoryformatversion = {version}\n\tbare = false\n"
    if object_format:
        config += f"[extensions]\n\tobjectformat = {object_format}\n"
    for name, content in (
        ("HEAD", b"ref: refs/heads/kairo-isolated\n"),
        ("config", config.encode()),
        ("info/exclude", excludes),
    ):
        _write_if_changed(where / name, content)


def _write_if_changed(path: Path, content: bytes) -> None:
    try:
        if path.read_bytes() == content:
            return
    except OSError:
        pass
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as staged:
        staged.write(content)
    Path(staged.name).replace(path)  # whole or not at all: another process may read it


def _isolated_env(
    isolated: Isolated,
    *,
    work_tree: Path | None,
    index: Path | None,
    transport: bool,
    env: Mapping[str, str] | None,
) -> dict[str, str]:
    named = {
        "GIT_DIR": str(isolated.git_dir),
        "GIT_OBJECT_DIRECTORY": str(isolated.common / "objects"),
        # None of the index files of the repository: one a command is not given is ours.
        "GIT_INDEX_FILE": str(index if index is not None else isolated.git_dir / "index"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    if not transport:  # the user's own global settings name their credential helpers
        named["GIT_CONFIG_GLOBAL"] = os.devnull
    if (isolated.common / "shallow").exists():
        named["GIT_SHALLOW_FILE"] = str(isolated.common / "shallow")
    if work_tree is not None:
        named["GIT_WORK_TREE"] = str(work_tree)
    return git_environment({**named, **(env or {})})


async def git_isolated(
    *args: str,
    common: Path,
    work_tree: Path | None = None,
    index: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    stdin: bytes | None = None,
    transport: bool = False,
) -> GitResult:
    """Run `git ARGS` isolated from the configuration of the repository whose common
    directory is `common` (module docstring): on its objects, in `work_tree` with `index`
    where given. Revisions are object ids; no ref of the repository is readable.

    `transport` is for `fetch`, `push` and `ls-remote` to a URL: the user's global
    configuration is read then (credential helpers, proxies), never the repository's.
    """
    import trio  # here: `status` and the live view use only the synchronous half

    isolated = await trio.to_thread.run_sync(isolation, common)
    fixed = _FIXED if transport else _FIXED_NO_TRANSPORT
    full_env = _isolated_env(
        isolated, work_tree=work_tree, index=index, transport=transport, env=env
    )
    cwd = work_tree if work_tree is not None else isolated.git_dir
    return await _run([*fixed, *isolated.settings, *args], cwd, full_env, stdin, check=check)


def git_isolated_sync(
    *args: str,
    common: Path,
    work_tree: Path | None = None,
    index: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> GitResult:
    """`git_isolated()` without trio, for a CLI command's start."""
    isolated = isolation(common)
    full_env = _isolated_env(isolated, work_tree=work_tree, index=index, transport=False, env=env)
    cwd = work_tree if work_tree is not None else isolated.git_dir
    return _run_sync([*_FIXED_NO_TRANSPORT, *isolated.settings, *args], cwd, full_env, check=check)


class Transport:
    """`fetch`, `push` and `ls-remote` between the repository and a URL, each in a git
    directory made for it (`open_transport`): the repository's objects, a copy of its refs
    (so that a fetch negotiates from them, and checks what it got against them), the
    user's own global configuration (their credential helpers, proxies), never the
    repository's."""

    def __init__(self, isolated: Isolated, git_dir: Path) -> None:
        self._isolated = Isolated(
            git_dir, isolated.common, isolated.settings, isolated.object_format
        )

    async def git(self, *args: str, check: bool = True) -> GitResult:
        env = _isolated_env(self._isolated, work_tree=None, index=None, transport=True, env=None)
        return await _run(
            [*_FIXED, *self._isolated.settings, *args],
            self._isolated.git_dir,
            env,
            None,
            check=check,
        )

    def fetched(self) -> str | None:
        """The object id of the first ref the last fetch got (its FETCH_HEAD)."""
        try:
            head = (self._isolated.git_dir / "FETCH_HEAD").read_text(encoding="utf-8")
        except OSError:
            return None
        return head.split("\t", 1)[0].strip() or None


@asynccontextmanager
async def open_transport(cwd: Path) -> AsyncIterator[Transport]:
    """A `Transport` for the repository `cwd` is in; its git directory is removed after."""
    import trio

    dirs = locate(cwd)
    isolated = await trio.to_thread.run_sync(isolation, dirs.common)
    refs = await git(
        "for-each-ref", "--format=%(objectname) %(refname)",
        "refs/heads/", "refs/tags/", "refs/kairo-remote/", cwd=cwd,
    )  # fmt: skip
    where = Path(await trio.to_thread.run_sync(_transport_dir, dirs.common))
    try:
        await trio.to_thread.run_sync(_make_git_dir, where, isolated.object_format)
        lines = sorted(refs.stdout.splitlines(), key=lambda line: line.split(" ", 1)[1])
        packed = "# pack-refs with: sorted\n" + "".join(f"{line}\n" for line in lines)
        await trio.Path(where / "packed-refs").write_text(packed, encoding="utf-8")
        yield Transport(isolated, where)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(functools.partial(shutil.rmtree, where, True))


def _transport_dir(common: Path) -> str:
    kairo_dir.kairo_dir(common).mkdir(exist_ok=True)
    return tempfile.mkdtemp(prefix="transport-", dir=kairo_dir.kairo_dir(common))


async def git_clone(url: str, target: Path) -> None:
    """`git clone --no-checkout URL TARGET`: a new repository, whose configuration is the
    clone's own; the user's global one names their credentials."""
    args = [*_FIXED, "clone", "-q", "--no-checkout", "--", url, str(target)]
    await _run(args, target.parent, git_environment(None), None, check=True)


async def _run(
    args: list[str], cwd: Path, env: Mapping[str, str], stdin: bytes | None, *, check: bool
) -> GitResult:
    import trio

    try:
        done = await trio.run_process(
            ["git", *args],
            cwd=cwd,
            env=env,
            # /dev/null rather than an empty pipe: the same end of input, one pipe and one
            # feeding task fewer per process, a few percent of what a git call costs.
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    except FileNotFoundError:
        raise _not_run(args, cwd) from None
    return _result(args, cwd, done.returncode, done.stdout, done.stderr, check=check)


def _run_sync(args: list[str], cwd: Path, env: Mapping[str, str], *, check: bool) -> GitResult:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        raise _not_run(args, cwd) from None
    return _result(args, cwd, done.returncode, done.stdout, done.stderr, check=check)


def _not_run(args: Sequence[str], cwd: Path) -> KairoError:
    if not cwd.is_dir():
        return StepFailed(f"cannot run git {_describe(args)}: {cwd} does not exist")
    return EnvironmentProblem("git is not installed (no `git` on PATH)")


def _result(
    args: Sequence[str], cwd: Path, returncode: int, stdout: bytes, stderr: bytes, *, check: bool
) -> GitResult:
    result = GitResult(
        returncode=returncode,
        stdout=stdout.decode("utf-8", "surrogateescape"),
        stderr=stderr.decode("utf-8", "surrogateescape"),
    )
    if check and result.returncode != 0:
        raise StepFailed(f"git {_describe(args)} failed in {cwd}: {first_line(result)}")
    return result


def _describe(args: Sequence[str]) -> str:
    # Enough of the command to recognise it (our settings left out), without dumping
    # long path lists into logs.
    rest = list(args)
    while rest[:1] == ["-c"]:
        rest = rest[2:]
    shown = " ".join(a for a in rest[:4] if "\n" not in a)
    return shown + (" ..." if len(rest) > 4 else "")


def first_line(result: GitResult | subprocess.CompletedProcess[str]) -> str:
    """git's `fatal:`/`error:` line, the part a user can act on, else its first line.

    Progress lines such as "Preparing worktree (new branch ...)" come first on stderr.
    """
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[0] if lines else f"exit status {result.returncode}"
