"""Shared CLI plumbing: error handling and exit codes.

Exit codes (design.md): 0 a plan was found; 1 infeasible; 2 bad input or
usage; 3 the solver failed or hit its limit with no plan.
"""

from __future__ import annotations

import sys

import click

from ..errors import GpuoptError, InputError

EXIT_OK, EXIT_INFEASIBLE, EXIT_INPUT, EXIT_SOLVER = 0, 1, 2, 3


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


def fail_usage(message: str) -> None:
    """Exit 2 with a usage message (for checks click cannot express)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_INPUT)
