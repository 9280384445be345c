"""problems/q3.yaml solved on the shipped default catalog (issue 4): a plan, audited, cheaper than q3 alone."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import assert_audited
from optimizer.load import load_problem
from optimizer.pipeline import run
from optimizer.render.report import to_json

ROOT = Path(__file__).resolve().parent.parent
#: q3 on its own offerings, solved to optimality by HiGHS, CBC and SCIP (docs/performance.md); the
#: catalog only adds offerings, so q3 on ``[default]`` can cost no more and its proven bound is no higher
Q3_OWN_OPTIMUM = 89_673.0196


def test_q3_on_the_default_catalog():
    problem = load_problem(ROOT / "problems" / "q3.yaml", sets=["catalog=[default]"])
    own = set(load_problem(ROOT / "problems" / "q3.yaml").offerings.index)
    assert len(problem.offerings) > 100 + len(own) - 10
    # a time limit keeps the suite short; to optimality it takes about 4 minutes here (docs/catalog.md)
    plan = run(problem, time_limit=25, gap=0.01)
    assert plan.result.status.has_plan, plan.result.message
    assert_audited(plan)
    d = json.loads(to_json(plan))
    assert d["catalog_version"] == (ROOT / "catalogs" / "VERSION").read_text().strip()
    assert d["bound"] <= Q3_OWN_OPTIMUM * (1 + 1e-9)
    assert d["objective"] < Q3_OWN_OPTIMUM  # the catalog's offerings are worth using ...
    used = {r["offering"] for r in d["usage"] if r["units"] > 0}
    assert used - own  # ... and the plan uses some
