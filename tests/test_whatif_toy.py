"""A tiny problem shared by the what-if, sweep and overlay tests (solves in well under a second)."""

# imported as `from test_whatif_toy import TOY, toy, write` by test_overlay.py, test_whatif.py, test_sweep.py

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

TOY = {
    "name": "toy",
    "periods": [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 100, "month": 1}],
    "offerings": [
        {"id": "od", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "on_demand",
         "price_per_hour": 80},
        {"id": "res", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "reserved",
         "price_per_hour": 50, "term_months": 12},
        {"id": "spot", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "spot",
         "price_per_hour": 45, "max_units": 1},
        {"id": "l4", "gpu": "L4", "gpus_per_unit": 1, "region": "r1", "pricing": "on_demand",
         "price_per_hour": 1.2},
    ],
    "inference": [
        {"name": "chat", "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 200,
         "demand_rps": {"p1": 10, "p2": 3}, "spot": True,
         "profiles": [{"gpu": "H100-SXM", "gpus": 2, "rps": 1.0}]},
        {"name": "small", "model": "llama-3.1-8b", "prompt_tokens": 500, "output_tokens": 100, "demand_rps": 4,
         "profiles": [{"gpu": "L4", "gpus": 1, "rps": 0.5}, {"gpu": "H100-SXM", "gpus": 1, "rps": 5.0}]},
    ],
}


def toy(**changes) -> dict:
    data = copy.deepcopy(TOY)
    data.update(changes)
    return data


def write(tmp_path: Path, data, name: str = "toy.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return p


def test_toy_solves_to_its_known_optimum(tmp_path):
    from optimizer.load import load_problem
    from optimizer.pipeline import run

    plan = run(load_problem(write(tmp_path, TOY)))
    # chat p1: 10 replicas of 2 GPUs = 20 GPUs: 1 reserved unit (3 replicas + small's replica, both periods),
    # 1 spot unit (4 replicas, p1), 1 on-demand unit (3 replicas, p1)
    assert plan.objective == pytest.approx(22_500)
