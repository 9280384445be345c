"""``gpuopt validate PROBLEM``: every input error at once, plus warnings (docs/diagnosis.md)."""

from __future__ import annotations

import json
import sys

import click

from ..validate import render, validate_file
from .common import EXIT_INPUT, EXIT_OK


@click.command()
@click.argument("problem", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def validate(problem, fmt) -> None:
    """Check PROBLEM without solving: all errors at once, and warnings.

    Exit 0 when the file is valid (warnings allowed), 2 when it has errors.
    """
    report = validate_file(problem)
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        click.echo(render(report))
    sys.exit(EXIT_OK if report.valid else EXIT_INPUT)
