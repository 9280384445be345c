"""One build per distinct model input in a test process: a memo around :func:`optimizer.model.presolve.build`.

The suite solves a few hundred small problems, and a model's build (about
0.3 s whatever the model's size, pandas' cost per operation) was a third of
its test-process time. Many tests build a model another test built already:
the shipped examples, the rent-versus-buy example and its strategies, the
same generated problem solved by every back end. Measured over one run of
the suite (2026-11-30, 2 processes): 701 builds taking 218 s, of which 356
(113 s) repeated a build of the same input in the same process.

The memo hands out a copy of the model built first for the same input.
That is the same model only because the build is a function of its input;
``test_build_memo.py::test_a_model_built_twice_from_one_input_is_the_same``
asserts it on models of every kind with the memo bypassed (:func:`fresh`).
The input is everything the build reads, compared by content:

- the problem's tables and its file as parsed (not the file's path: the
  build never reads it; the candidates, which do, are part of the key by
  content),
- the candidates' tables and efficiency factors,
- the reductions' switch and the cuts asked for,
- the code: every name the model's modules define, and every attribute of
  their classes, by identity, so a test that patches one (the audit's
  tests plant bugs in the build this way) gets a build of its own.

A model handed out is a deep copy (q3's: 10 ms against 380 ms for its
build, 2026-11-30), so what one test does to it never reaches another; its ``problem``
is the caller's own object. ``GPUOPT_TEST_FRESH_BUILDS=1`` turns the memo
off: every build is made afresh, as the product does.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import pickle
import sys
import threading
from collections import OrderedDict

from optimizer.model.presolve import CUTS
from optimizer.model.reprice import candidates_digest

#: the modules a build runs through; a name patched in any of them changes the key
MODEL_MODULES = ("optimizer.model.formulation", "optimizer.model.presolve", "optimizer.model.strengthen",
                 "optimizer.model.mip", "optimizer.model.expr")
#: the modules that call ``build`` by a name of their own (``from .presolve import build``)
CALLERS = ("optimizer.model.presolve", "optimizer.model.reprice", "optimizer.solve.coarse")
#: models kept (over one run of the suite, 2026-11-30: at most 11.2 MB of them in a process, pickled; the
#: largest 5.2 MB)
KEEP = 64


def _digest(part) -> bytes:
    # each part pickled alone: pickle refers back to objects met before, so equal parts that share different
    # objects would pickle differently inside one tuple
    return hashlib.sha256(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def _code() -> tuple[tuple, list]:
    """The identity of every name of the model's modules and of their classes' attributes, and the objects
    (kept alive with the entry, so that an identity cannot be reused by another object while it is)."""
    named = {}
    for name in MODEL_MODULES:
        module = sys.modules[name]
        for attr, value in vars(module).items():
            if attr.startswith("__"):  # the interpreter's own (a warning registry appears once a warning is given)
                continue
            named[f"{name}.{attr}"] = value
            if isinstance(value, type) and value.__module__ == name:
                named.update({f"{name}.{attr}.{k}": v for k, v in vars(value).items() if not k.startswith("__")})
    keys = sorted(named)
    return tuple((k, id(named[k])) for k in keys), [named[k] for k in keys]


class BuildMemo:
    """``build(problem, cands, enabled, cuts)`` made once per distinct input, then handed out as copies."""

    def __init__(self, real):
        self.real = real
        self.models: OrderedDict[bytes, tuple] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = 0
        self.builds = 0

    def key(self, problem, cands, enabled, cuts) -> tuple[bytes, list]:
        ids, objects = _code()
        digest = hashlib.sha256()
        for part in (problem.periods, problem.offerings, problem.services, problem.jobs,
                     problem.spec.model_dump(mode="python"), problem.catalog_version, bool(enabled), tuple(cuts), ids):
            digest.update(_digest(part))
        digest.update(candidates_digest(cands))  # the candidates' tables and efficiency factors
        return digest.digest(), objects

    def __call__(self, problem, cands, enabled: bool = True, cuts=CUTS):
        key, objects = self.key(problem, cands, enabled, cuts)
        with self.lock:
            kept = self.models.get(key)
            if kept is not None:
                self.models.move_to_end(key)
                self.hits += 1
        if kept is None:
            model = self.real(problem, cands, enabled, cuts)
            with self.lock:
                self.builds += 1
                # the build keeps the caller's candidates where nothing was reduced: the copy handed out then
                # gets the next caller's
                self.models[key] = (copy.deepcopy(model), model.candidates is cands, objects)
                while len(self.models) > KEEP:
                    self.models.popitem(last=False)
            return model
        stored, own_candidates, _ = kept
        model = copy.deepcopy(stored)
        return dataclasses.replace(model, problem=problem, **({"candidates": cands} if own_candidates else {}))


MEMO: BuildMemo | None = None


def install() -> None:
    """Put the memo where every caller looks ``build`` up (unless ``GPUOPT_TEST_FRESH_BUILDS`` is set)."""
    global MEMO
    if os.environ.get("GPUOPT_TEST_FRESH_BUILDS"):
        return
    import importlib

    callers = [importlib.import_module(name) for name in CALLERS]  # each imports build before it is replaced
    MEMO = BuildMemo(callers[0].build)
    for module in callers:
        assert module.build is MEMO.real, f"{module.__name__}.build is not presolve.build"
        module.build = MEMO


def fresh(problem, cands, enabled: bool = True, **kw):
    """A build made afresh whether or not the memo is installed."""
    from optimizer.model import presolve

    real = MEMO.real if MEMO is not None else presolve.build
    return real(problem, cands, enabled, **kw)
