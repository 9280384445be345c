"""Shared CLI plumbing: error handling and exit codes.

Exit codes: 0 a plan was found; 1 infeasible; 2 bad input or usage; 3 the
solver failed or hit its limit with no plan; 4 an internal error (a bug in
gpuopt, or a plan that failed its audit). An internal error's traceback goes
to a file whose path is printed, never to the terminal.
"""

from __future__ import annotations

import datetime as _dt
import sys
import tempfile
import traceback
from pathlib import Path

import click

from ..errors import GpuoptError, InputError

EXIT_OK, EXIT_INFEASIBLE, EXIT_INPUT, EXIT_SOLVER, EXIT_INTERNAL = 0, 1, 2, 3, 4


def report_internal_error(exc: BaseException) -> Path:
    """Write the traceback of a bug to a file in the temp directory and return its path."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    fd, name = tempfile.mkstemp(prefix=f"gpuopt-internal-error-{stamp}-", suffix=".txt")
    with open(fd, "w") as f:
        f.write(f"gpuopt {' '.join(sys.argv[1:])}\n\n")
        f.write("".join(traceback.format_exception(exc)))
    return Path(name)


class GpuoptGroup(click.Group):
    """A click group that turns gpuopt errors into messages and exit codes."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as exc:
            click.echo(f"error: {exc.render()}", err=True)
            ctx.exit(EXIT_INPUT)
        except GpuoptError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except Exception as exc:  # anything not raised on purpose is a bug in gpuopt: say so, never hide it
            path = report_internal_error(exc)
            click.echo(f"internal error, please report: {type(exc).__name__}: {exc}\n"
                       f"the traceback is in {path}", err=True)
            ctx.exit(EXIT_INTERNAL)


def echo_failed_audits(lines) -> None:
    """Each plan that failed its audit (:func:`optimizer.studies.whatif.audit_failures`'s lines) on stderr, as the
    internal error it is: a plan that disagrees with its model is a bug in gpuopt (the command exits 4)."""
    for line in lines:
        click.echo(f"internal error, please report: a plan failed its audit: {line}", err=True)


def fail_usage(message: str) -> None:
    """Exit 2 with a usage message (for checks click cannot express)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_INPUT)
