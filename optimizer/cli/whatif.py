"""``gpuopt whatif PROBLEM``: the base plan, a changed plan, and what changed; or named scenarios side by side.

Modes (docs/whatif.md):

- ``--set``/``--scale`` (and/or ``--scenario NAME``): solve the base and the
  changed problem; print the cost delta by pricing kind and by workload and
  what moved. ``--format json`` prints ``{"base", "scenario", "delta", "change"}``.
- none of them, with scenarios in the problem file or ``--scenarios FILE``:
  solve the base and every scenario and print them side by side.
"""

from __future__ import annotations

import sys

import click

from .common import EXIT_INFEASIBLE, EXIT_INTERNAL, EXIT_OK, EXIT_SOLVER, echo_failed_audits, fail_usage
from .overlay_options import overlay_options, parallel_options
from .solve import solver_options


def worst_exit(statuses, audits=()) -> int:
    """4 if any plan failed its audit, else 3 if any solve failed without a plan, else 1 if any was infeasible,
    else 0.

    ``audits``: pairs of a name and that plan's violations; each failure is
    said on stderr as the internal error it is (a plan that disagrees with
    its model is a bug in gpuopt, as for ``gpuopt solve``).
    """
    from ..solve.result import Status
    from ..studies.whatif import audit_failures

    failed = audit_failures(audits)
    echo_failed_audits(failed)
    if failed:
        return EXIT_INTERNAL
    sts = [Status(s) for s in statuses]
    if any(not s.has_plan and s != Status.INFEASIBLE for s in sts):
        return EXIT_SOLVER
    if any(s == Status.INFEASIBLE for s in sts):
        return EXIT_INFEASIBLE
    return EXIT_OK


@click.command()
@click.argument("problem", type=click.Path(dir_okay=False))
@overlay_options
@click.option("--scenario", "scenario_name", default=None, metavar="NAME",
              help="Compare this named scenario (from the problem's `scenarios:` or --scenarios) with the base.")
@click.option("--scenarios", "scenario_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="A YAML file of named scenarios (a list of {name, set, scale, description}).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the comparison (one change, or the scenarios side by side) as one self-contained HTML "
                   "page (gpuopt report).")
@click.option("--force", is_flag=True, help="Overwrite the --html file if it exists.")
@solver_options
@parallel_options
def whatif(problem, sets, scales, scenario_name, scenario_file, fmt, html_file, force, solver, time_limit, gap,
           threads, workers, executor, scheduler) -> None:
    """Solve PROBLEM as it is and as changed; show what changed.

    \b
    gpuopt whatif q3.yaml --set 'offerings[aws-p5-spot].price_per_hour*=0.7'
    gpuopt whatif q3.yaml --scale 'pricing=spot,gpu=H100-SXM:0.7' --scale 'demand:2'
    gpuopt whatif q3.yaml --scenario spot-cut       # one named scenario against the base
    gpuopt whatif q3.yaml --scenarios more.yaml     # every scenario side by side
    """
    from ..studies.whatif import (Change, build, overlay, read_raw, render_compare, scenario_raw, scenarios,
                                  solve_change)

    file = str(problem)
    raw = read_raw(problem)
    named = scenarios(raw, file, scenario_file)
    # one change: the base and the changed problem are solved here, one after the other, each with the threads
    # asked for (the workers are for scenarios side by side)
    opts = dict(solver=solver, time_limit=time_limit, gap=gap, threads=threads)

    if scenario_name is not None or sets or scales:
        if scenario_name is not None:
            hits = [c for c in named if c.name == scenario_name]
            if not hits:
                from ..errors import unknown_name

                raise unknown_name("scenario", scenario_name, [c.name for c in named] or ["(none defined)"],
                                   field="--scenario", value=scenario_name)
            ch = hits[0]
            new_raw = scenario_raw(raw, file, ch)
            ch = Change(ch.name, ch.sets + list(sets), ch.scales + list(scales), ch.description)
            new_raw = overlay(new_raw, file, sets, scales)
        else:
            ch = Change("scenario", list(sets), list(scales))
            new_raw = overlay(raw, file, sets, scales)
        base_pr, new_pr = build(raw, file), build(new_raw, file)
        from .report import check_html_target, write_html

        check_html_target(html_file, force)
        result = solve_change(ch, base_pr, new_pr, **opts)
        if html_file:
            click.echo(f"wrote {write_html(result.to_dict(), html_file, force)}", err=True)
        base, new, delta = result.base, result.scenario, result.delta
        if fmt == "json":
            click.echo(result.to_json())
        else:
            title = (f"{ch.name}: " if scenario_name else "") + ch.title
            click.echo(render_compare(delta, base, new, title))
        for p, label in ((base, "base"), (new, "scenario")):
            if not p.status.has_plan:
                click.echo(f"{label}: {p.status.value}: {p.result.message}", err=True)
        sys.exit(worst_exit([base.status.value, new.status.value], [("base", base.audit), ("scenario", new.audit)]))

    if not named:
        fail_usage("nothing to compare: give --set/--scale, --scenario NAME, or scenarios "
                   "(a `scenarios:` section in the problem file, or --scenarios FILE)")
    _side_by_side(raw, file, named, fmt, opts, workers, executor, scheduler, html_file, force)


def _side_by_side(raw, file, named, fmt, opts, workers, executor, scheduler, html_file, force) -> None:
    from ..studies.whatif import render_side_by_side, solve_scenarios
    from .report import check_html_target, write_html

    check_html_target(html_file, force)  # before any solve
    sbs = solve_scenarios(raw, file, named, workers=workers, executor=executor, scheduler=scheduler, **opts)
    if html_file:
        click.echo(f"wrote {write_html(sbs.to_dict(), html_file, force)}", err=True)
    if fmt == "json":
        click.echo(sbs.to_json())
    else:
        click.echo(render_side_by_side(sbs.rows, sbs.currency))
    rows = sbs.rows
    sys.exit(worst_exit([r["status"] for r in rows], [(r["name"], r["audit"]) for r in rows]))
