"""What every event model is: frozen, and refusing a field it does not know; and which of
its fields hold what an agent, a check or a repository's files said.

Such a field is `Printed` (or holds a model that has one): the journal cuts secrets out of
it before the event is logged (`redact_printed`, core/secrets.py), so that neither the log
nor what is made of it (`status`, the reports, a pull request's body) holds one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, Final, TypeVar, get_args

from pydantic import BaseModel, ConfigDict

from orchestrator.core.os_strings import OsStr


class EventModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _PrintedMark:
    """The mark of a field that holds printed text (`Printed`)."""


PRINTED: Final = _PrintedMark()
# An agent's text may hold any bytes: each is an OsStr too (os_strings.py).
Printed = Annotated[OsStr, PRINTED]
MaybePrinted = Annotated[OsStr | None, PRINTED]
PrintedLines = Annotated[tuple[OsStr, ...], PRINTED]

Model = TypeVar("Model", bound=BaseModel)


def redact_printed(model: Model, redact: Callable[[str], str]) -> Model:
    """`model` with `redact` applied to each of its printed texts, its nested models' too;
    `model` itself when that changes nothing."""
    changes: dict[str, Any] = {}
    for name in _printed_fields(type(model)):
        value = getattr(model, name)
        redacted = _redacted(value, redact)
        if redacted != value:
            changes[name] = redacted
    return model.model_copy(update=changes) if changes else model


def _redacted(value: object, redact: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, BaseModel):
        return redact_printed(value, redact)
    if isinstance(value, tuple):
        return tuple(_redacted(item, redact) for item in value)
    return value  # None


@functools.cache
def _printed_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The fields of `model` that are printed, or hold models that have such fields (a
    plan has none: it is not walked)."""
    return tuple(
        name
        for name, field in model.model_fields.items()
        if PRINTED in field.metadata or any(_printed_fields(m) for m in _models(field.annotation))
    )


def _models(annotation: object) -> list[type[BaseModel]]:
    """The models an annotation names: `Reason | None`, `tuple[Refusal, ...]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in get_args(annotation) for model in _models(argument)]
