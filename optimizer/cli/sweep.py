"""``gpuopt sweep PROBLEM --vary 'PATH=START:STOP:STEPS'``: cost and chosen mix over one or two varied values."""

from __future__ import annotations

import sys

import click

from .common import fail_usage
from .overlay_options import overlay_options, parallel_options
from .solve import solver_options
from .whatif import worst_exit


@click.command()
@click.argument("problem", type=click.Path(dir_okay=False))
@click.option("--vary", "varies", multiple=True, metavar="PATH=START:STOP:STEPS",
              help="A dimension: PATH=START:STOP:STEPS sets the field to each value, PATH*=START:STOP:STEPS "
                   "multiplies it by each factor; V1,V2,... lists values (one or two dimensions in all).")
@click.option("--vary-scale", "vary_scales", multiple=True, metavar="SELECTOR:START:STOP:STEPS",
              help="A dimension of --scale factors, e.g. 'pricing=spot,gpu=H100-SXM:0.5:1.5:11'.")
@overlay_options
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Directory for points.csv and break_points.csv (needed by --format csv).")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), default=None, metavar="FILE.png",
              help="Draw the objective and the mix against the varied values (PNG).")
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
@click.option("--every-point", is_flag=True,
              help="Solve every point. By default a point between two solved ones is settled from them without "
                   "a solve when the swept value moves only the objective (a price) and their plans prove it "
                   "within --gap (docs/whatif.md).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the sweep as one self-contained HTML page (gpuopt report).")
@solver_options
@parallel_options
def sweep(problem, varies, vary_scales, sets, scales, fmt, out_dir, plot_file, force, every_point, html_file, solver,
          time_limit, gap, threads, workers, executor, scheduler) -> None:
    """Solve PROBLEM at every point of a grid of varied values.

    \b
    gpuopt sweep q3.yaml --vary 'offerings[aws-p5-spot].price_per_hour*=0.5:1.5:11'
    gpuopt sweep q3.yaml --vary-scale 'pricing=spot:0.5:1.5:5' --vary-scale 'demand:1:2:3' --workers 2
    gpuopt sweep q3.yaml --vary 'inference[chat].demand_rps*=1:3:21' --plot chat.png -o out/
    """
    from ..studies.sweep import check_outputs, parse_vary, parse_vary_scale, plot, render_table, run_sweep, write_csv

    dims = [parse_vary(v) for v in varies] + [parse_vary_scale(v) for v in vary_scales]
    if not dims:
        fail_usage("give --vary PATH=START:STOP:STEPS (or --vary-scale SELECTOR:START:STOP:STEPS)")
    if len(dims) > 2:
        fail_usage(f"a sweep has one or two dimensions; got {len(dims)}")
    if len({d.label for d in dims}) < len(dims):
        fail_usage("the two dimensions vary the same thing")
    if fmt == "csv" and not out_dir:
        fail_usage("--format csv needs -o DIR")
    check_outputs(out_dir, plot_file, force)
    from .report import check_html_target, write_html

    check_html_target(html_file, force)

    sw = run_sweep(problem, dims, sets=sets, scales=scales, solver=solver, time_limit=time_limit, gap=gap,
                   threads=threads, workers=workers, executor=executor, scheduler=scheduler,
                   progress=True, every_point=every_point)
    pts, bps, name, currency, objective_kind = sw.points, sw.break_points, sw.problem, sw.currency, sw.objective_kind

    written = []
    if out_dir:
        written += write_csv(dims, pts, bps, out_dir)
    header = (f"sweep of {name}: {len(pts)} point(s) ({' x '.join(str(len(d.values)) for d in dims)}), "
              f"objective {objective_kind} in {currency}; mix = units per offering")
    if plot_file:
        plot(dims, pts, bps, plot_file, currency, f"{name}: {' / '.join(d.label for d in dims)}")
        written.append(plot_file)
    if fmt == "json":
        click.echo(sw.to_json())
    elif fmt == "table":
        click.echo(render_table(dims, pts, bps, currency, header))
    if html_file:
        written.append(write_html(sw.to_dict(), html_file, force))
    for w in written:
        click.echo(f"wrote {w}", err=True)
    bad = [p for p in pts if p["objective"] is None]
    if bad:
        click.echo(f"{len(bad)} of {len(pts)} point(s) have no plan (first: point {bad[0]['index']}, "
                   f"{bad[0]['status']}: {bad[0]['message']})", err=True)
    sys.exit(worst_exit([p["status"] for p in pts], [(f"point {p['index']}", p["audit"]) for p in pts]))
