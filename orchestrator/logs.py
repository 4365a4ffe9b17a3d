"""structlog, configured once per process: console on a terminal, JSON lines otherwise.

What a line says has the secrets of the process's environment cut out (core/secrets.py):
the supervisor's log is a file of the run folder, and an error may quote a check's output
or a URL with a password.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, MutableMapping
from typing import Any, TextIO

import structlog

from orchestrator.core.secrets import Redactor


def configure(stream: TextIO | None = None, *, level: int = logging.INFO) -> None:
    stream = stream or sys.stderr
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if stream.isatty() else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redacting(Redactor.of(os.environ).text),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )


def _redacting(redact: Callable[[str], str]) -> structlog.typing.Processor:
    def processor(
        _logger: Any, _method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        return {key: redact(v) if isinstance(v, str) else v for key, v in event.items()}

    return processor
