"""The options every command takes; light, so that a command's module can load fast."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def common_options(function: F) -> F:
    """--repo and --store, which every command accepts (cli.md)."""
    function = click.option(
        "--store",
        "store_url",
        envvar="KAIRO_STORE",
        default=None,
        help="Store URL: sqlite:///abs/path.db (default: the repository's .git/kairo/kairo.db).",
    )(function)
    function = click.option(
        "--repo",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path(),
        show_default=False,
        help="The git repository (default: the current directory).",
    )(function)
    return function
