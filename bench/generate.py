"""Realistic gpuopt problems at any scale, for the benchmark and the tests.

Usage::

    python bench/generate.py --scale 1 --seed 0 -o /tmp/x1.yaml

Reference size (``scale=1``): 40 inference services (about a third with
request buckets, the rest single-size), 12 training jobs, 8 GPU types,
2 providers × 3 regions × {on-demand, spot, reserved} plus an owned data
centre (``dc1``, with existing servers, so the objective has a constant),
26 weekly periods over 6 months. ``scale`` multiplies the number of
services and jobs and the cloud quotas; the offering catalogue keeps its
shape. Every workload has measured ``profiles``, so no sizing runs.

Topology: the training GPU types' cloud nodes are joined by a fabric
(AWS: EFA, 400 Gb/s per GPU, as on p4d/p5; GCP: RoCE at 200 Gb/s per GPU)
over at most 32 nodes; the owned servers share an InfiniBand fabric
(400 Gb/s per GPU) across the hall; the inference-only types stand alone
(``fabric: none``). The figures are representative, not a price list.

The catalogue holds a few *identical* offerings on purpose (a second
instance family at the same price, without its own quota, for the
inference-only GPU types: it absorbs its capped twin), and every service
has fp8/bf16 variants of some configurations, some of them dominated, so
the presolve reductions have work to do.

Python use::

    from bench.generate import generate, problem
    data = generate(scale=0.25, seed=1)   # the problem-file mapping (YAML-ready)
    pr = problem(scale=0.25, seed=1)      # a validated optimizer.load.Problem
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: name, VRAM GB, relative speed per GPU, GPUs per unit, on-demand $ per GPU-hour
GPUS = [
    ("T4", 16, 0.25, 4, 0.45),
    ("L4", 24, 0.45, 8, 0.75),
    ("A10G", 24, 0.5, 4, 1.00),
    ("L40S", 48, 1.1, 4, 1.60),
    ("A100-80GB", 80, 1.6, 8, 2.80),
    ("H100-SXM", 80, 3.0, 8, 4.20),
    ("H200", 141, 3.8, 8, 5.50),
    ("MI300X", 192, 2.8, 8, 3.60),
]
#: GPU types a training job may use (the others are inference-only)
TRAIN_GPUS = ["L40S", "A100-80GB", "H100-SXM", "H200", "MI300X"]
#: model, parameters (billions)
MODELS = [
    ("llama-3.1-8b", 8), ("mistral-7b", 7), ("qwen2.5-7b", 7), ("llama-2-13b", 13),
    ("mixtral-8x7b", 47), ("llama-3.1-70b", 70), ("qwen2.5-72b", 72), ("mixtral-8x22b", 141),
]
PROVIDERS = {"aws": (["aws-east", "aws-west", "aws-eu"], 1.0), "gcp": (["gcp-east", "gcp-west", "gcp-eu"], 1.08)}
#: fabric between a provider's nodes of a training GPU type: kind, Gb/s per GPU, most nodes per cluster
FABRIC = {"aws": ("efa", 400, 32), "gcp": ("roce", 200, 32)}
REGION_FACTOR = [1.0, 1.04, 1.12]
WEEKS = 26
#: owned servers in dc1: gpu, existing units, max units, capex per 8-GPU-ish unit
OWNED = [("H100-SXM", 2, 24, 260_000), ("A100-80GB", 4, 12, 120_000), ("L40S", 0, 24, 60_000)]
BYTES = {"bf16": 2.0, "fp8": 1.0}


def _r(x: float, nd: int = 4) -> float:
    return float(round(x, nd))


def periods(weeks: int = WEEKS) -> list[dict]:
    return [{"name": f"w{w + 1:02d}", "hours": 168, "month": int(w * 12 / 52)} for w in range(weeks)]


def offerings(scale: float, rng: np.random.Generator, n_regions: int = 3) -> list[dict]:
    q = max(1.0, scale)
    out = []
    for prov, (regions, pf) in PROVIDERS.items():
        for ri, region in enumerate(regions[:n_regions]):
            for gpu, _vram, _speed, G, price in GPUS:
                if rng.random() < 0.15 and gpu not in ("H100-SXM", "L4"):
                    continue  # not every GPU type is offered in every region
                od = price * G * pf * REGION_FACTOR[ri] * float(rng.uniform(0.97, 1.03))
                big = gpu in ("H100-SXM", "H200", "MI300X", "A100-80GB")
                cap = int(math.ceil((rng.integers(8, 24) if big else rng.integers(16, 64)) * q))
                base = f"{prov}-{region.split('-')[1]}-{gpu.lower()}"
                fabric, gbps, most = FABRIC[prov]
                topo = ({"fabric": fabric, "fabric_gbps_per_gpu": gbps, "max_cluster_units": most}
                        if gpu in TRAIN_GPUS else {"fabric": "none"})
                out.append({"id": f"{base}-od", "gpu": gpu, "gpus_per_unit": G, "region": region,
                            "pricing": "on_demand", "price_per_hour": _r(od), "max_units": cap,
                            "provider": prov, **topo})
                out.append({"id": f"{base}-spot", "gpu": gpu, "gpus_per_unit": G, "region": region,
                            "pricing": "spot", "price_per_hour": _r(od * float(rng.uniform(0.35, 0.5))),
                            "interruptions_per_hour": _r(float(rng.uniform(0.005, 0.05)), 5),
                            "max_units": max(1, cap // 2), "provider": prov, **topo})
                out.append({"id": f"{base}-1y", "gpu": gpu, "gpus_per_unit": G, "region": region,
                            "pricing": "reserved", "price_per_hour": _r(od * float(rng.uniform(0.55, 0.65))),
                            "term_months": 12, "max_units": cap, "provider": prov, **topo})
                if gpu in ("T4", "L4", "A10G") and ri == 0:
                    # a second instance family at the same price, without a quota of its own (absorbs the first)
                    twin = {**out[-3], "id": f"{base}-od-b"}
                    twin.pop("max_units")
                    out.append(twin)
    for gpu, existing, cap, capex in OWNED:
        G = dict((g[0], g[3]) for g in GPUS)[gpu]
        out.append({"id": f"dc1-{gpu.lower()}-owned", "gpu": gpu, "gpus_per_unit": G, "region": "dc1",
                    "pricing": "owned", "capex": capex, "lifetime_years": 4, "residual_fraction": 0.15,
                    "power_kw": _r(0.7 * G + 1.5), "idle_power_fraction": 0.3, "pue": 1.3,
                    "electricity_per_kwh": 0.09, "fixed_per_month": 150 * G, "existing_units": existing,
                    "max_units": int(math.ceil(cap * q)), "fabric": "infiniband", "fabric_gbps_per_gpu": 400,
                    "max_cluster_units": int(math.ceil(cap * q))})
    return out


def _configs(params: float, rng: np.random.Generator, precisions: list[str], n_gpu_types: int):
    """(gpu, gpus, precision, speed factor) a model fits on, for a random subset of GPU types."""
    names = [g[0] for g in GPUS]
    pick = rng.choice(len(GPUS), size=min(n_gpu_types, len(GPUS)), replace=False)
    # H100 is offered in every region, so every service can be served wherever it may run
    pick = np.union1d(pick, [names.index("H100-SXM")])
    out = []
    for i in sorted(pick):
        gpu, vram, speed, G, _ = GPUS[i]
        for prec in precisions:
            need = params * BYTES[prec] * 1.35  # weights + KV headroom, GB
            n = 1
            while n * vram < need and n < G:
                n *= 2
            if n * vram < need:
                continue
            for gpus in ([n, 2 * n] if 2 * n <= G and rng.random() < 0.4 else [n]):
                out.append((names[i], gpus, prec, speed))
    return out


def services(scale: float, rng: np.random.Generator, period_names: list[str], n_regions: int = 3) -> list[dict]:
    n = max(1, int(round(40 * scale)))
    out = []
    for k in range(n):
        model, params = MODELS[int(rng.integers(len(MODELS)))]
        precisions = ["fp8", "bf16"] if rng.random() < 0.6 else ["bf16"]
        cfgs = _configs(params, rng, precisions, int(rng.integers(3, 6)))
        if not cfgs:
            precisions = ["fp8"]
            cfgs = _configs(params, rng, precisions, len(GPUS))
        bucketed = rng.random() < 0.35
        buckets = None
        if bucketed:
            nb = int(rng.integers(2, 4))
            shares = rng.dirichlet(np.ones(nb) * 3)
            shares = np.round(shares / shares.sum(), 3)
            shares[-1] = round(1.0 - shares[:-1].sum(), 3)
            buckets = [{"name": f"b{b}", "prompt_tokens": int(300 * 4 ** b), "output_tokens": int(150 + 100 * b),
                        "share": float(shares[b])} for b in range(nb)]
        profiles = []
        for gpu, gpus, prec, speed in cfgs:
            # throughput per replica: faster GPUs, more GPUs (sub-linear), fp8 usually faster
            base = 60.0 * speed * gpus ** 0.85 / params
            pf = float(rng.uniform(1.2, 1.6)) if prec == "fp8" else 1.0
            if prec == "fp8" and rng.random() < 0.15:
                pf = float(rng.uniform(0.85, 0.98))  # an fp8 kernel that is slower here
            if buckets is None:
                profiles.append({"gpu": gpu, "gpus": gpus, "precision": prec,
                                 "rps": _r(base * pf * float(rng.uniform(0.9, 1.1)))})
            else:
                for b, bk in enumerate(buckets):
                    vram = dict((g[0], g[1]) for g in GPUS)[gpu]
                    if b == len(buckets) - 1 and b >= 2 and gpus * vram < params * BYTES[prec] * 2.5:
                        continue  # long prompts do not fit the KV cache
                    profiles.append({"gpu": gpu, "gpus": gpus, "precision": prec, "bucket": bk["name"],
                                     "rps": _r(base * pf / (1 + 1.5 * b) * float(rng.uniform(0.9, 1.1)))})
        if buckets is not None:  # every bucket needs a configuration: the longest one goes to the biggest
            served = {p["bucket"] for p in profiles}
            for bk in buckets:
                if bk["name"] not in served:
                    top = max(profiles, key=lambda p: p["gpus"] * dict((g[0], g[1]) for g in GPUS)[p["gpu"]])
                    profiles.append({**top, "bucket": bk["name"], "rps": _r(top["rps"] / 3)})
        typical = float(np.median([p["rps"] for p in profiles]))
        level = typical * float(rng.uniform(2, 30))
        growth = float(rng.uniform(0.0, 0.03))
        launch = int(rng.integers(0, max(1, len(period_names) // 2))) if rng.random() < 0.15 else 0
        demand = {}
        for w, p in enumerate(period_names):
            d = 0.0 if w < launch else level * (1 + growth) ** w * float(rng.uniform(0.9, 1.1))
            demand[p] = _r(d, 3)
        r = rng.random()
        if r < 0.5:
            regions = None
        elif r < 0.75:
            prov = list(PROVIDERS)[int(rng.integers(2))]
            regions = list(PROVIDERS[prov][0][:n_regions]) + (["dc1"] if rng.random() < 0.5 else [])
        else:
            regions = [regs[min(2, n_regions - 1)] for regs, _ in PROVIDERS.values()]  # EU data residency
        svc = {"name": f"svc{k:03d}", "model": model, "precisions": precisions,
               "demand_rps": demand, "spot": bool(rng.random() < 0.3), "min_replicas": int(rng.integers(1, 3)),
               "profiles": profiles}
        if buckets is None:
            svc["prompt_tokens"] = int(rng.integers(200, 4000))
            svc["output_tokens"] = int(rng.integers(100, 600))
        else:
            svc["requests"] = buckets
        if regions is not None:
            svc["regions"] = regions
        out.append(svc)
    return out


def _profiles(gpus_picked: list[str], fallback: str, sizes: tuple[int, ...], work: float, window_h: float,
              speed: dict) -> list[dict]:
    """Measured-style profiles of a job: hours on each picked GPU type and cluster size that finish
    within 95 % of the window (work in H100-GPU-hours, 0.93 efficiency per doubling beyond 8 GPUs);
    if none does, the largest cluster of ``fallback`` capped at 90 % of the window."""
    profiles = []
    for g in gpus_picked:
        for gpus in sizes:
            eff = 0.93 ** math.log2(gpus / 8)
            hours = work * 3.0 / speed[g] / (gpus * eff)
            if hours <= window_h * 0.95:
                profiles.append({"gpu": g, "gpus": gpus, "hours": _r(hours, 2)})
    if not profiles:
        n = sizes[-1]
        hours = min(window_h * 0.9, work * 3.0 / speed[fallback] / n)
        profiles.append({"gpu": fallback, "gpus": n, "hours": _r(hours, 2)})
    return profiles


def jobs(scale: float, rng: np.random.Generator, P: list[dict]) -> list[dict]:
    n = max(1, int(round(12 * scale)))
    speed = dict((g[0], g[2]) for g in GPUS)
    vram = dict((g[0], g[1]) for g in GPUS)
    last_month = max(p["month"] for p in P)
    out = []
    for k in range(n):
        model, params = MODELS[int(rng.choice([0, 1, 3, 4, 5]))]
        start = int(rng.integers(0, max(1, last_month - 1)))
        deadline = min(last_month, start + int(rng.integers(0, 3)))
        window_h = sum(p["hours"] for p in P if start <= p["month"] <= deadline)
        gpu_types = [g for g in TRAIN_GPUS if vram[g] * 8 >= params * 16 / 4]  # ZeRO-3 across 8+ GPUs
        pick = rng.choice(len(gpu_types), size=min(len(gpu_types), int(rng.integers(2, 4))), replace=False)
        # work in H100-GPU-hours; about a quarter to two thirds of the window on 16 H100s
        work = 16 * window_h * float(rng.uniform(0.25, 0.65))
        profiles = _profiles([gpu_types[i] for i in sorted(pick)], gpu_types[int(pick[0])], (8, 16, 32, 64), work,
                             window_h, speed)
        out.append({"name": f"job{k:03d}", "model": model, "tokens": float(work * 1e6),
                    "start_month": start, "deadline_month": deadline, "spot": bool(rng.random() < 0.5),
                    "checkpoint_minutes": 30, "cluster_gpus": [8, 16, 32, 64], "profiles": profiles})
    return out


def large_jobs(scale: float, rng: np.random.Generator, P: list[dict]) -> list[dict]:
    """The training-heavy family's jobs: 2 × 12 × scale jobs of 32–256 GPUs with windows of 1–2 months.

    Each job's work is a third to two thirds of its window on 64 H100s
    (in H100-GPU-hours), so most need a large cluster for much of the window.
    """
    n = max(1, int(round(24 * scale)))
    speed = dict((g[0], g[2]) for g in GPUS)
    vram = dict((g[0], g[1]) for g in GPUS)
    last_month = max(p["month"] for p in P)
    out = []
    for k in range(n):
        model, params = MODELS[int(rng.choice([3, 4, 5, 6, 7]))]
        length = int(rng.integers(1, 3))  # months in the window
        start = int(rng.integers(0, max(1, last_month - length + 2)))
        deadline = min(last_month, start + length - 1)
        window_h = sum(p["hours"] for p in P if start <= p["month"] <= deadline)
        gpu_types = [g for g in TRAIN_GPUS if vram[g] * 32 >= params * 16 / 2]
        pick = rng.choice(len(gpu_types), size=min(len(gpu_types), int(rng.integers(2, 4))), replace=False)
        work = 64 * window_h * float(rng.uniform(0.33, 0.66))
        profiles = _profiles([gpu_types[i] for i in sorted(pick)], gpu_types[int(pick[0])], (32, 64, 128, 256),
                             work, window_h, speed)
        out.append({"name": f"big{k:03d}", "model": model, "tokens": float(work * 1e6),
                    "start_month": start, "deadline_month": deadline, "spot": bool(rng.random() < 0.3),
                    "checkpoint_minutes": 30, "cluster_gpus": [32, 64, 128, 256], "profiles": profiles})
    return out


#: benchmark families (bench/run.py --family)
FAMILIES = ("standard", "training-heavy", "catalog-wide")


def generate(scale: float = 1.0, seed: int = 0, objective: str = "cost", weeks: int = WEEKS,
             regions: int = 3, family: str = "standard") -> dict:
    """A problem-file mapping at ``scale`` (×1 = the reference size).

    ``weeks`` (periods) and ``regions`` (per provider) shrink it for tests.
    ``family``: ``standard`` (the reference mix), ``training-heavy`` (the
    same services and offerings, with :func:`large_jobs` instead of
    :func:`jobs`), or ``catalog-wide`` (``problems/q3.yaml`` against the
    whole default catalog, demand × ``scale``; ``weeks``, ``regions`` and
    ``seed`` do not apply).
    """
    if family == "catalog-wide":
        return catalog_wide(scale)
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; one of {', '.join(FAMILIES)}")
    rng = np.random.default_rng([seed, int(round(scale * 1000)), weeks, regions])
    P = periods(weeks)
    heavy = family == "training-heavy"
    return {
        "name": f"bench-{family}-x{scale:g}-s{seed}",
        "currency": "USD",
        "periods": P,
        "offerings": offerings(scale, rng, regions),
        "inference": services(scale, rng, [p["name"] for p in P], regions),
        "training": large_jobs(scale, rng, P) if heavy else jobs(scale, rng, P),
        "finance": {"objective": objective, "discount_rate": 0.08},
    }


def catalog_wide(scale: float) -> dict:
    """``problems/q3.yaml`` with ``catalog: [default]`` and every service's demand × ``scale``."""
    from optimizer.yamlio import read_yaml

    data = read_yaml(ROOT / "problems" / "q3.yaml")
    data["catalog"] = ["default"]
    data["name"] = f"bench-catalog-wide-x{scale:g}"
    for s in data.get("inference", []):
        d = s.get("demand_rps")
        if isinstance(d, dict):
            s["demand_rps"] = {k: v * scale for k, v in d.items()}
        elif d is not None:
            s["demand_rps"] = d * scale
    return data


def problem(scale: float = 1.0, seed: int = 0, objective: str = "cost", data: dict | None = None,
            weeks: int = WEEKS, regions: int = 3, family: str = "standard"):
    """A validated :class:`optimizer.load.Problem`, built in memory (no file)."""
    from optimizer.load import build_problem, parse_problem_file

    data = data if data is not None else generate(scale, seed, objective, weeks, regions, family)
    file = f"<generated {family} x{scale:g} seed {seed}>"
    spec = parse_problem_file(data, file)
    return build_problem(spec, file, ROOT / "problems")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # the shape flags default to None so that one given to the catalog-wide family, which has its own shape, is
    # an error rather than silently ignored; one not given takes generate()'s own default
    default = {k: p.default for k, p in inspect.signature(generate).parameters.items()}
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None, help=f"default {default['seed']}")
    ap.add_argument("--objective", choices=["cost", "npv"], default=None, help=f"default {default['objective']}")
    ap.add_argument("--weeks", type=int, default=None, help=f"default {default['weeks']}")
    ap.add_argument("--regions", type=int, default=None, choices=[1, 2, 3], help=f"default {default['regions']}")
    ap.add_argument("--family", choices=FAMILIES, default="standard")
    ap.add_argument("-o", "--output", required=True, help="problem YAML to write")
    args = ap.parse_args(argv)
    shape = {k: getattr(args, k) for k in ("seed", "objective", "weeks", "regions") if getattr(args, k) is not None}
    if args.family == "catalog-wide" and shape:
        given = ", ".join(f"--{k}" for k in shape)
        ap.error(f"{given} cannot be given with --family catalog-wide, which is problems/q3.yaml against the "
                 f"default catalog (its own periods, regions and objective; demand x --scale); allowed with it: "
                 f"--scale and -o")
    import yaml

    data = generate(args.scale, family=args.family, **shape)
    Path(args.output).write_text(yaml.safe_dump(data, sort_keys=False))
    print(f"wrote {args.output}: {len(data['inference'])} services, {len(data['training'])} jobs, "
          f"{len(data['offerings'])} offerings, {len(data['periods'])} periods")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
