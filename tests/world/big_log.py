"""The log of a long run of many agents, synthesized in process (no agent runs): for the
HTML report of a thousand subtasks, its test and its benchmark.

Subtasks take `max_parallel` places in plan order, each agent busy for a seeded random
while; some are sent back once, some fail, some conflict, every 64th depends on the one
before. Merges go in plan order, as kairo-orch's do. Times are what the store would have
written; the events are the real models, folded by the real fold.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from dataclasses import dataclass, field

from orchestrator.core import events as ev
from orchestrator.core.plan import AgentSpec, ResolvedPlan, ResolvedSubtask
from orchestrator.core.reasons import Reason, ReasonCode
from orchestrator.core.state import ExecutionState, fold
from orchestrator.core.timeline import LoggedEvent

EXECUTION_ID = "01JBIGLOG0000000000000000X"
T0 = 1_796_000_000.0
TAIL = "".join(f"tests/test_mod{j}.py::test_case PASSED\n" for j in range(12))


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


@dataclass
class _Log:
    timed: list[tuple[float, int, ev.ExecutionEvent]] = field(default_factory=list)

    def add(self, at: float, event: ev.ExecutionEvent) -> None:
        self.timed.append((at, len(self.timed), event))


def big_plan(n: int, *, max_parallel: int) -> ResolvedPlan:
    subtasks = [
        ResolvedSubtask(
            id=f"s{i:04d}",
            title=f"refactor module {i}",
            prompt="",
            depends_on=(f"s{i - 1:04d}",) if i % 64 == 63 else (),
            agent=AgentSpec(kind="shell", run="true"),
            verify="pytest -q",
            limits={"max_attempts": 2, "token_budget": 250_000},
        )
        for i in range(n)
    ]
    return ResolvedPlan.model_validate(
        {
            "name": "big-refactor",
            "max_parallel": max_parallel,
            "subtasks": subtasks,
            "execution_limits": {"token_budget": 200_000 * n},
        }
    )


def big_execution(
    n: int = 1024, *, max_parallel: int = 32, seed: int = 7
) -> tuple[ExecutionState, list[LoggedEvent]]:
    rng = random.Random(seed)
    plan = big_plan(n, max_parallel=max_parallel)
    log = _Log()
    base = _sha("base")
    log.add(T0, _created(plan, base))
    log.add(T0 + 0.1, ev.SupervisorStarted(pid=4242, host="ci", at=T0 + 0.1))
    log.add(T0 + 0.12, ev.IntegrationBranchCreated(branch="kairo/big/x", commit=base))
    places = [T0 + 0.2] * max_parallel
    merged_at: dict[str, float] = {}
    last_merge = T0
    for index, spec in enumerate(plan.subtasks):
        sid = spec.id
        ready = max((merged_at.get(d, T0) for d in spec.depends_on), default=T0)
        at = max(heapq.heappop(places), ready)
        log.add(at, ev.SubtaskScheduled(subtask_id=sid, start_commit=base))
        at += 0.3
        log.add(
            at,
            ev.WorkspaceCreated(subtask_id=sid, path=f"/w/{sid}", branch=f"k/{sid}", commit=base),
        )
        retried, failing = index % 50 == 7, index % 97 == 5
        accepted_at = None
        for attempt in (1, 2) if retried or failing else (1,):
            at = _attempt(log, rng, sid, attempt, at, base)
            passes = not failing and not (retried and attempt == 1)
            log.add(
                at + 1.5,
                ev.VerifyFinished(
                    subtask_id=sid,
                    attempt=attempt,
                    exit_code=0 if passes else 1,
                    output_tail="" if passes else TAIL + "FAILED tests/test_x.py\n",
                ),
            )
            at += 1.51
            reason = (
                None
                if passes
                else Reason(
                    code=ReasonCode.VERIFY_FAILED, detail="`pytest -q` exited with status 1"
                )
            )
            final = passes or attempt == 2
            log.add(
                at,
                ev.AttemptJudged(
                    subtask_id=sid, attempt=attempt, accepted=passes, reason=reason, final=final
                ),
            )
            if passes:
                accepted_at = at
        heapq.heappush(places, at)
        if accepted_at is None:
            continue
        last_merge = max(accepted_at, last_merge) + 0.3
        head = _sha(f"{sid} head")
        if index % 113 == 3:
            conflict = ev.Conflict(
                path=f"src/shared{index % 7}.py",
                kind="content",
                with_=(f"s{index - 1:04d}",),
                message="CONFLICT (content)",
            )
            log.add(
                last_merge,
                ev.SubtaskConflicted(subtask_id=sid, head_commit=head, conflicts=(conflict,)),
            )
            continue
        log.add(
            last_merge,
            ev.SubtaskMerged(
                subtask_id=sid,
                merge_commit=_sha(f"{sid} merge"),
                previous_commit=base,
                head_commit=head,
                changed_paths=(f"src/mod{index}.py",),
                diffstat="1 file changed, 12 insertions(+), 4 deletions(-)",
                insertions=12,
                deletions=4,
            ),
        )
        merged_at[sid] = last_merge
        log.add(last_merge + 0.2, ev.WorkspaceReleased(subtask_id=sid))
    end = max(at for at, _, _ in log.timed) + 0.5
    log.add(end, ev.ExecutionEnded(status="FAILED"))
    ordered = sorted(log.timed, key=lambda item: (item[0], item[1]))
    logged = [LoggedEvent(seq, at, event) for seq, (at, _, event) in enumerate(ordered)]
    return fold(EXECUTION_ID, (item.event for item in logged)), logged


def _attempt(log: _Log, rng: random.Random, sid: str, attempt: int, at: float, base: str) -> float:
    log.add(
        at + 0.01,
        ev.AttemptStarted(
            subtask_id=sid,
            attempt=attempt,
            idempotency_key=_sha(f"{sid}{attempt}")[:32],
            run_dir=f"/runs/{sid}/{attempt}",
            start_commit=base,
        ),
    )
    log.add(
        at + 0.05,
        ev.AttemptPaneOpened(subtask_id=sid, attempt=attempt, pane_id=f"%{attempt}", at=at + 0.05),
    )
    at += 0.05 + rng.uniform(20, 240)
    tokens = rng.randint(5_000, 200_000)
    log.add(
        at,
        ev.AttemptExited(
            subtask_id=sid,
            attempt=attempt,
            exit_code=0,
            output_tail=TAIL,
            tokens=tokens,
            input_tokens=tokens * 9 // 10,
            output_tokens=tokens - tokens * 9 // 10,
            cost_usd=round(tokens * 3e-6, 6),
        ),
    )
    at += 0.2
    log.add(
        at,
        ev.AttemptCommitted(
            subtask_id=sid,
            attempt=attempt,
            head_commit=_sha(f"{sid}{attempt}"),
            changed=True,
            files_changed=1,
        ),
    )
    return at


def _created(plan: ResolvedPlan, base: str) -> ev.ExecutionCreated:
    return ev.ExecutionCreated(
        plan=plan,
        plan_path="/r/plan.yaml",
        repo_root="/r",
        git_common_dir="/r/.git",
        base_commit=base,
        integration_branch="kairo/big/x",
        tmux_socket=None,
        tmux_session="kairo-big",
        worktree_root="/w",
        run_root="/runs",
    )
