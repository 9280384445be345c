"""Reusable click options for commands that change a problem before solving it.

``@overlay_options`` adds ``--set PATH=VALUE`` / ``--set PATH*=FACTOR`` and
``--scale SELECTOR:FACTOR`` (both repeatable; every --set is applied first,
then every --scale) and passes them as ``sets`` and ``scales`` (tuples of
strings). Hand them to ``load_problem(path, sets=sets, scales=scales)``::

    @click.command()
    @click.argument("problem")
    @overlay_options
    def rentbuy(problem, sets, scales):
        pr = load_problem(problem, sets=sets, scales=scales)

``@parallel_options`` adds ``--workers N``, ``--executor local|dask`` and
``--scheduler ADDRESS`` (``workers``, ``executor``, ``scheduler``) for
:func:`optimizer.studies.sweep.run_tasks`, and refuses ``--scheduler``
without ``--executor dask`` (exit 2) before the command runs.
docs/whatif.md documents the grammar.
"""

from __future__ import annotations

import functools

import click

from .common import fail_usage

SET_HELP = ("Change the problem before solving: PATH=VALUE or PATH*=FACTOR, e.g. "
            "offerings[ID].price_per_hour*=0.8 or inference[chat].demand_rps=40 (repeatable).")
SCALE_HELP = ("Multiply a field of every matching item: [TARGET,]KEY=VALUE,...:FACTOR, e.g. "
              "'pricing=spot,gpu=H100-SXM:0.7' (price_per_hour of matching offerings, catalog included), "
              "'demand:2', 'demand,service=chat:1.5' (repeatable; applied after every --set).")


def overlay_options(f):
    """Add ``--set`` (``sets``) and ``--scale`` (``scales``) to a click command."""
    f = click.option("--scale", "scales", multiple=True, metavar="SELECTOR:FACTOR", help=SCALE_HELP)(f)
    f = click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help=SET_HELP)(f)
    return f


def parallel_options(f):
    """Add ``--workers``, ``--executor`` and ``--scheduler`` to a click command; ``--scheduler`` needs ``dask``."""

    command = f

    @functools.wraps(command)
    def checked(*args, **kwargs):
        if kwargs.get("executor") != "dask" and kwargs.get("scheduler"):
            fail_usage("--scheduler needs --executor dask")
        return command(*args, **kwargs)

    f = click.option("--scheduler", default=None, metavar="ADDRESS",
                     help="Dask scheduler address (tcp://HOST:8786) for --executor dask; without it a local "
                          "Dask cluster of --workers processes is started.")(checked)
    f = click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True,
                     help="local: this machine (separate processes when --workers > 1); dask: a Dask cluster.")(f)
    f = click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Solves at once (processes).")(f)
    return f
