"""Git between hosts (`placement: workers`): the remote every host reaches, which carries
subtask branches from workers to the owner and the integration branch from the owner to
workers (docs/operations.md, "Workers on several machines").

Fetches and pushes go through `invocation.open_transport`, to a URL kairo-orch was given,
never by a remote's name: neither the repository's configuration (an agent's
`remote.x.uploadpack`, `credential.<url>.helper`) nor its hooks (`pre-push`) run."""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import StepFailed, UsageError
from orchestrator.git.invocation import first_line, git, git_sync, open_transport
from orchestrator.git.refs import branch_ref, read_refs


def remote_url(repo: Path, remote: str) -> str:
    """The URL of `remote` as `repo` names it (a URL is its own)."""
    if "/" in remote or ":" in remote:
        return remote
    found = git_sync("remote", "get-url", remote, cwd=repo, check=False)
    if found.returncode != 0:
        raise UsageError(
            f"placement: workers needs the remote every host reaches; {repo} has no remote"
            f" {remote!r} (review.push names it)"
        )
    return found.stdout.strip()


async def fetch_branch(repo: Path, url: str, branch: str) -> str:
    """The remote's `branch` fetched into `repo`'s branch of that name; its head. Refused,
    as git refuses it, where that branch is checked out."""
    ref = branch_ref(branch)
    here = (await read_refs(repo, (ref,))).get(ref)
    if here is not None and here.worktree is not None:
        raise StepFailed(f"refusing to fetch into branch {ref!r} checked out at {here.worktree}")
    head = await _fetch(repo, url, ref)
    await git("update-ref", "-m", "kairo-orch: fetch", ref, head, cwd=repo)
    return head


async def _fetch(repo: Path, url: str, ref: str) -> str:
    """The remote's `ref`, its objects fetched into `repo`: its head (no ref written)."""
    async with open_transport(repo) as transport:
        await transport.git("fetch", "-q", "--no-tags", url, ref)
        fetched = transport.fetched()
    if fetched is None:
        raise StepFailed(f"fetching {ref} from {url} brought nothing")
    return fetched


async def fetch_branch_if_there(repo: Path, url: str, branch: str) -> str | None:
    """`fetch_branch`, or None when the remote has no such branch."""
    async with open_transport(repo) as transport:
        there = await transport.git("ls-remote", "--heads", url, branch_ref(branch))
    return await fetch_branch(repo, url, branch) if there.stdout.strip() else None


async def fetch_commit(repo: Path, url: str, branch: str, commit: str) -> None:
    """Make `commit` (on the remote's `branch`) reachable in `repo`, unless it is there."""
    known = await git("cat-file", "-e", f"{commit}^{{commit}}", cwd=repo, check=False)
    if known.returncode == 0:
        return
    head = await _fetch(repo, url, branch_ref(branch))
    await git(
        "update-ref", "-m", "kairo-orch: fetch", f"refs/kairo-remote/{branch}", head, cwd=repo
    )
    known = await git("cat-file", "-e", f"{commit}^{{commit}}", cwd=repo, check=False)
    if known.returncode != 0:
        raise StepFailed(f"commit {commit[:12]} is not on {url}'s {branch}: fetched, not found")


async def push_branch(repo: Path, url: str, branch: str) -> None:
    """A subtask's branch to the remote: only the worker its subtask is assigned to
    writes it, so a forced push overwrites nothing of anyone else's."""
    ref = branch_ref(branch)
    head = (await git("rev-parse", "--verify", f"{ref}^{{commit}}", cwd=repo)).stdout.strip()
    async with open_transport(repo) as transport:
        await transport.git("push", "-q", "--force", url, f"{head}:{ref}")


async def push_leased(repo: Path, url: str, branch: str, commit: str, expected: str | None) -> None:
    """`commit` to the remote's `branch`, only if the remote's is still `expected` (the
    head the log records; None: no branch yet). One already at `commit` (pushed by a
    supervisor that died before it could record the merge) is fine."""
    ref = branch_ref(branch)
    lease = f"--force-with-lease={ref}:{expected or ''}"
    async with open_transport(repo) as transport:
        pushed = await transport.git("push", "-q", lease, url, f"{commit}:{ref}", check=False)
        if pushed.returncode == 0:
            return
        there = await transport.git("ls-remote", url, ref, check=False)
    if there.returncode == 0 and there.stdout.split()[:1] == [commit]:
        return
    raise StepFailed(
        f"the remote's {branch} moved on from {(expected or 'nothing')[:12]}: {first_line(pushed)}"
    )
