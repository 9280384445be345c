"""The command line starts without pandas or a solver; ``optimizer.solve`` stays the API's function.

``gpuopt --help`` used to import the whole pipeline (pandas, the model, the
back ends) and took 1.3-2 s on a 2-core machine; the commands now import
what they run when they run it (docs/performance.md, "A command line that
starts at once"). These tests hold that in a fresh interpreter each: what
another test imported first cannot hide an eager import.
"""

from __future__ import annotations

import subprocess
import sys

from optimizer import vocabulary
from optimizer.solve.backends import BACKENDS


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_command_line_imports_no_pandas_numpy_or_solver():
    r = python("import sys, optimizer.cli\n"
               "print(sorted(m for m in ('pandas', 'numpy', 'scipy', 'highspy', 'ortools', 'pulp') "
               "if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_help_lists_every_command_through_the_entry_point():
    r = subprocess.run([sys.executable, "-m", "optimizer", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for command in ("solve", "whatif", "sweep", "rentbuy", "report", "estimate", "catalog", "validate", "schema"):
        assert f"  {command} " in r.stdout, command


def test_optimizer_solve_is_the_function_whatever_was_imported_first():
    # a stage module imported before anything else binds the stage package `optimizer.solve` unless the package
    # __init__ binds the API's function after it
    for first in ("import optimizer.solve.driver", "import optimizer.solve", "import optimizer.cli",
                  "from optimizer import solve"):
        r = python(f"{first}\nimport optimizer, optimizer.api\nprint(optimizer.solve is optimizer.api.solve)")
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "True", first


def test_every_solver_name_runs_a_back_end():
    assert tuple(BACKENDS) == vocabulary.SOLVERS
    assert vocabulary.DEFAULT_SOLVER in vocabulary.SOLVERS


def test_the_problem_schema_spells_the_vocabulary():
    # the schema's Literal types and the vocabulary's tuples are one list each
    from typing import get_args

    from optimizer import schema

    assert get_args(schema.Pricing) == vocabulary.PRICING_KINDS
    assert get_args(schema.Precision) == vocabulary.PRECISIONS
    assert get_args(schema.Fabric) == vocabulary.FABRICS
    assert get_args(schema.UnitLink) == vocabulary.UNIT_LINKS
