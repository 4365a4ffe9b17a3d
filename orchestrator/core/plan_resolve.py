"""The rules between a plan's keys, and the ResolvedPlan they allow.

`plan_file` has checked each key's shape; here we check what no single key can say (ids
unique after split expansion, dependencies known and acyclic, an agent each subtask can
run), expand `split`, resolve ownership globs against the tracked files, and merge every
subtask's overrides over the plan's defaults.
"""

from __future__ import annotations

import difflib
import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wcmatch import glob

from orchestrator.core.dag import find_cycle
from orchestrator.core.ids import ID_PATTERN
from orchestrator.core.os_strings import as_bytes
from orchestrator.core.plan import (
    MAX_HANDED_BYTES,
    MAX_SUBTASKS,
    AgentSpec,
    ExecutionLimits,
    Limits,
    NetworkSpec,
    ResolvedPlan,
    ResolvedSubtask,
    ReviewSpec,
    SandboxSpec,
    WorktreeSetup,
)
from orchestrator.core.plan_agent import fields_set, resolve_agent
from orchestrator.core.plan_errors import Problem, Problems, format_problem
from orchestrator.core.plan_yaml import Path

#: The plan's keys that a ResolvedPlan holds as written.
_AS_WRITTEN = (
    *("name", "base", "integration_branch", "max_parallel", "merge_order", "placement"),
    *("worktree_root", "integration_verify", "integration_batch"),
)

if TYPE_CHECKING:
    from orchestrator.core.plan_raw import RawAgent, RawPlan, RawSandbox, RawSubtask, RawWorktree

# `**` spans directories, `{a,b}` alternates, `*` matches leading-dot names as git's
# pathspecs do (owning `src/auth/**` should own `src/auth/.env.example`), `!glob` excludes.
GLOB_FLAGS = glob.GLOBSTAR | glob.BRACE | glob.DOTMATCH | glob.NEGATE


@dataclass(frozen=True)
class _Part:
    """One concrete subtask an entry of `subtasks:` becomes (a split entry: several)."""

    id: str
    files: tuple[str, ...]
    where: Path  # the key that gave it its files, where overlap warnings point
    number: int = 0  # 1-based part of a split; 0 for an entry that is not split
    total: int = 0


def matching(patterns: Sequence[str], tracked: Sequence[str]) -> list[str]:
    """The tracked paths (already sorted) that `patterns` select."""
    matcher = glob.compile(list(patterns), flags=GLOB_FLAGS)
    return [path for path in tracked if matcher.match(path)]


def chunk(paths: Sequence[str], max_files: int, by: str) -> list[tuple[str, ...]]:
    """Sorted `paths` in groups of at most `max_files`: in path order (`count`), or per
    parent directory, directories in sorted order (`directory`).
    """
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(posixpath.dirname(path) if by == "directory" else "", []).append(path)
    return [
        tuple(group[start : start + max_files])
        for _, group in sorted(groups.items())
        for start in range(0, len(group), max_files)
    ]


def _worktree_setup(raw: RawWorktree | None) -> WorktreeSetup:
    if raw is None:
        return WorktreeSetup()
    return WorktreeSetup(
        copy_files=tuple(raw.copy_files), setup=raw.setup, port_base=raw.port_base, ports=raw.ports
    )


def _sandbox(raw: RawSandbox | None) -> SandboxSpec:
    if raw is None:
        return SandboxSpec(kind="auto")
    return SandboxSpec(
        kind=raw.kind or "auto",
        network=NetworkSpec(**raw.network.model_dump()),
        writable=tuple(raw.writable),
        pass_env=tuple(raw.pass_env),
    )


class Resolver:
    """One plan's cross-key checks and resolution; `problems` collects what is wrong."""

    def __init__(
        self,
        problems: Problems,
        head: RawPlan | None,
        subtasks: Sequence[RawSubtask | None],
        raw_ids: Sequence[str | None],
        default_agent: RawAgent | None,
        agent_known: bool,
        tracked_files: Sequence[str] | None,
    ) -> None:
        self.problems = problems
        self.doc = problems.doc
        self.head = head
        self.subtasks = subtasks
        self.raw_ids = raw_ids
        self.default_agent = default_agent
        self.agent_known = agent_known  # False: the plan's agent is itself broken
        self.tracked = sorted(set(tracked_files)) if tracked_files is not None else None
        self.parts: dict[int, list[_Part]] = {}
        self.owner: dict[str, int] = {}  # every id depends_on may name -> its entry

    def resolve(self) -> tuple[ResolvedPlan, tuple[str, ...]]:
        """The plan and its warnings; PlanError (every problem found) if there is none."""
        valid = [(i, sub) for i, sub in enumerate(self.subtasks) if sub is not None]
        for i, sub in valid:
            self.parts[i] = self._expand(i, sub)
        expanded = sum(len(parts) for parts in self.parts.values())
        if expanded > MAX_SUBTASKS:
            self.problems.at_key(
                ("subtasks",),
                f"the plan's splits make {expanded:,} subtasks; at most {MAX_SUBTASKS:,}",
            )
            self.problems.raise_if_any()
        self._register_ids()
        self._check_dependencies(valid)
        for i, sub in valid:
            self._check_sizes(i, sub)
        agents = {
            i: resolve_agent(i, sub, self.default_agent, self.problems)
            if self.agent_known
            else None
            for i, sub in valid
        }
        self.problems.raise_if_any()
        head = self.head
        assert head is not None  # an invalid head has problems, raised above
        subtasks: list[ResolvedSubtask] = []
        for i, sub in valid:
            agent = agents[i]
            assert agent is not None  # likewise
            subtasks.extend(self._resolved(head, sub, agent, self.parts[i]))
        run_limits = fields_set(head.execution_limits)
        plan = ResolvedPlan(
            **{key: getattr(head, key) for key in _AS_WRITTEN},
            worktree=_worktree_setup(head.worktree),
            sandbox=_sandbox(head.sandbox),
            review=ReviewSpec(**fields_set(head.review)),
            execution_limits=ExecutionLimits(
                timeout_s=run_limits.get("timeout"), token_budget=run_limits.get("token_budget")
            ),
            subtasks=tuple(subtasks),
        )
        unbounded = sorted(
            {
                self.owner[spec.id]  # the entry it came from
                for spec in plan.subtasks
                if spec.agent.kind == "codex" and spec.limits.timeout_s is None
            }
            if plan.execution_limits.timeout_s is None  # which ends running attempts too
            else ()
        )
        return plan, self._warnings(valid, unbounded)

    def _resolved(
        self, head: RawPlan, sub: RawSubtask, agent: AgentSpec, parts: list[_Part]
    ) -> Iterator[ResolvedSubtask]:
        limits = {**fields_set(head.limits), **fields_set(sub.limits)}
        for part in parts:
            title = sub.title or part.id
            if part.total and sub.title:
                title = f"{sub.title} ({part.number}/{part.total})"
            yield ResolvedSubtask(
                id=part.id,
                title=title,
                prompt=sub.prompt,  # `{files}` stays: the runtime expands it per attempt
                depends_on=self._concrete(sub.depends_on),
                files=part.files,
                allow_empty=sub.allow_empty,
                agent=agent,
                verify=sub.verify if "verify" in sub.model_fields_set else head.verify,
                limits=Limits(
                    timeout_s=limits.get("timeout"),
                    max_attempts=limits.get("max_attempts", 3),
                    token_budget=limits.get("token_budget"),
                ),
                split_of=sub.id if part.total else None,
                resolve_attempts=head.resolve_attempts(sub),
            )

    def _check_sizes(self, i: int, sub: RawSubtask) -> None:
        """What an agent is handed in its environment and on its command line must fit
        there: exec refuses any one string over 128 KiB, and feedback is added to it."""
        for part in self.parts.get(i, ()):
            # Bytes as exec counts them: a file name that is not UTF-8 is its own bytes.
            listed = len(as_bytes("\n".join(part.files)))
            prompt = len(as_bytes(sub.prompt.replace("{files}", " ".join(part.files))))
            for what, size, key in (("prompt", prompt, "prompt"), ("file list", listed, "files")):
                if size > MAX_HANDED_BYTES:
                    self.problems.at_key(
                        ("subtasks", i, key if key in sub.model_fields_set else "id"),
                        f"subtask '{part.id}': its {what} is {size // 1024} KiB; an agent is "
                        f"handed at most {MAX_HANDED_BYTES // 1024} KiB of it (in a variable "
                        "and on its command line): point it at a file of the repository, or "
                        "split the subtask",
                    )
                    return

    def _expand(self, i: int, sub: RawSubtask) -> list[_Part]:
        at: Path = ("subtasks", i)
        if sub.split is None:
            owned: list[str] = []
            if sub.files is not None and self.tracked is not None:
                owned = matching(sub.files, self.tracked)
            return [_Part(sub.id, tuple(owned), (*at, "files"))]
        prefix = f"subtask '{sub.id}': "
        if sub.files is not None:
            self.problems.at_key(
                (*at, "files"),
                f"{prefix}files and split cannot both be given: a split owns the files it "
                "matches, so leave files out",
            )
            return []
        if self.tracked is None:
            self.problems.at_key(
                (*at, "split"), f"{prefix}split needs a git repository to list files"
            )
            return []
        split = sub.split
        missing = False
        for k, pattern in enumerate(split.files):
            if not pattern.startswith("!") and not matching([pattern], self.tracked):
                self.problems.at_value(
                    (*at, "split", "files", k),
                    f"{prefix}split glob '{pattern}' matches no tracked file",
                )
                missing = True
        selected = [] if missing else matching(split.files, self.tracked)
        if not missing and not selected:
            self.problems.at_key((*at, "split"), f"{prefix}split's '!' globs exclude every file")
        chunks = chunk(selected, split.max_files, split.by)
        return [
            _Part(f"{sub.id}-{n}", owned, (*at, "split"), n, len(chunks))
            for n, owned in enumerate(chunks, start=1)
        ]

    def _line_of(self, i: int, an_id: str) -> int:
        written = ("subtasks", i, "id") if self.raw_ids[i] == an_id else ("subtasks", i, "split")
        return self.doc.value_at(written).line

    def _register_ids(self) -> None:
        repeated: set[int] = set()
        for i, raw_id in enumerate(self.raw_ids):
            if raw_id is None:
                continue
            if raw_id in self.owner:
                repeated.add(i)
                if self.subtasks[i] is not None:  # else its id's own problem is reported
                    first = self._line_of(self.owner[raw_id], raw_id)
                    self.problems.at_value(
                        ("subtasks", i, "id"),
                        f"subtask id '{raw_id}' is already used at line {first}",
                    )
                continue
            self.owner[raw_id] = i
        for i, parts in self.parts.items():
            if i in repeated or not parts or parts[0].total == 0:
                continue
            at: Path = ("subtasks", i, "split")
            if ID_PATTERN.fullmatch(parts[-1].id) is None:
                self.problems.at_key(
                    at,
                    f"subtask '{self.raw_ids[i]}': split would make ids like '{parts[-1].id}', "
                    "longer than 63 characters; shorten the id",
                )
            for part in parts:
                if part.id in self.owner:
                    first = self._line_of(self.owner[part.id], part.id)
                    self.problems.at_key(
                        at,
                        f"subtask '{self.raw_ids[i]}': split makes subtask '{part.id}', "
                        f"but that id is already used at line {first}",
                    )
                else:
                    self.owner[part.id] = i

    def _check_dependencies(self, valid: list[tuple[int, RawSubtask]]) -> None:
        # The graph is over entries of `subtasks:`: every part of a split shares the entry's
        # dependencies, so entries have a cycle exactly when the expanded subtasks do, and
        # the cycle reads in the names the user wrote.
        graph: dict[str, list[str]] = {
            sub.id: [] for i, sub in valid if self.owner.get(sub.id) == i
        }
        for i, subject, depends_on in self._declared_dependencies(valid):
            for j, dep in enumerate(depends_on):
                at: Path = ("subtasks", i, "depends_on", j)
                target = self.owner.get(dep)
                if target == i:
                    self.problems.at_value(at, f"subtask '{subject}' depends on itself")
                elif target is None:
                    close = difflib.get_close_matches(dep, list(self.owner), n=1)
                    hint = f" (did you mean '{close[0]}'?)" if close else ""
                    self.problems.at_value(
                        at, f"subtask '{subject}' depends on unknown subtask '{dep}'{hint}"
                    )
                elif (
                    subject in graph
                    and self.owner.get(subject) == i
                    and self.raw_ids[target] in graph
                ):
                    # (an entry whose id another took first is reported as that, and adds
                    # no edge: its own would be that other's)
                    graph[subject].append(str(self.raw_ids[target]))
        while (cycle := find_cycle(graph)) is not None:
            ring = cycle[:-1]
            # Start at the member written first, so one plan always words its cycle alike.
            start = min(range(len(ring)), key=lambda k: self.owner[ring[k]])
            ring = ring[start:] + ring[:start]
            first, after = self.owner[ring[0]], self.owner[ring[1]]
            entry = self.subtasks[first]
            assert entry is not None
            j = next(j for j, d in enumerate(entry.depends_on) if self.owner.get(d) == after)
            self.problems.at_value(
                ("subtasks", first, "depends_on", j),
                f"dependency cycle: {' -> '.join([*ring, ring[0]])}",
            )
            for member in ring:  # go on looking for cycles elsewhere, each reported once
                del graph[member]

    def _declared_dependencies(
        self, valid: list[tuple[int, RawSubtask]]
    ) -> Iterator[tuple[int, str, list[str]]]:
        """Each entry with an id: its index, its id and the ids its `depends_on` names. An
        entry with another problem (a bad `timeout`, say) is read from the file, so that
        its unknown dependencies are reported in the same round, not once it is fixed."""
        checked = dict(valid)
        items = self.doc.data.get("subtasks") if isinstance(self.doc.data, dict) else None
        for i, raw_id in enumerate(self.raw_ids):
            sub = checked.get(i)
            if sub is not None:
                yield i, sub.id, list(sub.depends_on)
            elif raw_id is not None and isinstance(items, list) and isinstance(items[i], dict):
                raw = items[i].get("depends_on")
                named = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
                yield i, raw_id, [dep for dep in named if isinstance(dep, str)]

    def _concrete(self, depends_on: Sequence[str]) -> tuple[str, ...]:
        """Dependencies as concrete ids: naming a split entry names all of its parts."""
        ids: dict[str, None] = {}
        for dep in depends_on:
            parts = self.parts.get(self.owner[dep], [])
            named_entry = dep == self.raw_ids[self.owner[dep]]
            for part_id in [p.id for p in parts] if named_entry else [dep]:
                ids[part_id] = None
        return tuple(ids)

    def _warnings(
        self, valid: list[tuple[int, RawSubtask]], unbounded: list[int]
    ) -> tuple[str, ...]:
        """Overlapping files, and codex agents no timeout bounds (`unbounded` entries)."""
        found = [Problem(pos, message) for pos, message in self.doc.warnings]
        if unbounded:
            more = f" (and {len(unbounded) - 1} more)" if len(unbounded) > 1 else ""
            found.append(
                Problem(
                    self.doc.key_at(("subtasks", unbounded[0], "id")),
                    f"subtask '{self.raw_ids[unbounded[0]]}'{more} runs codex with no "
                    "limits.timeout: codex retries a lost connection for ever, so give it "
                    "one (say 30m)",
                )
            )
        parts = [part for i, _ in valid for part in self.parts[i]]
        owners: dict[str, list[int]] = {}
        for index, part in enumerate(parts):
            for path in part.files:
                owners.setdefault(path, []).append(index)
        shared: dict[tuple[int, int], list[str]] = {}
        for path in sorted(owners):
            holders = owners[path]
            for k, a in enumerate(holders):
                for b in holders[k + 1 :]:
                    shared.setdefault((a, b), []).append(path)
        for (a, b), paths in shared.items():
            more = f" (and {len(paths) - 1} more)" if len(paths) > 1 else ""
            message = f"subtasks '{parts[a].id}' and '{parts[b].id}' both own {paths[0]}{more}"
            found.append(Problem(self.doc.key_at(parts[b].where), message))
        filename = self.problems.filename
        return tuple(format_problem(filename, problem) for problem in sorted(found))
