"""Post-solve audit: every rule and the objective, recomputed from the plan's rows.

The audit reads only the plan's tables, the problem (its offerings, periods,
workloads and keys) and the candidate tables (rps per replica, hours per job
and link). It shares no formula with :mod:`optimizer.model.formulation` or
:mod:`optimizer.plan`: term blocks, discount factors, spot waste, the units
held in a period, cluster topology and every cost item are computed here
again, in their plainest form, so that a bug in one of those places shows
up as a disagreement instead of being repeated. Any violation means the
model, the plan and the cost semantics disagree; it is a bug.
"""

from __future__ import annotations

import collections
import functools
import math

import pandas as pd

from .load import provider_allowed
from .vocabulary import PAY_PER_HOUR

#: tolerance of every comparison, relative to the size of the numbers compared
TOL = 1e-6
HOURS_PER_MONTH = 730.0
HOURS_PER_YEAR = 8760.0


def _close(a: float, b: float, rel: float = 1e-6, abs_: float = 1e-4) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def _over(a: float, b: float) -> bool:
    """a > b beyond the tolerance."""
    return a > b + TOL * max(1.0, abs(b))


class _Data:
    """The problem's numbers in the form every check below reads them."""

    def __init__(self, plan):
        pr = plan.problem
        self.pr = pr
        P = pr.periods
        # every row by its label as a dict: the checks look fields up one at a time, and a pandas lookup
        # (.at, .loc) costs a hundred times a dictionary's (docs/performance.md, "The audit on dictionaries")
        self.o = _by_label(pr.offerings)
        self.p = _by_label(P)
        self.periods = list(P.index)
        self.services = {s.name: s for s in pr.services}
        self.jobs = {j.name: j for j in pr.jobs}
        self.plan = plan
        self._tables: dict[str, list] = {}  # the plan's tables as rows, by name (rows)
        self.cands = plan.candidates
        self.eff = plan.candidates.efficiency
        self.H = float(P["hours"].sum())
        self.rate = pr.discount_rate
        # the horizon ends a month after the last period's month, or when a long period ends
        self.end_month = max(float(m) + 1.0 for m in P["month"])
        for m, h in zip(P["month"], P["hours"]):
            self.end_month = max(self.end_month, float(m) + float(h) / HOURS_PER_MONTH)

    def rows(self, table: str) -> list:
        """The plan's table ``table`` (``inference``, ``training``, ...) as named tuples (:func:`_rows`), read once
        per audit however many checks read it."""
        if table not in self._tables:
            self._tables[table] = _rows(getattr(self.plan, table))
        return self._tables[table]

    def off(self, oid: str) -> dict:
        return self.o[oid]

    def per_gpu(self, oid: str) -> bool:
        return self.o[oid]["billing"] == "per_gpu"

    def unit_gpus(self, oid: str) -> int:
        """GPUs of one billed unit: the machine, or one GPU when billed by the GPU."""
        return 1 if self.per_gpu(oid) else int(self.o[oid]["gpus_per_unit"])

    def unit_price(self, oid: str) -> float:
        p = float(self.o[oid]["price_per_hour"])
        return p / int(self.o[oid]["gpus_per_unit"]) if self.per_gpu(oid) else p

    def quota(self, oid: str) -> float:
        q = self.o[oid]["max_units"]
        if pd.isna(q):
            return math.inf
        return float(q) * (int(self.o[oid]["gpus_per_unit"]) if self.per_gpu(oid) else 1.0)

    def discount(self, month: float) -> float:
        return (1.0 + self.rate) ** (-float(month) / 12.0)

    def energy(self, oid: str) -> float:
        """Energy cost of one busy owned GPU-hour."""
        o = self.o[oid]
        return float(o["power_kw"]) / int(o["gpus_per_unit"]) * float(o["pue"]) * float(o["electricity_per_kwh"])

    def block_of(self, oid: str, period: str) -> int:
        """The term block a reserved offering's period falls in: whole terms since the horizon start."""
        return int(self.p[period]["month"]) // int(self.o[oid]["term_months"])

    def machines(self, oid: str, gpus: int) -> int:
        return -(-int(gpus) // int(self.o[oid]["gpus_per_unit"]))

    def waste(self, oid: str, job, gpus: int) -> float:
        """Young/Daly: checkpoint writes, plus half an interval and a restart per interruption."""
        if self.o[oid]["pricing"] != "spot":
            return 0.0
        lam = float(self.o[oid]["interruptions_per_hour"]) * self.machines(oid, gpus)
        tau = float(job.checkpoint_minutes) / 60.0
        write = float(self.eff["checkpoint_write_minutes"]) / 60.0
        restart = float(self.eff["restart_minutes"]) / 60.0
        return write / tau + lam * (tau / 2.0 + restart)

    @functools.cached_property
    def job_rows(self) -> dict[tuple[str, str], list]:
        """The candidate rows of each (job, configuration), in the candidate table's order."""
        out: dict[tuple[str, str], list] = {}
        for r in _rows(self.cands.training):
            out.setdefault((r.job, r.config), []).append(r)
        return out

    def job_hours(self, job: str, config: str, oid: str) -> float | None:
        """Hours the job takes on this configuration on this offering (its link profile's row)."""
        rows = self.job_rows.get((job, config), [])
        host = int(self.o[oid]["gpus_per_unit"])
        if not rows:
            return None
        if int(rows[0].gpus) > host:
            fabric = float(self.o[oid]["fabric_gbps_per_gpu"])
            link = [r for r in rows if r.gpus_per_node == host and _isclose(_float(r.fabric_gbps_per_gpu), fabric)]
            if link:
                return float(link[0].hours)
        anyl = [r for r in rows if pd.isna(r.gpus_per_node)]
        return float(anyl[0].hours) if anyl else None


def _float(x) -> float:
    return math.nan if x is None else float(x)


def _isclose(a: float, b: float) -> bool:
    """NumPy's ``isclose`` on two numbers (relative 1e-5, absolute 1e-8; never for a missing value)."""
    return a == b or abs(a - b) <= 1e-8 + 1e-5 * abs(b)


def audit(plan) -> list[str]:
    """Return a list of violations (empty when the plan is consistent)."""
    if not plan.status.has_plan:
        return []
    d = _Data(plan)
    v: list[str] = []
    v += _offerings_allowed(plan, d)
    v += _placement(plan, d)
    v += _demand(plan, d)
    v += _training(plan, d)
    held = _held_units(plan, d, v)
    v += _capacity(plan, d, held)
    v += _timetable(plan, d, held)
    v += _stability(plan, d)
    v += _costs(plan, d, held)
    return v


def _offerings_allowed(plan, d: _Data) -> list[str]:
    """Every offering the plan uses is one the problem considers (allow, providers)."""
    v = []
    used = set(plan.inference["offering"]) | set(plan.training["offering"]) | set(plan.commitments["offering"])
    spec = d.pr.spec
    for oid in sorted(used):
        if oid not in d.o:
            v.append(f"offering {oid}: not an offering of this problem (excluded or unknown)")
            continue
        o = d.o[oid]
        if o["from_catalog"] and o["pricing"] == "owned" and not spec.allow.buy:
            v.append(f"offering {oid}: a catalog server is bought without allow.buy")
        if (o["from_catalog"] and o["pricing"] == "reserved" and o["term_months"] * HOURS_PER_MONTH > d.H + 1e-6
                and int(o["term_months"]) not in spec.allow.reserved_terms_months):
            v.append(f"offering {oid}: a catalog reservation outlasting the horizon without allow.reserved_terms_months")
        if not provider_allowed(spec.providers, o["provider"] if isinstance(o["provider"], str) else None):
            v.append(f"offering {oid}: provider {o['provider']} excluded by providers")
    return v


def _placement(plan, d: _Data) -> list[str]:
    """GPU type, a replica inside one machine, regions, spot, providers; cluster topology."""
    v = []
    for r in d.rows("inference"):
        s, o = d.services[r.service], d.off(r.offering)
        if o["gpu"] != r.gpu:
            v.append(f"inference {r.service}/{r.period}: config GPU {r.gpu} on offering of {o['gpu']}")
        if r.gpus_per_replica > o["gpus_per_unit"]:
            v.append(f"inference {r.service}: replica of {r.gpus_per_replica} GPUs on {o['gpus_per_unit']}-GPU machines")
        if s.regions and o["region"] not in s.regions:
            v.append(f"inference {r.service}: region {o['region']} not allowed")
        if o["pricing"] == "spot" and not s.spot:
            v.append(f"inference {r.service}: on spot without spot: true")
        if not provider_allowed(s.providers, o["provider"] if isinstance(o["provider"], str) else None):
            v.append(f"inference {r.service}: provider {o['provider']} not allowed")
    for r in d.rows("training"):
        j, o = d.jobs[r.job], d.off(r.offering)
        if o["gpu"] != r.gpu:
            v.append(f"training {r.job}: GPU {r.gpu} on offering of {o['gpu']}")
        if j.regions and o["region"] not in j.regions:
            v.append(f"training {r.job}: region {o['region']} not allowed")
        if o["pricing"] == "spot" and not j.spot:
            v.append(f"training {r.job}: on spot without spot: true")
        if not provider_allowed(j.providers, o["provider"] if isinstance(o["provider"], str) else None):
            v.append(f"training {r.job}: provider {o['provider']} not allowed")
        if r.mode == "hourly" and o["pricing"] not in PAY_PER_HOUR:
            v.append(f"training {r.job}: rented by the hour on a {o['pricing']} offering")
        machines = d.machines(r.offering, r.gpus)
        if machines > 1 and o["fabric"] == "none":
            v.append(f"topology {r.job} on {r.offering}: {r.gpus} GPUs span {machines} machines with no fabric")
        if machines > 1 and pd.notna(o["max_cluster_units"]) and machines > o["max_cluster_units"]:
            v.append(f"topology {r.job} on {r.offering}: {machines} machines > max_cluster_units "
                     f"{int(o['max_cluster_units'])}")
        m = int(d.p[r.period]["month"])
        if not (j.start_month <= m <= j.deadline_month):
            v.append(f"training {r.job}: runs in month {m} outside {j.start_month}..{j.deadline_month}")
        if _over(r.hours, float(d.p[r.period]["hours"])):
            v.append(f"training {r.job}/{r.period}: {r.hours:g} h in a {d.p[r.period]['hours']:g} h period")
    return v


@functools.cache
def _row_type(columns: tuple[str, ...]) -> type:
    return collections.namedtuple("Row", ["Index", *columns], rename=True)


def _rows(table: pd.DataFrame) -> list:
    """The rows of ``table`` as named tuples, as ``table.itertuples()`` gives them (the index first, Python
    scalars), read from one object array: ``itertuples`` makes a Series of every column and a new tuple type
    at every call (0.5 ms each: the audit of one plan made 18)."""
    make = _row_type(tuple(table.columns))._make
    return [make((i, *r)) for i, r in zip(table.index.tolist(), table.to_numpy(dtype=object).tolist())]


def _by_label(table: pd.DataFrame) -> dict[object, dict]:
    """Every row of ``table`` as a dict of its fields (Python scalars), by its index label."""
    cols = list(table.columns)
    return {k: dict(zip(cols, v)) for k, v in zip(table.index.tolist(), table.to_numpy(dtype=object).tolist())}


def _sums(rows, key, value) -> dict:
    """Σ ``value(r)`` per ``key(r)`` over ``rows`` (named tuples), keys in order of first appearance.

    A plain loop: a plan's tables are small, and a pandas groupby costs more
    per call than a loop over a few hundred rows (docs/performance.md, "The
    plan's tables in NumPy").
    """
    out: dict = {}
    for r in rows:
        k = key(r)
        out[k] = out.get(k, 0) + value(r)
    return out


def _groups(rows, key) -> dict:
    """The ``rows`` (named tuples) of each ``key(r)``, keys in order of first appearance, rows in their order."""
    out: dict = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def _demand(plan, d: _Data) -> list[str]:
    """Demand met in every service, bucket and period; routing within replicas; floors."""
    v = []
    inf = d.rows("inference")
    c = d.cands.inference
    rps = dict(zip(zip(c["service"], c["config"], c["bucket"]), c["rps"].astype(float)))
    demand = _rows(d.pr.demand())
    reps = _sums(inf, lambda r: (r.service, r.period), lambda r: r.replicas)
    for s in d.services:
        for p in d.periods:
            n, floor = reps.get((s, p), 0), d.services[s].min_replicas
            if n < floor:
                v.append(f"inference {s}/{p}: {n} replicas < min {floor}")
    one = {s.name: s.buckets[0].name for s in d.pr.services if len(s.buckets) == 1}
    if one:
        # a configuration without an rps for the class carries nothing
        cap = _sums([r for r in inf if r.service in one], lambda r: (r.service, r.period),
                    lambda r: r.replicas * rps.get((r.service, r.config, one[r.service]), 0.0))
        need = _sums([r for r in demand if r.service in one], lambda r: (r.service, r.period), lambda r: r.rps)
        for (s, p) in sorted(need):
            n = need[(s, p)]
            if cap.get((s, p), 0.0) < n - TOL * max(n, 1):
                v.append(f"inference {s}/{p}: capacity {cap.get((s, p), 0.0):g} rps < demand {n:g}")
    many = {s.name for s in d.pr.services if len(s.buckets) > 1}
    if many:
        rt = [r for r in d.rows("routing") if r.service in many]
        need = _sums([r for r in demand if r.service in many], lambda r: (r.service, r.bucket, r.period),
                     lambda r: r.rps)
        got = _sums(rt, lambda r: (r.service, r.bucket, r.period), lambda r: r.rps)
        for (s, b, p) in sorted(need):
            n = need[(s, b, p)]
            if got.get((s, b, p), 0.0) < n - TOL * max(n, 1):
                v.append(f"inference {s}/{b}/{p}: routed {got.get((s, b, p), 0.0):g} < demand {n:g}")
        # replicas' worth of each configuration's routed load; a route without an rps counts for nothing
        load = _sums([r for r in rt if (r.service, r.config, r.bucket) in rps],
                     lambda r: (r.service, r.config, r.offering, r.period),
                     lambda r: r.rps / rps[(r.service, r.config, r.bucket)])
        have = _sums(inf, lambda r: (r.service, r.config, r.offering, r.period), lambda r: r.replicas)
        for k in sorted(load):
            h = have.get(k, 0)
            if load[k] > h + TOL * max(h, 1):
                v.append(f"inference {'/'.join(k)}: routed load {load[k]:g} replicas > {h}")
    return v


def _training(plan, d: _Data) -> list[str]:
    """One configuration per job, period hours, and the whole job done (spot waste recomputed)."""
    v = []
    by_job = _groups(d.rows("training"), lambda r: r.job)
    hours_of: dict = {}  # job_hours per (job, configuration, offering), looked up once
    for j in d.pr.jobs:
        rows = by_job.get(j.name, [])
        configs = {r.config for r in rows}
        if len(configs) != 1:
            v.append(f"training {j.name}: {len(configs)} configurations used (must be exactly one)")
            continue
        (c,) = configs
        per = _sums(rows, lambda r: r.period, lambda r: r.hours)
        for p in sorted(per):
            if _over(per[p], float(d.p[p]["hours"])):
                v.append(f"training {j.name}/{p}: {per[p]:g} h > period hours")
        done = 0.0
        for r in rows:
            waste = d.waste(r.offering, j, r.gpus)
            if waste >= 0.5:
                v.append(f"training {j.name}: placed on spot {r.offering} with waste {waste:.2f} ≥ 0.5")
            key = (j.name, c, r.offering)
            if key not in hours_of:
                hours_of[key] = d.job_hours(*key)
            need = hours_of[key]
            if need is None:
                v.append(f"training {j.name}: no hours known for {c} on {r.offering}")
                continue
            done += r.hours * (1.0 - waste) / need
        if abs(done - 1.0) > 1e-5:
            v.append(f"training {j.name}: {100 * done:.4f} % of the job done, not 100 %")
    return v


def _held_units(plan, d: _Data, v: list[str]) -> dict[tuple[str, str], float]:
    """Units held for the whole period per (offering, period): running, reserved (own blocks), owned."""
    held: dict[tuple[str, str], float] = {}
    for r in d.rows("commitments"):
        o = d.off(r.offering)
        if r.pricing == "reserved":
            periods = [p for p in d.periods if d.block_of(r.offering, p) == int(r.block)]
            if int(r.start_month) != int(r.block) * int(o["term_months"]):
                v.append(f"commitment {r.offering} block {r.block}: starts at month {r.start_month}, "
                         f"not {int(r.block) * int(o['term_months'])}")
        else:
            periods = d.periods
            if int(r.existing_units) != int(o["existing_units"] or 0):
                v.append(f"commitment {r.offering}: {r.existing_units} existing units, the offering says "
                         f"{o['existing_units']}")
        for p in periods:
            held[(r.offering, p)] = held.get((r.offering, p), 0.0) + float(r.units)
        if _over(float(r.units), d.quota(r.offering)):
            v.append(f"units {r.offering}: {r.units} > max_units {o['max_units']:g}")
    for r in d.rows("usage"):
        if r.pricing in PAY_PER_HOUR and r.units > 0:
            held[(r.offering, r.period)] = held.get((r.offering, r.period), 0.0) + float(r.units)
    return held


def _capacity(plan, d: _Data, held: dict) -> list[str]:
    """Inference and training fit in what is held, clusters whole, quotas kept, period by period."""
    v = []
    tr = d.rows("training")
    I = _sums(d.rows("inference"), lambda r: (r.offering, r.period), lambda r: r.gpus)
    shared = [r for r in tr if r.mode == "shared"]
    T = _sums(shared, lambda r: (r.offering, r.period), lambda r: r.gpus * r.hours)
    for (o, p) in sorted(set(I) | set(T) | set(held)):
        gpus = held.get((o, p), 0.0) * d.unit_gpus(o)
        used = float(I.get((o, p), 0.0)) + float(T.get((o, p), 0.0)) / float(d.p[p]["hours"])
        if _over(used, gpus):
            v.append(f"capacity {o}/{p}: {used:g} GPUs used > {gpus:g} held")
    for r in shared:
        free = held.get((r.offering, r.period), 0.0) * d.unit_gpus(r.offering) - float(I.get((r.offering, r.period), 0.0))
        if _over(float(r.gpus), free):
            v.append(f"training-fit {r.job} on {r.offering}/{r.period}: cluster {r.gpus} GPUs > {free:g} free")
    hourly = [r for r in tr if r.mode == "hourly"]
    for r in hourly:
        billed = r.gpus if d.per_gpu(r.offering) else d.machines(r.offering, r.gpus)
        if int(r.billed_units) != billed:
            v.append(f"training {r.job} on {r.offering}: billed {r.billed_units} units, not {billed}")
    # units rented by the hour, averaged over the period
    avg = _sums(hourly, lambda r: (r.offering, r.period),
                lambda r: r.billed_units * r.hours / float(d.p[r.period]["hours"]))
    for (o, p) in sorted({k for k in held if d.o[k[0]]["pricing"] in PAY_PER_HOUR} | set(avg)):
        run = held.get((o, p), 0.0) if d.o[o]["pricing"] in PAY_PER_HOUR else 0.0
        if _over(run + float(avg.get((o, p), 0.0)), d.quota(o)):
            v.append(f"quota {o}/{p}: {run:g} units running + {float(avg.get((o, p), 0.0)):g} hourly > max_units")
    for r in hourly:
        run = held.get((r.offering, r.period), 0.0)
        if _over(run + r.billed_units, d.quota(r.offering)):
            v.append(f"quota {r.offering}/{r.period}: {run:g} running + cluster {r.billed_units} > max_units")
    return v


def _timetable(plan, d: _Data, held: dict) -> list[str]:
    """The training timetable is one a team can follow, instant by instant.

    Every cluster's stretches add up to its hours in the period and lie
    inside the period; a job runs one stretch at a time; a lane serves one
    cluster at a time; and at the start of every stretch (the only instants
    at which the load can rise) the clusters running on a pool fit in it:
    shared clusters' GPUs beside the period's inference within the GPUs
    held, hourly clusters' units beside the units running within the quota.
    """
    v = []
    if plan.timetable_error:
        return [f"timetable: none can be built ({plan.timetable_error})"]
    tt = d.rows("timetable")
    got = _sums(tt, lambda s: (s.job, s.period, s.offering, s.mode), lambda s: s.hours)
    for r in d.rows("training"):
        laid = float(got.get((r.job, r.period, r.offering, r.mode), 0.0))
        if not _close(laid, float(r.hours), abs_=1e-4):
            v.append(f"timetable {r.job}/{r.period}/{r.offering} ({r.mode}): {laid:g} h laid out, {r.hours:g} h planned")
    tol = 1e-5
    for s in tt:
        h = float(d.p[s.period]["hours"])
        if s.start_hour < -tol or s.end_hour > h + tol or s.end_hour < s.start_hour - tol:
            v.append(f"timetable {s.job}/{s.period}: stretch {s.start_hour:g}-{s.end_hour:g} h outside 0-{h:g} h")
    for key, what in ((lambda s: (s.job, s.period), "runs twice at once"),
                      (lambda s: (s.offering, s.period, s.mode, s.lane), "lane serves two clusters at once")):
        groups = _groups(tt, key)
        for k in sorted(groups):
            g = sorted(groups[k], key=lambda s: s.start_hour)  # stable, as one stretch after another
            if any(b.start_hour < a.end_hour - tol for a, b in zip(g, g[1:])):
                v.append(f"timetable {'/'.join(map(str, k))}: {what}")
    inf = _sums(d.rows("inference"), lambda r: (r.offering, r.period), lambda r: r.gpus)
    pools = _groups(tt, lambda s: (s.offering, s.period))
    for (o, p) in sorted(pools):
        g = pools[(o, p)]
        for t0 in [s.start_hour for s in g]:
            on = [s for s in g if s.start_hour <= t0 + tol and s.end_hour > t0 + tol]
            shared = float(sum(s.gpus for s in on if s.mode == "shared"))
            hourly = float(sum(s.billed_units for s in on if s.mode == "hourly"))
            units = held.get((o, p), 0.0)
            if shared and _over(shared + float(inf.get((o, p), 0.0)), units * d.unit_gpus(o)):
                v.append(f"timetable {o}/{p} at {t0:g} h: {shared:g} training GPUs + {inf.get((o, p), 0.0):g} "
                         f"inference GPUs > {units * d.unit_gpus(o):g} held")
            running = units if d.o[o]["pricing"] in PAY_PER_HOUR else 0.0
            if hourly and _over(running + hourly, d.quota(o)):
                v.append(f"timetable {o}/{p} at {t0:g} h: {running:g} units running + {hourly:g} hourly > max_units")
    return v


def _stability(plan, d: _Data) -> list[str]:
    """Configurations per request class within the limit; replica starts counted from period to period.

    A single-size service's replicas are its one class; a bucketed service's
    classes are its buckets, each served by the configurations its traffic is
    routed to.
    """
    v = []
    inf, rt = plan.inference, plan.routing
    for s in d.pr.services:
        n, _ = d.pr.stability(s)
        mine = inf[(inf["service"] == s.name) & (inf["replicas"] > 0)]
        if len(s.buckets) <= 1:
            classes = {"all": set(mine["config"])}
        else:
            r = rt[(rt["service"] == s.name) & (rt["rps"] > 1e-9)] if len(rt) else rt
            classes = {b: set(g["config"]) for b, g in r.groupby("bucket")} if len(r) else {}
        for b, cfgs in classes.items():
            if len(cfgs) > n:
                v.append(f"stability {s.name}/{b}: {len(cfgs)} configurations > max_configurations {n}")
    starts = plan.starts.set_index(["service", "config", "offering", "period"])["started"] if len(plan.starts) else {}
    x = inf.set_index(["service", "config", "offering", "period"])["replicas"]
    periods = d.periods
    for s in d.pr.services:
        if d.pr.stability(s)[1] <= 0:
            continue
        mine = inf[inf["service"] == s.name]
        for (c, o) in set(zip(mine["config"], mine["offering"])):
            for a, b in zip(periods, periods[1:]):
                grown = float(x.get((s.name, c, o, b), 0)) - float(x.get((s.name, c, o, a), 0))
                got = float(starts.get((s.name, c, o, b), 0.0)) if len(plan.starts) else 0.0
                if grown > got + 1e-6:
                    v.append(f"stability {s.name}/{c}/{o}/{b}: {grown:g} replicas started, {got:g} counted")
    return v


def _costs(plan, d: _Data, held: dict) -> list[str]:
    """The cost and its present value recomputed item by item; against the ledger and the solver."""
    pr = d.pr
    full = pr.spec.finance.commitments == "full"
    cost = pv = 0.0
    disc = {p: d.discount(d.p[p]["month"]) for p in d.periods}
    # rented units running, whole periods
    for (o, p), n in held.items():
        if d.o[o]["pricing"] in PAY_PER_HOUR:
            c = n * d.unit_price(o) * float(d.p[p]["hours"])
            cost, pv = cost + c, pv + c * disc[p]
    for r in d.rows("training"):
        if r.mode == "hourly":
            c = r.billed_units * d.unit_price(r.offering) * r.hours
        elif d.o[r.offering]["pricing"] == "owned":
            c = r.gpus * r.hours * d.energy(r.offering)
        else:
            c = 0.0
        cost, pv = cost + c, pv + c * disc[r.period]
    for r in d.rows("inference"):
        if r.pricing == "owned":
            c = r.gpus * float(d.p[r.period]["hours"]) * d.energy(r.offering)
            cost, pv = cost + c, pv + c * disc[r.period]
    for r in d.rows("starts"):
        c = r.started * d.pr.stability(d.services[r.service])[1]
        cost, pv = cost + c, pv + c * disc[r.period]
    busy: dict = {}
    for r in d.rows("inference"):
        busy[(r.offering, r.period)] = busy.get((r.offering, r.period), 0.0) + r.gpus * float(d.p[r.period]["hours"])
    for r in d.rows("training"):
        busy[(r.offering, r.period)] = busy.get((r.offering, r.period), 0.0) + r.gpus * r.hours
    for r in d.rows("commitments"):
        o = d.o[r.offering]
        if r.pricing == "reserved":
            price = float(o["price_per_hour"])
            start = int(r.block) * int(o["term_months"])
            for p in d.periods:
                if d.block_of(r.offering, p) == int(r.block):
                    c = r.units * price * float(d.p[p]["hours"])
                    cost, pv = cost + c, pv + c * disc[p]
            up = r.units * float(o["upfront"] or 0.0)
            cost, pv = cost + up, pv + up * d.discount(start)
            after = max(0.0, start + int(o["term_months"]) - d.end_month)
            if full and after > 0:
                k = 0
                while k < after:
                    share = min(1.0, after - k)
                    c = r.units * price * HOURS_PER_MONTH * share
                    cost, pv = cost + c, pv + c * d.discount(d.end_month + k)
                    k += 1
            continue
        capex, res, life = float(o["capex"]), float(o["residual_fraction"]), float(o["lifetime_years"])
        new = float(r.new_units)
        if new > 0:
            outlives = life * HOURS_PER_YEAR > d.H
            if full and outlives:
                cost += new * capex * (1 - res)
                pv += new * capex - new * capex * res * (1.0 + d.rate) ** (-life)
            else:
                cost += new * capex * (1 - res) * d.H / (life * HOURS_PER_YEAR)
                book = new * capex * (1 - (1 - res) * min(1.0, d.H / (life * HOURS_PER_YEAR)))
                pv += new * capex - book * d.discount(d.end_month)
        e = d.energy(r.offering)
        for p in d.periods:
            h = float(d.p[p]["hours"])
            c = r.units * float(o["fixed_per_month"]) * h / HOURS_PER_MONTH
            idle = (r.units * int(o["gpus_per_unit"]) * h - busy.get((r.offering, p), 0.0)) * e * float(
                o["idle_power_fraction"])
            cost, pv = cost + c + idle, pv + (c + idle) * disc[p]
    v = []
    if not _close(cost, plan.total_cost):
        v.append(f"cost: recomputed {cost:.6f} != ledger {plan.total_cost:.6f}")
    if not _close(pv, plan.npv):
        v.append(f"present value: recomputed {pv:.6f} != ledger {plan.npv:.6f}")
    obj = pv if pr.objective == "npv" else cost
    if plan.result.objective is not None and not _close(obj, plan.result.objective):
        v.append(f"objective: recomputed {obj:.6f} != solver {plan.result.objective:.6f}")
    if not _close(plan.by_pricing()["cost"].sum(), plan.total_cost):
        v.append("by_pricing does not add up to total_cost")
    if not _close(plan.by_workload()["cost"].sum(), plan.total_cost):
        v.append("by_workload does not add up to total_cost")
    if pr.budget is not None and obj > pr.budget * (1 + 1e-9) + 1e-6:
        v.append(f"budget: objective {obj:g} > budget {pr.budget:g}")
    return v
