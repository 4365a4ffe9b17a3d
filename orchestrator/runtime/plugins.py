"""Resource constraints of the user's own, from the `kairo_orch.constraints` entry points.

A package declares, in its pyproject.toml,

    [project.entry-points."kairo_orch.constraints"]
    cost_cap = "my_package.limits:CostCap"

and the supervisor adds an instance of each (a class is called with no arguments) after
the built-in ones. One that cannot be loaded is logged and left out, not fatal.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import structlog

from orchestrator.core.constraints import BUILT_IN, ResourceConstraint

log = structlog.get_logger(__name__)

GROUP = "kairo_orch.constraints"


def load_constraints() -> tuple[ResourceConstraint, ...]:
    extra: list[ResourceConstraint] = []
    for entry in entry_points(group=GROUP):
        try:
            loaded = entry.load()
            constraint = loaded() if isinstance(loaded, type) else loaded
        except Exception as error:  # a broken plugin must not stop the supervisor
            log.warning("constraint_not_loaded", entry_point=entry.name, error=str(error))
            continue
        extra.append(constraint)
        log.info("constraint_loaded", entry_point=entry.name)
    return (*BUILT_IN, *extra)
