"""``gpuopt schema``: the JSON Schema of the problem file, for editor completion."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import InputError

SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"


def problem_schema() -> dict:
    """``ProblemFile.model_json_schema()`` with the draft and a title."""
    from ..schema import ProblemFile

    schema = ProblemFile.model_json_schema()
    return {"$schema": SCHEMA_URI, "title": "gpuopt problem file", **{k: v for k, v in schema.items()
                                                                       if k != "title"}}


@click.command()
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), default=None,
              help="Write the schema to this file instead of printing it.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def schema(out, force) -> None:
    """Print the JSON Schema of problem files (for YAML editor completion).

    VS Code with the YAML extension: add ``# yaml-language-server: $schema=gpuopt.schema.json``
    as the first line of a problem file.
    """
    text = json.dumps(problem_schema(), indent=2) + "\n"
    if out is None:
        click.echo(text, nl=False)
        return
    path = Path(out)
    if path.exists() and not force:
        raise InputError("file exists; refusing to overwrite", field="-o", value=str(path),
                         allowed="a new path, or --force to overwrite")
    try:
        path.write_text(text)
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", field="-o", value=str(path)) from None
    click.echo(f"wrote {path}", err=True)
