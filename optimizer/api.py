"""gpuopt from Python: the commands as functions that return objects with DataFrames.

Each function does what its command does and returns what the command
prints, as an object: tables are pandas DataFrames and ``to_json()`` gives
the command's ``--format json`` text (docs/json-format.md).

Overrides are the command line's ``--set PATH=VALUE`` strings (``sets``),
``--scale SELECTOR:FACTOR`` strings (``scales``), or keyword arguments: a
keyword's value is written as YAML, and ``__`` in its name stands for the
dot of a path, so ``catalog=["default"], allow__buy=True`` is
``--set 'catalog=[default]' --set allow.buy=true``. A path a keyword cannot
spell (``offerings[aws-p5].price_per_hour``) goes in ``overrides`` as a
mapping. Bad input raises :class:`optimizer.errors.InputError` naming the
file, field and value; a solve never raises on its outcome (see
``Plan.status``).

Example
-------
>>> from optimizer import load_problem, solve
>>> plan = solve("problems/q3.yaml", time_limit=60)        # doctest: +SKIP
>>> plan.status.value, round(plan.objective)               # doctest: +SKIP
('optimal', 89684)
>>> plan.by_pricing()                                      # a DataFrame  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .vocabulary import DEFAULT_SOLVER

if TYPE_CHECKING:
    import numpy as np

    from .load import Problem
    from .model.mip import NamedPoint
    from .plan import Plan

# pandas, the model and the solvers are imported by the function that needs them: ``import optimizer`` (and so
# every command line, ``gpuopt --help`` included) stays light

__all__ = ["estimate_inference", "estimate_training", "load_problem", "rentbuy", "scenarios", "solve", "sweep",
           "whatif"]


def _set_strings(sets, overrides: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> list[str]:
    """``--set`` strings: ``sets`` as given, then ``overrides`` and keyword arguments as PATH=YAML."""
    out = [str(s) for s in (sets or ())]
    for path, value in [*(overrides or {}).items(), *((k.replace("__", "."), v) for k, v in kwargs.items())]:
        out.append(f"{path}={json.dumps(value)}")  # JSON is YAML: strings quoted, lists and mappings in flow
    return out


def load_problem(path: str | Path, *, sets=(), scales=(), overrides: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> Problem:
    """Read, overlay and validate a problem file (what every command does first).

    Parameters
    ----------
    path
        The problem YAML file.
    sets, scales
        ``--set`` and ``--scale`` strings, applied in order to a copy of the file's data.
    overrides, **kwargs
        More ``--set`` overrides as PATH → value (see the module docstring).
    """
    from .load import load_problem as _load_problem

    return _load_problem(path, sets=_set_strings(sets, overrides, kwargs), scales=list(scales))


def _problem(problem: str | Path | Problem, sets, scales, overrides, kwargs) -> Problem:
    from .load import Problem

    if isinstance(problem, Problem):
        if sets or scales or overrides or kwargs:
            raise TypeError("overrides apply to a problem file; pass its path, or load_problem(path, ...) first")
        return problem
    return load_problem(problem, sets=sets, scales=scales, overrides=overrides, **kwargs)


def solve(problem: str | Path | Problem, *, solver: str = DEFAULT_SOLVER, time_limit: float | None = None,
          gap: float = 1e-6, threads: int | None = None, sets=(), scales=(),
          overrides: Mapping[str, Any] | None = None, workers: int = 1, executor: str = "local",
          scheduler: str | None = None, known: Sequence[Plan | NamedPoint | np.ndarray] = (), **kwargs: Any) -> Plan:
    """The cheapest plan, audited: ``gpuopt solve``.

    Returns a :class:`~optimizer.plan.Plan`: ``status``, ``objective``,
    ``result`` (bound, gap, times), the tables ``commitments``,
    ``inference``, ``routing``, ``training``, ``training_summary``,
    ``starts``, ``usage``, ``ledger`` (DataFrames), ``by_pricing()``,
    ``by_workload()``, ``audit`` and ``to_json()``. With ``workers > 1`` or
    ``executor="dask"`` (``scheduler``: a cluster's address), the exact
    split's leaves run there side by side and the periods are also solved
    apart there for a bound (``result.decomposition_bound``).

    ``known``: plans already in hand: an earlier :class:`Plan` of a similar
    problem (the same one at other prices, with an offering more, ...) or
    its ``point()``, read in this problem's model by what each variable
    stands for (a variable it lacks is 0); or a vector of this model's
    columns. Each that meets every row of this problem's model is a first
    plan for the search, which then looks only for cheaper ones; the result
    is never dearer than the cheapest of them. One that breaks a row is
    ignored.

    A problem that differs from one solved before in this process only in
    prices (the same file with another price, a price overlay) is not built
    again: the model built then is re-priced (the same model to the bit, in
    a fraction of the time; docs/performance.md, "Re-priced models"). The
    process keeps the models of the last two problem structures.
    """
    from .executors import solve_executor
    from .model.reprice import models_of_structure
    from .pipeline import run

    pr = _problem(problem, sets, scales, overrides, kwargs)
    with solve_executor(executor, workers, scheduler) as pool:
        return run(pr, solver=solver, time_limit=time_limit, gap=gap, threads=threads, executor=pool,
                   known=[p for p in map(_known, known) if p is not None],
                   models=models_of_structure(pr))


def _known(k: Plan | NamedPoint | np.ndarray) -> NamedPoint | np.ndarray | None:
    """A known plan as the pipeline takes it: a Plan by name (None without a plan), a point as it is."""
    import numpy as np

    from .model.mip import NamedPoint
    from .plan import Plan

    if isinstance(k, Plan):
        return k.point()
    return k if isinstance(k, NamedPoint) else np.asarray(k, float)


def whatif(problem: str | Path, *, sets=(), scales=(), overrides: Mapping[str, Any] | None = None,
           solver: str = DEFAULT_SOLVER, time_limit: float | None = None, gap: float = 1e-6,
           threads: int | None = None, **kwargs: Any):
    """The problem solved as it is and as changed: ``gpuopt whatif PROBLEM --set ...``.

    Returns a :class:`~optimizer.studies.whatif.WhatIf` with ``base`` and
    ``scenario`` (Plans), ``delta`` and ``to_json()``. A scenario that
    changes only prices re-prices the base's model (as :func:`solve` does).
    """
    from .studies.whatif import Change, build, overlay, read_raw, solve_change

    file = str(problem)
    raw = read_raw(problem)
    set_list = _set_strings(sets, overrides, kwargs)
    new_raw = overlay(raw, file, set_list, list(scales))
    return solve_change(Change("scenario", set_list, list(scales)), build(raw, file), build(new_raw, file),
                        solver=solver, time_limit=time_limit, gap=gap, threads=threads)


def scenarios(problem: str | Path, *, scenario_file: str | Path | None = None, solver: str = DEFAULT_SOLVER,
              time_limit: float | None = None, gap: float = 1e-6, threads: int | None = None, workers: int = 1,
              executor: str = "local", scheduler: str | None = None):
    """The base and every named scenario side by side: ``gpuopt whatif PROBLEM [--scenarios FILE]``.

    The scenarios are the problem file's ``scenarios:`` and those of
    ``scenario_file``. Returns a :class:`~optimizer.studies.whatif.SideBySide`:
    ``rows`` (one dict per scenario, the base first, as the JSON's),
    ``frame()`` (a DataFrame: name, status, objective, bound, gap, total
    cost, cost per pricing kind, mix, audit violations) and ``to_json()``.
    A problem with no scenarios is an input error.
    """
    from .errors import InputError
    from .studies.whatif import read_raw, scenarios as named_scenarios, solve_scenarios

    file = str(problem)
    raw = read_raw(problem)
    named = named_scenarios(raw, file, None if scenario_file is None else str(scenario_file))
    if not named:
        raise InputError("the problem has no scenarios", file=file, field="scenarios",
                         allowed="a `scenarios:` section in the problem file, or scenario_file")
    return solve_scenarios(raw, file, named, solver=solver, time_limit=time_limit, gap=gap, threads=threads,
                           workers=workers, executor=executor, scheduler=scheduler)


def sweep(problem: str | Path, vary=(), vary_scale=(), *, sets=(), scales=(),
          overrides: Mapping[str, Any] | None = None, solver: str = DEFAULT_SOLVER,
          time_limit: float | None = None, gap: float = 1e-6, threads: int | None = None, workers: int = 1,
          executor: str = "local", scheduler: str | None = None, every_point: bool = False, **kwargs: Any):
    """Solve at every point of a grid: ``gpuopt sweep PROBLEM --vary ... --vary-scale ...``.

    ``vary`` and ``vary_scale`` take the options' strings (one or two in
    all). Returns a :class:`~optimizer.studies.sweep.Sweep` with
    ``points``, ``break_points``, ``frame()`` (a DataFrame) and ``to_json()``.
    """
    from .studies.sweep import parse_vary, parse_vary_scale, run_sweep

    vary = [vary] if isinstance(vary, str) else list(vary)
    vary_scale = [vary_scale] if isinstance(vary_scale, str) else list(vary_scale)
    dims = [parse_vary(v) for v in vary] + [parse_vary_scale(v) for v in vary_scale]
    if not 1 <= len(dims) <= 2:
        raise ValueError(f"a sweep has one or two dimensions; got {len(dims)}")
    return run_sweep(problem, dims, sets=_set_strings(sets, overrides, kwargs), scales=list(scales), solver=solver,
                     time_limit=time_limit, gap=gap, threads=threads, workers=workers, executor=executor,
                     scheduler=scheduler, every_point=every_point)


def rentbuy(problem: str | Path | Problem, *, solver: str = DEFAULT_SOLVER, time_limit: float | None = None,
            gap: float = 1e-6, threads: int | None = None, break_even: bool = True, sensitivity: bool = True,
            step: float = 0.2, offerings=(), rentals=(), sets=(), scales=(),
            overrides: Mapping[str, Any] | None = None, workers: int = 1, executor: str = "local",
            scheduler: str | None = None, **kwargs: Any):
    """Rent versus buy: ``gpuopt rentbuy``.

    Returns a :class:`~optimizer.studies.rentbuy.RentBuy` (strategies,
    break-even, utilisation, cash flows, sensitivity as DataFrames, the
    plans of each strategy) with ``tables()`` (every table by name) and
    ``to_json()``. With ``workers > 1`` or ``executor="dask"`` the solves
    run side by side (the same tables).
    """
    from .executors import share_cpus, solve_executor
    from .studies.rentbuy import analyse

    pr = _problem(problem, sets, scales, overrides, kwargs)
    threads, lend = share_cpus(threads, workers, executor, scheduler)
    with solve_executor(executor, workers, scheduler, lend) as pool:
        return analyse(pr, solver=solver, time_limit=time_limit, gap=gap, threads=threads,
                       do_break_even=break_even, do_sensitivity=sensitivity, step=step, offerings=list(offerings),
                       rentals=list(rentals), executor=pool)


def _reference(efficiency: Mapping[str, float] | None):
    from .sizing import load_efficiency, load_gpus, load_models

    return load_models(), load_gpus(), load_efficiency(dict(efficiency or {}))


def estimate_inference(model: str, gpu: str, gpus: int = 1, *, precision: str = "bf16", prompt_tokens: int = 1024,
                       output_tokens: int = 256, ttft_ms: float | None = None, tpot_ms: float | None = None,
                       percentile: float | str = 99.0, rps: float | None = None, concurrency: int | None = None,
                       efficiency: Mapping[str, float] | None = None, layout: str = "best") -> dict:
    """One inference replica of ``gpus`` GPUs under a load: ``gpuopt estimate inference`` (a dict of its fields).

    ``rps`` (Poisson arrivals) or ``concurrency`` (requests in flight) set the
    load; without either, the most requests/s meeting the SLOs at
    ``percentile`` (or ``"mean"``), or the knee of the throughput curve
    without SLOs. ``layout``: ``tp``, ``dep`` (attention data parallel +
    expert parallel, MoE models on 2+ GPUs) or ``best`` (the result's
    ``layout`` names the one used).
    """
    from .sizing import estimate_inference as _est, resolve_gpu, resolve_model

    models, gpu_table, eff = _reference(efficiency)
    return _est(resolve_model(model, models, field="model"), resolve_gpu(gpu, gpu_table, field="gpu"), gpus,
                precision.lower(), prompt_tokens, output_tokens, eff, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                percentile=percentile, rps=rps, concurrency=concurrency, layout=layout)


def estimate_training(model: str, gpu: str, gpus: int, tokens: float, *, precision: str = "bf16",
                      gpus_per_node: int | None = None, fabric_gbps: float | None = None,
                      method: str = "full", lora_rank: int = 16, framework: str = "any",
                      efficiency: Mapping[str, float] | None = None) -> dict:
    """A training run: ``gpuopt estimate training`` (a dict: fits, hours, tokens_per_s, mfu, layout, ...)."""
    from .sizing import estimate_training as _est, resolve_gpu, resolve_model
    from .sizing.training import Network, default_network

    models, gpu_table, eff = _reference(efficiency)
    base = default_network(gpus, eff)
    net = Network(gpus_per_node or base.gpus_per_node, fabric_gbps or base.fabric_gbps_per_gpu)
    return _est(resolve_model(model, models, field="model"), resolve_gpu(gpu, gpu_table, field="gpu"), gpus,
                precision.lower(), float(tokens), eff, net, method, lora_rank, framework)
