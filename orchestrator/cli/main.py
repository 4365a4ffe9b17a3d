"""The `kairo-orch` command: argument parsing and output only; the work is elsewhere.

Every `KairoError` becomes its sentences on stderr and its exit code (cli.md); nothing
reaches the user as a traceback. What an error quotes (git's words on a file an agent
named, a path) is made inert first (core/inert_text.py), as everything else shown is.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import NoReturn

import click

from orchestrator.core.inert_text import inert
from orchestrator.errors import KairoError, exit_status

# Each command's module is imported only when that command runs: trio, the git layer and
# the plan loader cost hundreds of milliseconds that `status --json` need not pay.
_COMMANDS = {
    "start": "orchestrator.cli.start:start",
    "resume": "orchestrator.cli.resume:resume",
    "stop": "orchestrator.cli.stop:stop",
    "status": "orchestrator.cli.inspect:status",
    "list": "orchestrator.cli.inspect:list_",
    "attach": "orchestrator.cli.watch:attach",
    "events": "orchestrator.cli.inspect:events",
    "verify": "orchestrator.cli.inspect:verify",
    "report": "orchestrator.cli.inspect:report",
    "validate": "orchestrator.cli.validate:validate",
    "clean": "orchestrator.cli.clean:clean",
    "watch": "orchestrator.cli.watch:watch",
    "conflicts": "orchestrator.cli.conflicts:conflicts",
    "worker": "orchestrator.cli.workers:worker",
    "workers": "orchestrator.cli.workers:workers",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command


EXIT_SIGINT = 130


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kairo-orch")
def cli() -> None:
    """Run many coding agents on one refactor at once, safely.

    Each subtask of a plan gets its own git worktree, branch and tmux pane; finished
    branches are merged into an integration branch with a report of every conflict.
    """


def main(argv: list[str] | None = None) -> NoReturn:
    exit_now(run(argv))


def run(argv: list[str] | None = None) -> int:
    """The command's exit code."""
    try:
        # Not standalone: click returns the code of a `ctx.exit(n)` (or `--help`).
        code = cli.main(args=argv, prog_name="kairo-orch", standalone_mode=False)
    except SystemExit as done:  # a command's own code (`--wait`); click's on a closed pipe
        return exit_status(done)
    except KairoError as error:
        click.echo(f"kairo-orch: {inert(error.message, lines=True)}", err=True)
        return error.exit_code
    except click.exceptions.Abort:
        click.echo("kairo-orch: interrupted", err=True)
        return EXIT_SIGINT
    except click.UsageError as error:  # one sentence, as every other error (cli.md)
        where = f" (see `{error.ctx.command_path} --help`)" if error.ctx else ""
        click.echo(f"kairo-orch: {error.format_message()}{where}", err=True)
        return 2
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except KeyboardInterrupt:
        click.echo("kairo-orch: interrupted", err=True)
        return EXIT_SIGINT
    except Exception as error:  # a bug: say so in one line, not a traceback
        said = inert(str(error), lines=True)
        click.echo(f"kairo-orch: internal error: {type(error).__name__}: {said}", err=True)
        return 1
    return code if isinstance(code, int) else 0


def exit_now(code: int) -> NoReturn:
    """Exit with `code` once the output is out, without the interpreter's teardown: freeing
    one by one what the imports built (pydantic's models, mostly) is CPU that
    `start` would spend on the cores its supervisor is filling worktrees on. Nothing here
    waits for it: the commands close their stores and files as they finish (`with`), and
    no library they use registers an atexit handler."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone (a pipe into `head`)
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
