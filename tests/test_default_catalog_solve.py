"""problems/q3.yaml on the shipped default catalog: only executable placements and no unasked commitments.

The model is built, not solved (a solve of this size takes minutes; its
measured runs are in docs/performance.md). What is checked is what a plan
could contain: every candidate training placement, every candidate offering.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from optimizer.candidates import build_candidates
from optimizer.load import load_problem
from optimizer.model import presolve

ROOT = Path(__file__).resolve().parent.parent


def test_q3_on_the_default_catalog_offers_only_executable_placements():
    problem = load_problem(ROOT / "problems" / "q3.yaml", sets=["catalog=[default]"])
    own = set(load_problem(ROOT / "problems" / "q3.yaml").offerings.index)
    O = problem.offerings
    assert len(O) > len(own)  # the catalog adds offerings
    # nothing is bought from the catalog and no catalog term outlasts the quarter: q3 has no `allow`
    cat = O[O["from_catalog"]]
    assert not (cat["pricing"] == "owned").any()
    end = problem.last_month + 1
    assert not ((cat["pricing"] == "reserved") & (cat["term_months"] > end)).any()
    assert len(problem.excluded) > 0 and problem.excluded["reason"].str.len().gt(0).all()

    model = presolve.build(problem, build_candidates(problem))
    t = model.data.training_options
    off = model.data.offerings.set_index("offering")
    machines = np.ceil(t["gpus"] / t["offering"].map(off["host"]))
    multi = t[machines > 1]
    assert len(multi) > 0  # q3's 16-GPU clusters span machines somewhere ...
    spans = machines[machines > 1]
    # ... only where a fabric joins them, within max_cluster_units
    assert (multi["offering"].map(O["fabric"]) != "none").all()
    limit = multi["offering"].map(O["max_cluster_units"]).fillna(np.inf)
    assert (spans <= limit).all()
    # single-GPU VMs and marketplace hosts are never joined into a cluster
    assert not multi["offering"].map(O["gpus_per_unit"]).eq(1).any()
