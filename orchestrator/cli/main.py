"""The `kairo-orch` command: argument parsing and output only; the work is elsewhere.

Every `KairoError` becomes its sentences on stderr and its exit code (cli.md); nothing
reaches the user as a traceback.
"""

from __future__ import annotations

import sys

import click

from orchestrator.cli.clean import clean
from orchestrator.cli.inspect import events, list_, report, status, verify
from orchestrator.cli.start import start
from orchestrator.cli.validate import validate
from orchestrator.cli.watch import attach, watch
from orchestrator.errors import KairoError

EXIT_SIGINT = 130


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kairo-orch")
def cli() -> None:
    """Run many coding agents on one refactor at once, safely.

    Each subtask of a plan gets its own git worktree, branch and tmux pane; finished
    branches are merged into an integration branch with a report of every conflict.
    """


for command in (start, status, list_, attach, events, verify, report, validate, clean, watch):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="kairo-orch", standalone_mode=False)
    except KairoError as error:
        click.echo(f"kairo-orch: {error.message}", err=True)
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        click.echo("kairo-orch: interrupted", err=True)
        sys.exit(EXIT_SIGINT)
    except click.ClickException as error:
        error.show()
        sys.exit(2 if isinstance(error, click.UsageError) else error.exit_code)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except KeyboardInterrupt:
        click.echo("kairo-orch: interrupted", err=True)
        sys.exit(EXIT_SIGINT)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as error:  # a bug: say so in one line, not a traceback
        click.echo(f"kairo-orch: internal error: {type(error).__name__}: {error}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
