"""structlog, configured once per process: console on a terminal, JSON lines otherwise."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog


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
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )
