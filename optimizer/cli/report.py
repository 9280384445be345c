"""``gpuopt report``: one self-contained HTML page from a problem or a saved JSON result."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import InputError
from .overlay_options import overlay_options
from .solve import exit_code, solver_options


def write_html(doc: dict, path: str | Path, force: bool, field: str = "--html") -> Path:
    """Write the page for ``doc`` to ``path``; an existing file only with ``force``."""
    from ..render.html import report_html

    path = Path(path)
    check_html_target(path, force, field)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report_html(doc), encoding="utf-8")
    return path


def check_html_target(path, force: bool, field: str = "--html") -> None:
    """Refuse a bad HTML target (``field`` names the option) before any solve."""
    if path is None:
        return
    p = Path(path)
    if p.suffix.lower() not in (".html", ".htm"):
        raise InputError("the report is an HTML file", field=field, value=str(p), allowed="a path ending in .html")
    if p.exists() and not force:
        raise InputError("output file already exists; pass --force to overwrite it", file=str(p), field=field)


@click.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@solver_options
@overlay_options
def report(source, output, force, solver, time_limit, gap, threads, sets, scales) -> None:
    """Write one self-contained HTML page (no network needed to view it) for SOURCE.

    SOURCE is a problem file (solved first, as `gpuopt solve` would) or the
    saved JSON of `gpuopt solve`, `whatif`, `sweep` or `rentbuy --format json`.
    """
    from ..render.html import kind_of

    check_html_target(output, force, "-o")
    src = Path(source)
    doc = None
    if src.suffix.lower() == ".json":
        try:
            doc = json.loads(src.read_text(encoding="utf-8"))
            kind_of(doc)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            raise InputError(f"cannot read a gpuopt result from it ({exc})", file=str(src),
                             allowed="the JSON of gpuopt solve, whatif (one change or scenarios), sweep or rentbuy "
                                     "--format json, or a problem file") from None
        if sets or scales:
            raise InputError("--set/--scale change a problem; a saved result is shown as it is", field="--set")
        status = None
    else:
        from ..load import load_problem
        from ..pipeline import run

        plan = run(load_problem(source, sets=sets, scales=scales), solver=solver, time_limit=time_limit, gap=gap,
                   threads=threads)
        doc, status = plan.to_dict(), plan.status
    path = write_html(doc, output, force, "-o")
    click.echo(f"wrote {path}", err=True)
    if status is not None and exit_code(status):
        raise SystemExit(exit_code(status))
