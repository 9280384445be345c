"""gpuopt: the cheapest GPU capacity plan (rent, reserve, buy) as a mixed-integer program.

Pipeline, one module per stage:

``load`` (read + validate a problem file and catalogs) -> ``sizing`` and
``candidates`` (configurations per workload and GPU type) -> ``model``
(a solver-neutral MIP built per constraint family from whole tables, and its
presolve) -> ``solve`` (the driver and the back ends: HiGHS, CBC, SCIP,
CP-SAT) -> ``plan`` (pandas tables) -> ``audit`` -> ``render`` (table, JSON,
CSV). ``studies`` holds what repeats solves (what-if, sweep, rent-vs-buy,
diagnosis).

From Python (docs/api.md)::

    from optimizer import solve
    plan = solve("problems/q3.yaml", catalog=["default"], time_limit=60)
    plan.by_pricing()          # a DataFrame
"""

__version__ = "0.1.0"

import importlib  # noqa: E402

# the stage package ``optimizer.solve`` is imported first, so that the function ``solve`` below, not the package,
# is ``optimizer.solve`` (the API imports the package only when it runs, and a package's first import binds its
# name in its parent)
importlib.import_module(f"{__name__}.solve")
from .api import (estimate_inference, estimate_training, load_problem, rentbuy, scenarios, solve,  # noqa: E402
                  sweep, whatif)

__all__ = ["estimate_inference", "estimate_training", "load_problem", "rentbuy", "scenarios", "solve", "sweep",
           "whatif"]
