"""The misbehaving agents of `make bench-completion`: each a script the scripted model
server plays through the real Claude Code or Codex CLI, on a slot of the project of its
own, with the outcome the gates must reach and the one a plain launcher reaches.

An outcome is the subtask's end state (`merged`, `failed`) and a reason: for a failed
subtask the code it failed with; for a merged one the codes of the attempts the gates sent
back, in order ("" when the first was accepted). A scenario whose later attempts act only
when the feedback says something specific (`first_says`) checks that the feedback does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from tests.completion import moves as m
from tests.completion.project import Slot
from tests.model_server import Reply, Rule, Script, Usage, bash, edit, read

Program = Literal["claude", "codex"]
#: What a behaviour makes the model do on a slot: its rules, and the reply when none applies.
Played = tuple[tuple[Rule, ...], Reply | None]


@dataclass(frozen=True)
class Expected:
    outcome: str  # the subtask's end state
    reason: str  # its failure's code, or the codes of the attempts sent back before a merge
    attempts: int
    correct: bool  # the merged result passes the hidden reference test


@dataclass(frozen=True)
class Scenario:
    name: str  # the subtask's id; no scenario's name starts another's (scripts match by it)
    behaviour: str  # what the agent does, in a few words
    slot: Slot
    script: Callable[[Slot], Played]
    gates: Expected  # with the plan's gates: verify, no_changes, no_progress, 3 attempts
    baseline: Expected  # max_attempts 1, allow_empty, no verify
    program: Program = "claude"
    quick: bool = False  # in `--quick`
    timeout_s: int = 120  # of one attempt
    token_budget: int | None = None
    env: dict[str, str] = field(default_factory=dict)  # the agent program's

    def model_script(self) -> Script:
        rules, default = self.script(self.slot)
        if default is None:
            return Script(*rules, match=f"/{self.name}", name=self.name)
        return Script(*rules, match=f"/{self.name}", name=self.name, default=default)


MERGED_AT_ONCE = Expected("merged", "", 1, correct=True)


def wrong_but_merged() -> Expected:
    """A plain launcher merges whatever the one attempt left."""
    return Expected("merged", "", 1, correct=False)


def _attempt(n: int) -> str:
    return f"This is attempt {n} at the same task"


# --- the behaviours ------------------------------------------------------------------------


def gives_up_then_works(slot: Slot) -> Played:
    first = (Rule(Reply(text=m.NEED_CONTEXT), turn=1),)
    # back to work only when told which file the task names (untouched so far)
    return first + m.rules(m.claude_rename(slot), since=m.FEEDBACK, first_says=slot.module), None


def gives_up_always(slot: Slot) -> Played:
    return (), Reply(text=m.NEED_CONTEXT)


def codex_gives_up_then_works(slot: Slot) -> Played:
    first = (Rule(Reply(text=m.NEED_CONTEXT), turn=1),)
    return first + m.rules(m.codex_rename(slot), since=m.FEEDBACK, first_says=slot.module), None


def cut_once_mid_edit(slot: Slot) -> Played:
    """The edit's reply is cut at max_tokens; Claude Code asks the model to go on by
    itself, and the edit comes whole."""
    steps = m.claude_rename(slot)
    cut = replace(steps[1], stop="max_tokens")
    return m.rules([steps[0], cut, *steps[1:]]), None


def cut_again_and_again(slot: Slot) -> Played:
    """Every reply cut until kairo-orch sends the attempt back asking for smaller edits."""
    after = m.rules(m.claude_rename(slot), since=m.FEEDBACK, first_says="Make smaller edits")
    return (*after, Rule(Reply(text="Here is my long plan", stop="max_tokens"))), None


def reads_for_ever(slot: Slot) -> Played:
    usage = Usage(input_tokens=1500, output_tokens=50)
    return (), Reply(text="Let me look again.", tools=(read(slot.module),), usage=usage)


def greps_for_ever(slot: Slot) -> Played:
    usage = Usage(input_tokens=1500, output_tokens=50)
    return (), Reply(tools=(bash(f"grep -rn {slot.old} shop tests"),), usage=usage)


def breaks_a_test_then_fixes_it(slot: Slot) -> Played:
    first = m.rules([m.read_all(slot), m.rename_def(slot), m.done(slot)])
    # fixes the test only when shown the suite's own words
    shown = f"cannot import name '{slot.old}'"
    fix = [m.rename_in(slot, slot.test), m.run_suite(), m.done(slot)]
    return first + m.rules(fix, since=m.FEEDBACK, first_says=shown), None


def codex_breaks_a_test_then_fixes_it(slot: Slot) -> Played:
    first = m.rules([m.codex_read(slot), m.codex_rename_def(slot), m.done(slot)])
    shown = f"cannot import name '{slot.old}'"
    fix = [m.codex_rename_uses(slot), m.done(slot)]
    return first + m.rules(fix, since=m.FEEDBACK, first_says=shown), None


def does_one_of_two_files(slot: Slot) -> Played:
    test = m.rename_in(slot, slot.test).tools
    module_and_test = Reply(tools=(*m.rename_in(slot, slot.module).tools, *test))
    first = m.rules([m.read_all(slot), module_and_test, m.done(slot)])
    # the second file, once the feedback names it as untouched
    fix = [m.rename_in(slot, slot.cart), m.run_suite(), m.done(slot)]
    return first + m.rules(fix, since=m.FEEDBACK, first_says=f"not changed: {slot.cart}"), None


def leaves_a_todo(slot: Slot) -> Played:
    renamed = slot.define(slot.new)
    todo = renamed.replace("(n):\n", "(n):\n    # TODO: check the callers\n")
    test = m.rename_in(slot, slot.test).tools
    with_todo = Reply(tools=(edit(slot.module, slot.define(slot.old), todo), *test))
    first = m.rules([m.read_all(slot), with_todo, m.done(slot)])
    fix = [Reply(tools=(edit(slot.module, todo, renamed),)), m.run_suite(), m.done(slot)]
    return first + m.rules(fix, since=m.FEEDBACK, first_says="a TODO is left"), None


def spirals(slot: Slot) -> Played:
    """Each fix breaks something else: the definition renamed alone (an import fails),
    then the test fixed and the factor broken, then the factor fixed and the name broken."""
    wrong_factor = slot.define(slot.new, slot.factor + 1)
    first = m.rules([m.read_all(slot), m.rename_def(slot), m.done(slot)])
    test = m.rename_in(slot, slot.test).tools
    second = [
        Reply(tools=(*test, edit(slot.module, slot.define(slot.new), wrong_factor))),
        m.done(slot),
    ]
    third = [
        Reply(tools=(edit(slot.module, wrong_factor, slot.define(f"{slot.new}s")),)),
        m.done(slot),
    ]
    return first + m.rules(second, since=_attempt(2)) + m.rules(third, since=_attempt(3)), None


def fixes_the_wrong_file(slot: Slot) -> Played:
    """Breaks the test's import, then changes something else (the check fails as before),
    then fixes the test once told that the failure names a file it did not change."""
    first = m.rules([m.read_all(slot), m.rename_def(slot), m.done(slot)])
    documented = f'"""Prices."""\n\n\ndef {slot.new}(n):'
    elsewhere = [Reply(tools=(edit(slot.module, f"def {slot.new}(n):", documented),)), m.done(slot)]
    told = f"did not change: {slot.test}"
    fix = [m.rename_in(slot, slot.test), m.run_suite(), m.done(slot)]
    return first + m.rules(elsewhere, since=_attempt(2)) + m.rules(
        fix, since=_attempt(3), first_says=told
    ), None


def repeats_its_edit(slot: Slot) -> Played:
    once = [m.read_all(slot), m.rename_def(slot), m.done(slot)]
    again = [m.rename_def(slot), m.done(slot)]  # the old text is gone: the edit fails
    return m.rules(once) + m.rules(again, since=m.FEEDBACK), None


def codex_repeats_its_edit(slot: Slot) -> Played:
    once = [m.codex_read(slot), m.codex_rename_def(slot), m.done(slot)]
    again = [m.codex_rename_def(slot), m.done(slot)]
    return m.rules(once) + m.rules(again, since=m.FEEDBACK), None


def rate_limited_a_while(slot: Slot) -> Played:
    """Within the program's own retries: it waits, retries and works."""
    storm = Rule(Reply(status=429, retry_after_s=0), times=3)
    return (storm, *m.rules(m.claude_rename(slot))), None


def overloaded_past_its_retries(slot: Slot) -> Played:
    """More 529s than its retries (CLAUDE_CODE_MAX_RETRIES=1): the attempt ends on the
    API's error, the next one works."""
    storm = Rule(Reply(status=529), times=3)
    return (storm, *m.rules(m.claude_rename(slot), since=m.FEEDBACK)), None


def hangs(slot: Slot) -> Played:
    return (Rule(m.read_all(slot), turn=1),), Reply(hang=True)


def codex_hangs(slot: Slot) -> Played:
    return (), Reply(hang=True)


# --- the list ------------------------------------------------------------------------------


def _scenarios() -> list[Scenario]:
    def s(name: str, factor: int, **keys: object) -> Scenario:
        two = bool(keys.pop("two_files", False))
        slot = Slot(name.replace("-", "_"), factor, two_files=two)
        return Scenario(name=name, slot=slot, **keys)  # type: ignore[arg-type]

    failed = Expected
    hang = failed("failed", "timeout", 1, correct=False)
    budget = failed("failed", "token_budget", 1, correct=False)
    return [
        s("gives-up", 2, behaviour="gives up at once, works when sent back",
          script=gives_up_then_works, quick=True,
          gates=Expected("merged", "no_changes", 2, True), baseline=wrong_but_merged()),
        s("codex-gives-up", 3, behaviour="the same, through Codex", program="codex",
          script=codex_gives_up_then_works,
          gates=Expected("merged", "no_changes", 2, True), baseline=wrong_but_merged()),
        s("never-starts", 4, behaviour="gives up at once, every time", script=gives_up_always,
          gates=failed("failed", "no_changes", 2, False), baseline=wrong_but_merged()),
        s("cut-once", 5, behaviour="one reply cut at max_tokens mid-edit",
          script=cut_once_mid_edit, gates=MERGED_AT_ONCE, baseline=MERGED_AT_ONCE),
        s("cut-always", 6, behaviour="every reply cut at max_tokens", script=cut_again_and_again,
          gates=Expected("merged", "agent_failed", 2, True),
          baseline=failed("failed", "max_attempts", 1, False)),
        s("reads-for-ever", 7, behaviour="reads, never edits", script=reads_for_ever,
          quick=True, token_budget=40_000, gates=budget, baseline=budget),
        s("greps-for-ever", 8, behaviour="greps, never edits", script=greps_for_ever,
          token_budget=40_000, gates=budget, baseline=budget),
        s("breaks-a-test", 9, behaviour="breaks a test, fixes it when shown the failure",
          script=breaks_a_test_then_fixes_it, quick=True,
          gates=Expected("merged", "verify_failed", 2, True), baseline=wrong_but_merged()),
        s("codex-breaks", 10, behaviour="the same, through Codex", program="codex",
          script=codex_breaks_a_test_then_fixes_it,
          gates=Expected("merged", "verify_failed", 2, True), baseline=wrong_but_merged()),
        s("half-done", 11, behaviour="says done, did one of two files", two_files=True,
          script=does_one_of_two_files, quick=True,
          gates=Expected("merged", "verify_failed", 2, True), baseline=wrong_but_merged()),
        s("todo-left", 12, behaviour="says done, left a TODO", script=leaves_a_todo,
          gates=Expected("merged", "verify_failed", 2, True), baseline=wrong_but_merged()),
        s("death-spiral", 13, behaviour="every fix breaks something else", script=spirals,
          quick=True, gates=failed("failed", "max_attempts", 3, False),
          baseline=wrong_but_merged()),
        s("wrong-file", 20, behaviour="fixes the wrong file, then the one it is told of",
          script=fixes_the_wrong_file, quick=True,
          gates=Expected("merged", "verify_failed+verify_failed", 3, True),
          baseline=wrong_but_merged()),
        s("repeats-edit", 14, behaviour="repeats the same edit", script=repeats_its_edit,
          quick=True, gates=failed("failed", "no_progress", 2, False),
          baseline=wrong_but_merged()),
        s("codex-repeats", 15, behaviour="the same, through Codex", program="codex",
          script=codex_repeats_its_edit,
          gates=failed("failed", "no_progress", 2, False), baseline=wrong_but_merged()),
        s("rate-limited", 16, behaviour="429 three times, then fine",
          script=rate_limited_a_while, gates=MERGED_AT_ONCE, baseline=MERGED_AT_ONCE),
        s("overloaded", 17, behaviour="529 past its retries, then fine",
          script=overloaded_past_its_retries, quick=True,
          env={"CLAUDE_CODE_MAX_RETRIES": "1"},
          gates=Expected("merged", "agent_failed", 2, True),
          baseline=failed("failed", "max_attempts", 1, False)),
        s("hangs", 18, behaviour="the server never answers", script=hangs, quick=True,
          timeout_s=15, gates=hang, baseline=hang),
        s("codex-hangs", 19, behaviour="the same, through Codex", program="codex",
          script=codex_hangs, timeout_s=15, gates=hang, baseline=hang),
    ]  # fmt: skip


SCENARIOS = _scenarios()
assert not [
    (a.name, b.name) for a in SCENARIOS for b in SCENARIOS if a != b and b.name.startswith(a.name)
], "a scenario's name starts another's: their scripts would answer each other's requests"


def chosen(quick: bool) -> list[Scenario]:
    return [s for s in SCENARIOS if s.quick or not quick]
