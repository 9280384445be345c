"""The polish (per-period fix-and-optimize) on a problem whose answer is worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import write_problem
from optimizer.model import presolve
from optimizer.solve.warmstart import check_start, polish
from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.model.mip import MIP

# Two 200-h periods. One reserved 8-GPU unit at 10 $/h (at most one). Inference: one 4-GPU replica in each
# period, so 4 reserved GPUs are idle in both. Training: a 4-GPU cluster for 300 h, in months 0..1, on the
# reserved unit (free beside inference) or on demand at 100 $/h per 8 GPUs (12.5 $/GPU-h).
DATA = {
    "periods": [{"name": "p1", "hours": 200, "month": 0}, {"name": "p2", "hours": 200, "month": 1}],
    "offerings": [
        {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "reserved",
         "price_per_hour": 10, "max_units": 1},
        {"id": "od", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "on_demand",
         "price_per_hour": 100},
    ],
    "inference": [{"name": "chat", "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 200,
                   "demand_rps": 1, "profiles": [{"gpu": "H100-SXM", "gpus": 4, "rps": 1.0}]}],
    "training": [{"name": "ft", "model": "llama-3.1-8b", "tokens": 1e9, "start_month": 0, "deadline_month": 1,
                  "cluster_gpus": [4], "profiles": [{"gpu": "H100-SXM", "gpus": 4, "hours": 300}]}],
}


def _ids(mip: MIP, block: str, **match) -> np.ndarray:
    """Ids of the block's variables whose coordinates equal ``match``."""
    b = mip.variables[block]
    hit = np.ones(b.size, bool)
    for k, v in match.items():
        hit &= (b.coords[k] == v).to_numpy()
    return b.ids[hit]


def test_the_polish_moves_training_hours_to_idle_capacity_within_each_period(tmp_path):
    model = presolve.build(pr := load_problem(write_problem(tmp_path, DATA)), build_candidates(pr))
    mip, a = model.mip, model.mip.arrays()
    # the plan to polish: the reservation and the inference of the optimum (res 1 unit, 4,000 over 400 h),
    # but the cluster rented on demand, 180 h in p1 and 120 h in p2: 4 GPUs × 12.5 × 300 h = 15,000 more
    x0 = np.zeros(a.n_vars)
    x0[_ids(mip, "units-reserved")] = 1
    x0[_ids(mip, "inference-replicas", offering="res")] = 1
    x0[_ids(mip, "inference-routing", offering="res")] = 1
    x0[_ids(mip, "training-select")] = 1
    for p, h in (("p1", 180), ("p2", 120)):
        x0[_ids(mip, "training-run", offering="od", period=p)] = 1
        x0[_ids(mip, "training-hours", offering="od", period=p)] = h
    assert check_start(a, x0) == []
    assert float(a.c @ x0 + a.c0) == pytest.approx(19_000)
    # each period moves its hours to the idle reserved GPUs (4 + 4 ≤ 8 in both) and keeps its share of
    # the job's progress: 180 h and 120 h on res, nothing rented; cost = the reservation, 4,000
    x = polish(mip, x0, None, a)
    assert check_start(a, x) == []
    assert float(a.c @ x + a.c0) == pytest.approx(4_000)
    hours = mip.values("training-hours", x)
    got = hours[hours["value"] > 1e-9].set_index(["offering", "period"])["value"].to_dict()
    assert got == pytest.approx({("res", "p1"): 180, ("res", "p2"): 120})
