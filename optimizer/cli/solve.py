"""``gpuopt solve PROBLEM``: the cheapest plan for a problem file."""

from __future__ import annotations

import sys

import click

from ..vocabulary import DEFAULT_SOLVER, SOLVERS
from .overlay_options import overlay_options, parallel_options
from .common import EXIT_INFEASIBLE, EXIT_INTERNAL, EXIT_OK, EXIT_SOLVER, fail_usage

# the model, the solvers and the renderers are imported by the command that runs, not by ``gpuopt --help``


def exit_code(status) -> int:
    """0 a plan was found; 1 infeasible; 3 no plan: the solver failed (`error`) or the time limit came first
    (`time-limit`). ``status``: a :class:`optimizer.solve.result.Status`."""
    from ..solve.result import Status

    if status.has_plan:
        return EXIT_OK
    return EXIT_INFEASIBLE if status == Status.INFEASIBLE else EXIT_SOLVER


def solver_options(f):
    """--solver, --time-limit, --gap, --threads (shared by every command that solves)."""
    f = click.option("--threads", type=click.IntRange(min=1), default=None,
                     help="Solver threads (default: the solver's own default; with HiGHS every CPU "
                          "for the LP relaxation and as many of the exact split's leaves side by side, "
                          "and for sweep, whatif and rentbuy --workers the CPUs divided among the "
                          "workers, a waiting worker's lent to the others. 1 keeps the leaves, and the "
                          "first-plan guesses of a time-limited large model, one after the other, and "
                          "leaves out that model's search for a bound on a second CPU).")(f)
    f = click.option("--gap", type=click.FloatRange(min=0, max=1), default=1e-6, show_default=True,
                     help="Relative optimality gap at which the solver may stop.")(f)
    f = click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="Wall-clock seconds for each solve, from the model build to the audited plan; the best "
                     "plan so far is returned as `feasible` with its bound (no plan yet: status `time-limit`, "
                     "exit 3).")(f)
    f = click.option("--solver", type=click.Choice(sorted(SOLVERS), case_sensitive=False),
                     default=DEFAULT_SOLVER, show_default=True, help="Solver back end.")(f)
    return f


@click.command()
@click.argument("problem", type=click.Path(dir_okay=False))
@solver_options
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Directory for --format csv (one CSV per table).")
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the plan as one self-contained HTML page (gpuopt report).")
@click.option("--wide", is_flag=True, help="Table format: one column per period (default: each row summarised "
              "to fit 100 columns).")
@click.option("--allow-audit-failure", is_flag=True,
              help="Exit 0 even when the plan fails its audit (for debugging gpuopt itself; such a plan is a bug).")
@overlay_options
@parallel_options
def solve(problem, solver, time_limit, gap, threads, fmt, out_dir, force, html_file, wide, allow_audit_failure,
          sets, scales, workers, executor, scheduler) -> None:
    """Solve PROBLEM and print the cheapest plan.

    With --workers N > 1 or --executor dask, the leaves of the exact split
    (one stable solve per configuration and commitment count) run side by
    side on the workers, the period rounds of the search run there, and the
    services and training jobs, then the periods, are also solved apart
    after the search (a Lagrangian bound; docs/formulation.md).
    """
    if fmt == "csv" and not out_dir:
        fail_usage("--format csv needs -o DIR (one CSV file per table)")
    if out_dir and fmt != "csv":  # it would be silently ignored: the plan goes to stdout
        fail_usage(f"-o DIR is for --format csv (one CSV file per table); --format {fmt} prints to stdout")
    from ..executors import solve_executor
    from ..load import load_problem
    from ..pipeline import run
    from ..render.report import to_json, to_table, write_csv
    from .report import check_html_target, write_html

    check_html_target(html_file, force)
    pr = load_problem(problem, sets=sets, scales=scales)
    with solve_executor(executor, workers, scheduler) as pool:
        plan = run(pr, solver=solver, time_limit=time_limit, gap=gap, threads=threads, executor=pool)
    if html_file:
        click.echo(f"wrote {write_html(plan.to_dict(), html_file, force)}", err=True)
    if fmt == "json":
        click.echo(to_json(plan))
    elif fmt == "csv":
        paths = write_csv(plan, out_dir, force=force)
        click.echo(f"wrote {len(paths)} CSV files to {out_dir}", err=True)
    else:
        click.echo(to_table(plan, wide=wide))
    if plan.audit and fmt != "table":  # the table already lists them
        click.echo(f"warning: the plan failed its audit ({len(plan.audit)} violations); first: {plan.audit[0]}",
                   err=True)
    if not plan.status.has_plan and fmt != "table":  # the table already says it, once, on stdout
        click.echo(f"{plan.status.value}: {plan.result.message}", err=True)
        for d in plan.diagnosis or []:
            click.echo(f"  - {d['kind']}: {d['message']}", err=True)
    if plan.audit and not allow_audit_failure:
        click.echo("internal error, please report: the plan failed its audit (exit 4; "
                   "--allow-audit-failure to exit 0)", err=True)
        sys.exit(EXIT_INTERNAL)
    sys.exit(exit_code(plan.status))
