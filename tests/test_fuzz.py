"""Fuzzed input never produces a traceback through the real CLI path.

Hypothesis writes random text, random YAML trees and mutated versions of a
valid problem; ``gpuopt solve`` and ``gpuopt validate`` must answer each with
an exit code of the contract (0 plan, 1 infeasible, 2 bad input, 3 solver
failed) and never raise anything but ``SystemExit``.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optimizer.solve.backends import Status
from optimizer.cli import main
from optimizer.cli.solve import exit_code
from conftest import patch_driver

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])

VALID = {
    "name": "fuzz",
    "periods": [{"name": "p1", "hours": 100, "month": 0}, {"name": "p2", "hours": 200, "month": 1}],
    "offerings": [
        {"id": "od", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "on_demand",
         "price_per_hour": 80, "max_units": 4},
        {"id": "sp", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "spot",
         "price_per_hour": 30, "interruptions_per_hour": 0.01},
        {"id": "res", "gpu": "L4", "gpus_per_unit": 4, "region": "r2", "pricing": "reserved",
         "price_per_hour": 5, "term_months": 1, "upfront": 10},
        {"id": "own", "gpu": "H100-SXM", "gpus_per_unit": 8, "region": "r1", "pricing": "owned",
         "capex": 200000, "lifetime_years": 4, "power_kw": 10, "electricity_per_kwh": 0.1,
         "existing_units": 1, "max_units": 2},
    ],
    "inference": [
        {"name": "chat", "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 200,
         "demand_rps": {"p1": 6, "p2": 2}, "min_replicas": 1, "spot": True,
         "profiles": [{"gpu": "H100-SXM", "gpus": 2, "rps": 1.0}]},
        {"name": "buckets", "model": "llama-3.1-8b", "demand_rps": 3, "regions": ["r2"],
         "requests": [{"name": "short", "prompt_tokens": 200, "output_tokens": 100, "share": 0.7},
                      {"name": "long", "prompt_tokens": 4000, "output_tokens": 300, "share": 0.3}],
         "profiles": [{"gpu": "L4", "gpus": 1, "bucket": "short", "rps": 3.0},
                      {"gpu": "L4", "gpus": 1, "bucket": "long", "rps": 0.5}]},
    ],
    "training": [{"name": "ft", "model": "llama-3.1-8b", "tokens": 1e9, "deadline_month": 1, "spot": True,
                  "profiles": [{"gpu": "H100-SXM", "gpus": 8, "hours": 40}]}],
    "constraints": {"budget": 1e7},
}

# analytic sizing: an inline model and GPU type, efficiency overrides, no profiles
SIZED = {
    "name": "fuzz-sized",
    "periods": [{"name": "p0", "hours": 100, "month": 0}],
    "efficiency": {"decode_bw_fraction": 0.6},
    "models": [{"name": "tiny-1b", "aliases": ["Tiny-1B"], "layers": 16, "hidden_size": 2048, "heads": 16,
                "kv_heads": 4, "ffn_size": 8192, "vocab_size": 32000, "tied_embeddings": True,
                "max_context": 8192}],
    "gpus": [{"name": "TestGPU-48", "vendor": "test", "generation": "hopper", "vram_gb": 48, "mem_bw_tbs": 2.0,
              "bf16_dense_tflops": 400, "fp16_dense_tflops": 400, "fp8_dense_tflops": 800,
              "interconnect_gbs": 64}],
    "offerings": [{"id": "tg", "gpu": "TestGPU-48", "gpus_per_unit": 8, "region": "r1", "pricing": "on_demand",
                   "price_per_hour": 20},
                  {"id": "l4", "gpu": "L4", "gpus_per_unit": 1, "region": "r1", "pricing": "on_demand",
                   "price_per_hour": 1}],
    "inference": [{"name": "svc", "model": "tiny-1b", "precisions": ["bf16", "fp8"], "prompt_tokens": 500,
                   "output_tokens": 100, "slo": {"ttft_ms": 500, "tpot_ms": 30}, "demand_rps": 5}],
    "training": [{"name": "job", "model": "Tiny-1B", "tokens": 1e10, "deadline_month": 0,
                  "cluster_gpus": [8, 16]}],
}

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["", "H100-SXM", "on_demand", "owned", "p1", "r1", "chat", "default", "bf16", "1e9", "-1",
                     "0", ".nan", "all", "od"]),
)
TREES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)


def paths(node, prefix=()):
    """Every path into a tree of dicts and lists."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def get(node, path):
    for k in path:
        node = node[k]
    return node


@st.composite
def mutated(draw):
    data = copy.deepcopy(draw(st.sampled_from([VALID, SIZED])))
    for _ in range(draw(st.integers(1, 3))):
        all_paths = [p for p in paths(data) if p]
        if not all_paths:
            break
        path = draw(st.sampled_from(all_paths))
        parent, key = get(data, path[:-1]), path[-1]
        op = draw(st.sampled_from(["replace", "replace", "delete", "tree", "duplicate", "unknown-key", "scale"]))
        if op == "replace":
            parent[key] = draw(SCALARS)
        elif op == "tree":
            parent[key] = draw(TREES)
        elif op == "delete":
            del parent[key]
        elif op == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        elif op == "unknown-key" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(SCALARS)
        elif op == "scale" and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
            parent[key] = parent[key] * draw(st.sampled_from([0, -1, 0.5, 2, 1000, 1e-9]))
    return data


def dump(data) -> str:
    try:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        return repr(data)


def run_cli(text: str, *args: str):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        results = []
        for cmd in (["solve", str(path), "--format", "json", "--time-limit", "20", *args],
                    ["validate", str(path), "--format", "json"]):
            r = CliRunner().invoke(main, cmd, catch_exceptions=True)
            if r.exception is not None and not isinstance(r.exception, SystemExit):
                import traceback

                tb = "".join(traceback.format_exception(r.exception))
                pytest.fail(f"{cmd[0]} raised on input:\n{text}\n{tb}")
            assert r.exit_code in (0, 1, 2, 3), (cmd[0], r.exit_code, r.output, text)
            assert "Traceback" not in r.output
            results.append(r.exit_code)
        solve_code, validate_code = results
        # validate and solve agree on what is bad input
        assert (solve_code == 2) == (validate_code == 2), (solve_code, validate_code, text)
        return results


@pytest.mark.parametrize("data", [VALID, SIZED], ids=["profiles", "sized"])
def test_the_valid_problems_solve(data):
    assert run_cli(dump(data)) == [0, 0]


@SETTINGS
@given(st.text(max_size=300))
def test_random_text(text):
    run_cli(text)


@SETTINGS
@given(TREES)
def test_random_yaml_trees(tree):
    run_cli(dump(tree))


@SETTINGS
@given(mutated())
def test_mutated_valid_problem(data):
    run_cli(dump(data))


@pytest.mark.parametrize("status, code", [(Status.OPTIMAL, 0), (Status.FEASIBLE, 0), (Status.INFEASIBLE, 1),
                                          (Status.TIME_LIMIT, 3), (Status.ERROR, 3)])
def test_exit_codes(status, code):
    # a time limit with a plan is `feasible` (exit 0, the plan printed); without one, `time-limit` (exit 3, as
    # a solver that failed: no plan to print either way)
    assert exit_code(status) == code


def test_no_plan_within_the_limit_exits_3(tmp_path, monkeypatch):
    from optimizer.solve.backends import SolveResult

    patch_driver(monkeypatch, "backend_solve", lambda *a, **k: SolveResult(Status.TIME_LIMIT, "cbc",
                                                                            message="no plan within the limit"))
    p = tmp_path / "p.yaml"
    p.write_text(dump(VALID))
    r = CliRunner().invoke(main, ["solve", str(p), "--time-limit", "1"])
    assert r.exit_code == 3 and "no plan within the limit" in r.stdout  # the table's status line
    r = CliRunner().invoke(main, ["solve", str(p), "--time-limit", "1", "--format", "json"])
    assert r.exit_code == 3 and json.loads(r.stdout)["status"] == "time-limit"


def test_a_solver_that_cannot_start_exits_3(tmp_path, monkeypatch):
    from optimizer.solve.backends import pulp_backend

    def vanished(*a, **k):
        raise FileNotFoundError("cbc binary vanished")

    monkeypatch.setattr(pulp_backend.subprocess, "run", vanished)
    p = tmp_path / "p.yaml"
    p.write_text(dump(VALID))
    r = CliRunner().invoke(main, ["solve", str(p), "--format", "json", "--solver", "cbc"])
    assert not (r.exception and not isinstance(r.exception, SystemExit)), r.exception
    assert r.exit_code == 3 and "cbc binary vanished" in r.stderr
    assert json.loads(r.stdout)["status"] == "error"


def test_a_bug_in_gpuopt_is_never_called_a_solver_failure(tmp_path, monkeypatch):

    def bug(*a, **k):
        raise KeyError("offering")

    patch_driver(monkeypatch, "backend_solve", bug)
    p = tmp_path / "p.yaml"
    p.write_text(dump(VALID))
    r = CliRunner().invoke(main, ["solve", str(p)])
    assert r.exit_code == 4 and "internal error, please report: KeyError" in r.stderr
    assert "solver" not in r.stderr.split("traceback")[0].lower()
    Path(r.stderr.split("the traceback is in ")[1].strip()).unlink()
