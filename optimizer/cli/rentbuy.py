"""``gpuopt rentbuy PROBLEM``: rent versus buy (strategies, break-even, cash flows, NPV, sensitivity)."""

from __future__ import annotations

import sys

import click

from .common import EXIT_INTERNAL, echo_failed_audits, fail_usage
from .overlay_options import overlay_options, parallel_options
from .solve import exit_code, solver_options


@click.command()
@click.argument("problem", type=click.Path(dir_okay=False))
@solver_options
@overlay_options
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv", "xlsx"]), default="table",
              show_default=True)
@click.option("-o", "--output", default=None, metavar="PATH",
              help="csv: a directory (one CSV per table); xlsx: a .xlsx file (one sheet per table); "
                   "json: a file instead of stdout.")
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the analysis as one self-contained HTML page (gpuopt report).")
@click.option("--no-break-even", "no_break_even", is_flag=True,
              help="Skip the break-even capex search (the closed-form utilisation and payback stay).")
@click.option("--no-sensitivity", "no_sensitivity", is_flag=True, help="Skip the sensitivity (tornado) re-solves.")
@click.option("--step", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.2,
              show_default=True, help="Sensitivity: move each input by this share down and up.")
@click.option("--offering", "offerings", multiple=True, metavar="ID",
              help="Owned offering to find the break-even of (repeatable; default: the problem file's own).")
@click.option("--rental", "rentals", multiple=True, metavar="ID",
              help="Rental to compare owning with (repeatable; default: on-demand and reserved offerings of the "
                   "same GPU type that can carry a fleet, never spot or a single host).")
@parallel_options
def rentbuy(problem, solver, time_limit, gap, threads, fmt, output, force, html_file, no_break_even,
            no_sensitivity, step, offerings=(), rentals=(), sets=(), scales=(), workers=1, executor="local",
            scheduler=None) -> None:
    """Rent versus buy for PROBLEM: strategies, break-even, cash flows, NPV and sensitivity.

    \b
    gpuopt rentbuy problems/rent-vs-buy-3y.yaml
    gpuopt rentbuy problems/rent-vs-buy-3y.yaml --format xlsx -o rentbuy.xlsx
    gpuopt rentbuy problems/rent-vs-buy-3y.yaml --format csv -o out/ --no-sensitivity
    gpuopt rentbuy problems/rent-vs-buy-3y.yaml --workers 2

    With --workers N > 1 (or --executor dask) the solves run side by side:
    the strategies and the sensitivity's, and the break-even search beside
    the sensitivity. The tables are the same.
    """
    from ..executors import share_cpus, solve_executor
    from ..load import load_problem
    from ..render.rentbuy import check_output, to_table, write_csv, write_xlsx
    from ..studies.rentbuy import analyse

    if fmt in ("csv", "xlsx") and not output:
        fail_usage(f"--format {fmt} needs -o " + ("DIR (one CSV file per table)" if fmt == "csv"
                                                   else "FILE.xlsx (one sheet per table)"))
    if fmt == "table" and output:
        fail_usage("-o is for --format csv, xlsx or json")
    check_output(fmt, output, force)  # before any solve
    from .report import check_html_target, write_html

    check_html_target(html_file, force)
    pr = load_problem(problem, sets=sets, **({"scales": scales} if scales else {}))
    threads, lend = share_cpus(threads, workers, executor, scheduler)
    with solve_executor(executor, workers, scheduler, lend) as pool:
        rb = analyse(pr, solver=solver, time_limit=time_limit, gap=gap, threads=threads,
                     do_break_even=not no_break_even, do_sensitivity=not no_sensitivity, step=step,
                     offerings=list(offerings), rentals=list(rentals), executor=pool)
    if fmt == "json":
        text = rb.to_json()
        if output:
            with open(output, "w") as fh:
                fh.write(text + "\n")
            click.echo(f"wrote {output}", err=True)
        else:
            click.echo(text)
    elif fmt == "csv":
        paths = write_csv(rb, output, force=force)
        click.echo(f"wrote {len(paths)} CSV files to {output}", err=True)
    elif fmt == "xlsx":
        path = write_xlsx(rb, output, force=force)
        click.echo(f"wrote {path}", err=True)
    else:
        click.echo(to_table(rb))
    if html_file:
        click.echo(f"wrote {write_html(rb.to_dict(), html_file, force)}", err=True)
    if not rb.mix.status.has_plan:
        click.echo(f"{rb.mix.status.value}: {rb.mix.result.message}", err=True)
    echo_failed_audits(rb.audit_failures)
    sys.exit(EXIT_INTERNAL if rb.audit_failures else exit_code(rb.mix.status))
