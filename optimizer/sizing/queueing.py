"""Latency under load: one replica as a continuous-batching queue.

:meth:`Replica.serve` gives, for every batch size ``c`` (sequences running
together, 1..C_max), the steady-state ``ttft_ms(c)`` of a request admitted
into a batch of ``c``, the ``tpot_ms(c)`` every running sequence sees, and
the completion rate ``rps(c)`` (about ``c / (OSL x TPOT(c))``; TPOT leaves out a
request's own prefill, the rate counts it). This module turns that
curve into latencies at a given load.

Open loop (``rps``, Poisson arrivals at rate lambda)
    The number of requests in the replica, ``n``, is a birth-death chain:
    arrivals at lambda, completions at ``mu(n) = rps(min(n, C_max))``. A
    continuous-batching engine advances every running sequence together, so
    up to C_max it is a processor-sharing server with a load-dependent speed;
    the stationary number in such a server depends on the work per request
    only through its mean (processor-sharing insensitivity), so the chain is
    exact there for any output-length distribution. Requests beyond C_max wait
    first-come first-served; that tail is geometric with ratio
    ``rho = lambda / mu(C_max)``, and the wait of a request that finds the
    batch full is exponential with rate ``mu(C_max) - lambda`` (a geometric
    number of exponential completions), the M/M/1 approximation of the queue
    in front of a full batch. Stable iff ``lambda < mu(C_max)``.

    * An arrival sees the stationary state (Poisson arrivals see time
      averages). With ``n < C_max`` it joins a batch of ``n + 1``:
      ``TTFT = ttft(n + 1)``; otherwise ``TTFT = ttft(C_max) + W``.
    * A token is produced in state ``n`` at rate ``m / TPOT(m)`` with
      ``m = min(n, C_max)``; TPOT statistics are over tokens (mean TPOT over
      tokens equals the mean over requests when every request has the same
      output length; a token-level percentile bounds the request-level one
      from above).

Prefills queue for each other
    The curve's TTFT assumes a new prompt starts its prefill at once. An engine
    with a token budget per step runs a long prompt's prefill nearly alone, so
    prompts that arrive together wait for each other. Prefills are modelled as
    one server in front of the batch: prompts arrive at the load's rate and
    each holds it for ``S = prefill_ms`` (the replica time one prompt's prefill
    takes, compute and all-reduce bytes). The server's utilisation is
    ``rho_p = lambda S`` (always below 1 where the batch is stable: the curve
    charges the same S to every completed request). Its wait is the M/D/1
    one, mean ``rho_p S / (2 (1 - rho_p))`` (Pollaczek-Khinchine with a
    deterministic service); its distribution is approximated by an atom
    ``1 - rho_p`` at zero and an exponential tail of the same mean, which the
    TTFT percentiles convolve with the batch chain. A curve without
    ``prefill_ms`` (a measured profile) has no prefill queue.

Closed loop (``concurrency`` C, each client sends its next request when the
previous one ends)
    With ``C <= C_max`` the batch always holds C: the curve's point C. With
    more, the replica runs at ``rps(C_max)`` and by Little's law each request
    waits ``(C - C_max) / rps(C_max)`` before admission. A prompt queues for
    prefill behind the other ``C - 1`` clients' prompts only: the prefill
    server sees ``rps (C - 1) / C`` (a single client never waits).

Capacity at an SLO
    The rps per replica the planner uses is the largest lambda at which the
    TTFT and TPOT statistics the service asks for (mean or a percentile) meet
    its SLO. More load never lowers either statistic (the chain's state grows
    stochastically with lambda and both curves grow with the batch), so the
    largest such lambda is found by bisection. Without SLOs it is the rate at
    the knee of the throughput curve (:func:`knee`).
"""

from __future__ import annotations

import math

import numpy as np

#: what an SLO statistic may be: the mean or a percentile
MEAN = "mean"


def _prefill_queue(m: dict, lam):
    """Utilisation ``rho`` and tail mean ``theta`` (ms) of the prefill wait at arrival rates ``lam``.

    The wait is 0 with probability ``1 - rho`` and otherwise exponential with
    mean ``theta = S / (2 (1 - rho))``, so its mean is the M/D/1 one,
    ``rho S / (2 (1 - rho))``. ``theta`` is 0 when the curve has no ``prefill_ms``.
    """
    s_ms = float(m.get("prefill_ms", 0.0))
    rho = np.asarray(lam, dtype=float) * s_ms / 1e3
    if np.any(rho >= 1.0):
        raise ValueError(f"prefills alone need {float(np.max(rho)):.3g} of the replica: not a stable load")
    return rho, s_ms / (2.0 * (1.0 - rho))


def _prefill_cdf(x, rho, theta):
    """P(prefill wait <= x ms): an atom 1 - rho at 0, then an exponential tail of mean ``theta``."""
    x = np.asarray(x, dtype=float)
    with np.errstate(over="ignore", divide="ignore"):
        tail = np.where(theta > 0, rho * np.exp(-np.maximum(x, 0.0) / np.where(theta > 0, theta, 1.0)), 0.0)
    return np.where(x < 0, 0.0, 1.0 - tail)


def _wait_plus_prefill_cdf(x, rate, rho, theta):
    """P(E + W <= x ms): E exponential at ``rate`` per second (waiting for room in the batch), W the prefill wait."""
    x = np.maximum(np.asarray(x, dtype=float), 0.0)
    a = rate / 1e3                                   # per ms
    f_e = 1.0 - np.exp(-a * x)
    if np.all(theta <= 0):
        return f_e
    b = 1.0 / np.where(theta > 0, theta, np.inf)
    same = np.isclose(a, b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        hypo = np.where(same, 1.0 - np.exp(-a * x) * (1.0 + a * x),
                        1.0 - (b * np.exp(-a * x) - a * np.exp(-b * x)) / np.where(same, 1.0, b - a))
    return (1.0 - rho) * f_e + rho * hypo


def _ttft_cdf(t, ttft, below, full, rate, rho, theta):
    """P(TTFT <= t ms) under Poisson load: admitted at once (point masses ``below`` at ``ttft``) or after
    an exponential wait for room (mass ``full``), plus the prefill wait. Vectorised over loads (rows)."""
    t = np.asarray(t, dtype=float)[..., None]
    at_once = (below * _prefill_cdf(t - ttft, rho[..., None], theta[..., None])).sum(axis=-1)
    later = full * _wait_plus_prefill_cdf(t[..., 0] - ttft[-1], rate, rho, theta)
    return at_once + later


def _chain(m: dict, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stationary probabilities under each Poisson load in ``lam`` (all below capacity).

    Returns ``below`` (loads x C_max: P(n) for n = 0..C_max-1), ``full``
    (P(n >= C_max) per load) and ``w`` (loads x C_max: the share of tokens
    produced at each batch size 1..C_max, unnormalised).
    """
    mu = np.asarray(m["rps"], dtype=float)
    mu_max = float(mu[-1])
    # log pi(n) = sum_{k<=n} log(lambda / mu(k)) = n log(lambda) - sum_{k<=n} log(mu(k)), pi(0) = 1, n = 0..C_max
    n = np.arange(len(mu) + 1.0)
    logs = np.log(lam)[:, None] * n[None, :] - np.concatenate(([0.0], np.cumsum(np.log(mu))))[None, :]
    logs -= logs.max(axis=1, keepdims=True)
    pi = np.exp(logs)
    full = pi[:, -1] / (1.0 - lam / mu_max)          # n >= C_max: pi(C_max) (1 + rho + rho^2 + ...)
    total = pi[:, :-1].sum(axis=1) + full
    below, full = pi[:, :-1] / total[:, None], full / total
    tpot = np.asarray(m["tpot_ms"], dtype=float)
    batch = np.asarray(m["batch"], dtype=float)
    # state n (1..C_max-1) runs a batch of n, each sequence at 1 / TPOT(n); the full states run C_max
    w = np.zeros_like(below)
    w[:, :-1] = below[:, 1:] * (batch[:-1] / tpot[:-1])[None, :]
    w[:, -1] = full * batch[-1] / tpot[-1]
    return below, full, w


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, q * cum[-1] - 1e-12)])


def _ttft_quantile(ttft: np.ndarray, below: np.ndarray, full: float, rate: float, q: float,
                   rho: float = 0.0, theta: float = 0.0) -> float:
    """The q-quantile of TTFT (ms): the ``t`` where :func:`_ttft_cdf` reaches ``q``, by bisection.

    Without a prefill queue and below the full batch it is one of the ``ttft`` points.
    """
    rho_a, theta_a = np.array([rho]), np.array([theta])
    cdf = lambda t: float(_ttft_cdf(t, ttft, below[None, :], full, rate, rho_a, theta_a)[0])  # noqa: E731
    lo, hi = float(ttft.min()), float(ttft[-1]) + 1e3 / rate + max(theta, 1.0)
    while cdf(hi) < q:
        hi = lo + 2.0 * (hi - lo)
    if cdf(lo) >= q:
        return lo
    for _ in range(200):   # to well below a microsecond on any TTFT scale
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if cdf(mid) >= q else (mid, hi)
        if hi - lo < 1e-9 * max(1.0, hi):
            break
    # a point mass: return its exact value when the quantile lands on one
    near = ttft[np.abs(ttft - hi) < 1e-6 * max(1.0, hi)]
    return float(near[0]) if len(near) else hi


def capacity(m: dict) -> float:
    """Most requests/s the replica completes (its rate with a full batch)."""
    return float(np.asarray(m["rps"], dtype=float)[-1])


def under_rps(m: dict, rps: float, osl: int) -> dict:
    """Latencies under Poisson arrivals at ``rps`` requests/s (the open loop).

    Returns ``ttft_ms``, ``tpot_ms`` (means), ``ttft_ms_p99``, ``tpot_ms_p99``,
    ``output_tokens_per_s`` (achieved: rps x OSL), ``mean_batch`` (running
    sequences), ``queue_ms`` (mean wait before admission) and ``utilisation``
    (rps over capacity). Raises ``ValueError`` when ``rps`` is not below
    capacity (the queue grows without bound).
    """
    mu_max = capacity(m)
    if not 0 < rps < mu_max:
        raise ValueError(f"{rps:g} requests/s is not below the replica's capacity of {mu_max:.4g}")
    below, full, w = (x[0] for x in _chain(m, np.array([float(rps)])))
    ttft = np.asarray(m["ttft_ms"], dtype=float)
    tpot = np.asarray(m["tpot_ms"], dtype=float)
    cmax = len(ttft)
    wait_ms = 1e3 / (mu_max - rps)
    rho, theta = (float(x[0]) for x in _prefill_queue(m, [rps]))
    prefill_wait_ms = rho * theta
    mean_ttft = float(below @ ttft + full * (ttft[-1] + wait_ms)) + prefill_wait_ms
    n = np.arange(cmax)
    return {
        "rps": rps,
        "ttft_ms": mean_ttft,
        "tpot_ms": float((w @ tpot) / w.sum()),
        "ttft_ms_p99": _ttft_quantile(ttft, below, full, mu_max - rps, 0.99, rho, theta),
        "tpot_ms_p99": _weighted_quantile(tpot, w, 0.99),
        "output_tokens_per_s": rps * osl,
        "mean_batch": float(below @ n + full * cmax),
        "queue_ms": float(full * wait_ms) + prefill_wait_ms,
        "utilisation": rps / mu_max,
    }


def at_concurrency(m: dict, concurrency: int, osl: int) -> dict:
    """Latencies with ``concurrency`` requests always in flight (the closed loop); same keys as :func:`under_rps`."""
    batch = np.asarray(m["batch"])
    cmax = int(batch[-1])
    i = min(concurrency, cmax) - 1
    rps = float(m["rps"][i])
    wait_ms = 1e3 * max(0, concurrency - cmax) / rps
    rho, theta = (float(x[0]) for x in _prefill_queue(m, [rps * (concurrency - 1) / concurrency]))
    ttft = float(m["ttft_ms"][i]) + wait_ms
    tpot = float(m["tpot_ms"][i])
    return {"rps": rps, "ttft_ms": ttft + rho * theta, "tpot_ms": tpot,
            "ttft_ms_p99": ttft + closed_prefill_wait_quantile(rho, theta, 0.99), "tpot_ms_p99": tpot,
            "output_tokens_per_s": rps * osl, "mean_batch": float(min(concurrency, cmax)),
            "queue_ms": wait_ms + rho * theta,
            "utilisation": rps / capacity(m)}


def closed_prefill_wait_quantile(rho: float, theta: float, q: float) -> float:
    """The q-quantile (ms) of the prefill wait: 0 within the atom ``1 - rho``, else in the exponential tail."""
    if q <= 1.0 - rho or theta <= 0:
        return 0.0
    return theta * math.log(rho / (1.0 - q))


def meets(m: dict, rps, ttft_ms: float | None, tpot_ms: float | None, statistic: float | str):
    """Whether Poisson load ``rps`` (a number or an array) meets the SLOs at ``statistic``.

    ``statistic`` is ``"mean"`` or a percentile in (0, 100). Vectorised over
    the loads: the chain's probabilities for all of them are one matrix.
    """
    lam = np.atleast_1d(np.asarray(rps, dtype=float))
    mu_max = capacity(m)
    ok = (lam > 0) & (lam < mu_max)
    lam_s = np.where(ok, lam, 0.5 * mu_max)        # any stable rate; masked out by ``ok``
    below, full, w = _chain(m, lam_s)
    ttft = np.asarray(m["ttft_ms"], dtype=float)
    tpot = np.asarray(m["tpot_ms"], dtype=float)
    rate = mu_max - lam_s                            # of the wait of a request that finds the batch full
    rho, theta = _prefill_queue(m, lam_s)
    if statistic == MEAN:
        if ttft_ms is not None:
            ok &= below @ ttft + full * (ttft[-1] + 1e3 / rate) + rho * theta <= ttft_ms
        if tpot_ms is not None:
            ok &= (w @ tpot) / w.sum(axis=1) <= tpot_ms
    else:
        q = float(statistic) / 100.0
        if ttft_ms is not None:
            cdf = _ttft_cdf(np.full(len(lam_s), float(ttft_ms)), ttft, below, full, rate, rho, theta)
            ok &= cdf >= q - 1e-12
        if tpot_ms is not None:
            ok &= w @ (tpot <= tpot_ms).astype(float) >= q * w.sum(axis=1) - 1e-12
    return ok if np.ndim(rps) else bool(ok[0])


def knee(m: dict) -> int:
    """Index of the knee of the throughput curve rps(batch).

    The point farthest above the chord from the first to the last batch,
    both axes scaled to [0, 1] (the "Kneedle" rule of Satopaa et al., 2011):
    past it, more batch buys little throughput for its latency.
    """
    rps = np.asarray(m["rps"], dtype=float)
    if len(rps) <= 2 or rps[-1] <= rps[0]:
        return int(np.argmax(rps))
    x = np.linspace(0.0, 1.0, len(rps))
    y = (rps - rps[0]) / (rps.max() - rps[0])
    return int(np.argmax(y - x))


def max_rps_at_slo(m: dict, ttft_ms: float | None, tpot_ms: float | None, statistic: float | str,
                   rel_tol: float = 2e-3) -> float:
    """Largest Poisson load (requests/s) whose latency statistics meet the SLOs; 0 when none does.

    Without SLOs: the rate at the :func:`knee`.
    """
    if ttft_ms is None and tpot_ms is None:
        return float(np.asarray(m["rps"])[knee(m)])
    hi = capacity(m)
    lo = 0.0
    # the largest load that meets: refine a bracket [lo, hi) on a grid of 24 loads at a time
    # (two rounds give 1/625 of the capacity; the result is a load that meets)
    while hi - lo > rel_tol * capacity(m):
        grid = np.linspace(lo, hi, 26)[1:-1]
        ok = meets(m, grid, ttft_ms, tpot_ms, statistic)
        k = int(np.argmin(ok)) if not ok.all() else len(grid)   # first load that fails (monotone)
        lo, hi = (grid[k - 1] if k > 0 else lo), (grid[k] if k < len(grid) else hi)
    return lo
