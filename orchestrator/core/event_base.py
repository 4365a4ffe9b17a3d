"""What every event model is: frozen, and refusing a field it does not know."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class EventModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
