"""The words and conventions every stage shares, in a module that imports nothing.

Pricing kinds, precisions, objectives, link and fabric kinds, the solver
back ends' names and the hours of a month and a year. The problem schema
(:mod:`optimizer.schema`), the model and the command line all read them
from here; the command line builds its options (``--solver``,
``--precision``, ``--pricing``) from them without importing pandas,
pydantic or a solver, so that ``gpuopt --help`` answers at once.
"""

from __future__ import annotations

PRICING_KINDS = ("on_demand", "spot", "reserved", "owned")
#: pricing kinds paid by the hour used, with no commitment (a rented unit is billed only while held)
PAY_PER_HOUR = ("on_demand", "spot")
#: pricing kinds not owned: paid per hour, with or without a term (everything but a purchase)
RENTED_OR_RESERVED = ("on_demand", "spot", "reserved")
PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")
OBJECTIVES = ("cost", "npv")
#: how the GPUs inside one unit talk to each other
UNIT_LINKS = ("nvlink", "xgmi", "pcie")
#: how units talk to each other; ``none``: no fabric, so a cluster never spans two units
FABRICS = ("infiniband", "roce", "efa", "ethernet", "none")

#: the solver back ends by the names ``--solver`` takes (:data:`optimizer.solve.backends.BACKENDS` runs them)
SOLVERS = ("highs", "scip", "cbc", "cp-sat")
#: Measured on bench/run.py (docs/performance.md): best gap within the time limit at every scale.
DEFAULT_SOLVER = "highs"

#: one convention for every monthly figure: 8760 h / 12
HOURS_PER_MONTH = 730.0
HOURS_PER_YEAR = 8760.0
