"""Every key a real `gpuopt solve --format json` prints is documented in docs/json-format.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from conftest import write_problem
from optimizer.cli import main
from optimizer.render.report import FORMAT_VERSION

from test_executable_plans import RESERVED_1Y, quarter

DOC = (Path(__file__).resolve().parent.parent / "docs" / "json-format.md").read_text()


def _documented(key: str) -> bool:
    return re.search(rf"`{re.escape(key)}`", DOC) is not None


def test_every_key_of_a_real_plan_is_documented(tmp_path):
    r = CliRunner().invoke(main, ["solve", str(write_problem(tmp_path, quarter(RESERVED_1Y, "horizon"))),
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["format_version"] == FORMAT_VERSION and f"`format_version` is `\"{FORMAT_VERSION}\"`" in DOC
    missing = [k for k in out if not _documented(k)]
    for k, v in out.items():
        rows = v if isinstance(v, list) else [x for vv in v.values() if isinstance(vv, list) for x in vv] \
            if isinstance(v, dict) else []
        if isinstance(v, dict):
            missing += [kk for kk in v if not _documented(kk)]
        for row in rows:
            if isinstance(row, dict):
                missing += [kk for kk in row if not _documented(kk)]
    assert not sorted(set(missing)), sorted(set(missing))
    # the plan this run printed: a reservation with money still owed after the quarter
    assert out["after_horizon"]["owed_after_horizon"] > 0 and out["warnings"]

