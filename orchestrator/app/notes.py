"""What a use case tells its caller along the way, as data: the CLI renders each to a line
on stderr (cli/words.py); nothing here is English but the plan's own warnings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class PlanWarning:
    text: str  # the plan loader's own sentence


@dataclass(frozen=True)
class UncommittedChanges:
    """The checkout has changes the agents do not start from."""

    base_commit: str


@dataclass(frozen=True)
class PlanChangedSinceStart:
    """The plan file was modified after the execution started: resume goes on with the
    plan its log holds, which a user who edited the file may not expect."""

    plan_path: str


@dataclass(frozen=True)
class StoreNotAnswering:
    message: str  # the store's own words


@dataclass(frozen=True)
class StoreAnswersAgain:
    pass


Note = (
    PlanWarning | UncommittedChanges | PlanChangedSinceStart | StoreNotAnswering | StoreAnswersAgain
)
Notify = Callable[[Note], None]
