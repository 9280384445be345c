"""`gpuopt catalog refresh` on fixture price files: the expected offerings, the diff, the version bump.

The fixture is the shipped AWS snapshot with two edits, made here: every
p5.48xlarge on-demand price × 1.1, and g5.xlarge removed. By hand: p5
on-demand 55.04 → 60.544; its reservations are re-derived from the same
discounts, so they move by the same 10 %; g5.xlarge's four offerings (on
demand, spot, 1- and 3-year) are gone; nothing is added.
"""

from __future__ import annotations

import csv
import datetime as dt
import shutil
from pathlib import Path

import pytest

from optimizer.importers import load_offering_file
from optimizer.importers.refresh import next_version, refresh
from conftest import gpuopt_here

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "catalogs" / "offerings"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("skypilot")
    (d / "aws").mkdir()
    src = ROOT / "catalogs" / "sources" / "skypilot-catalog" / "aws" / "vms.csv"
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(d / "aws" / "vms.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            if r["InstanceType"] == "g5.xlarge":
                continue
            if r["InstanceType"] == "p5.48xlarge" and r["Price"]:
                r["Price"] = f"{float(r['Price']) * 1.1:.6f}"
            w.writerow(r)
    return d


def test_the_diff_names_what_moved_and_what_went(fresh):
    r = refresh(fresh, SHIPPED, date="2026-11-24")
    d = r.diff
    assert set(d.loc[d["change"] == "removed", "offering"]) == {
        f"aws-g5.xlarge-us-east-1-{k}" for k in ("od", "spot", "1y", "3y")}
    assert (d["change"] == "added").sum() == 0
    moved = d[d["change"] == "price moved"].set_index("offering")
    assert moved.at["aws-p5.48xlarge-us-east-1-od", "new"] == pytest.approx(55.04 * 1.1)
    assert moved.at["aws-p5.48xlarge-us-east-1-1y", "relative"] == pytest.approx(0.10, abs=1e-3)
    assert moved.at["aws-p5.48xlarge-us-east-1-3y", "relative"] == pytest.approx(0.10, abs=1e-3)
    assert any("g5.xlarge" in s for s in r.skipped)
    p5 = {o.id: o for offs in r.files.values() for o in offs}["aws-p5.48xlarge-us-east-1-od"]
    assert str(p5.date) == "2026-11-24" and str(fresh) in p5.source  # the fresh file is cited, dated
    assert p5.fabric == "efa" and p5.max_units == 8  # topology and supply applied as in the build


def test_the_command_writes_only_with_force_and_the_result_passes_the_check(fresh, tmp_path):
    out = tmp_path / "offerings"
    shutil.copytree(SHIPPED, out)
    cmd = ["catalog", "refresh", "--skypilot", str(fresh), "-o", str(out), "--date", "2026-11-24"]
    r = gpuopt_here(*cmd, cwd=ROOT)
    assert r.returncode == 2 and "--force" in r.stderr
    assert "aws-p5.48xlarge-us-east-1-od" in r.stdout  # the diff is printed before the refusal
    r = gpuopt_here(*cmd, "--force", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    aws = {o.id: o for o in load_offering_file(out / "aws.yaml")}
    assert aws["aws-p5.48xlarge-us-east-1-od"].price_per_hour == pytest.approx(60.544)
    assert "aws-g5.xlarge-us-east-1-od" not in aws
    files = [a for p in sorted(out.glob("*.yaml")) for a in ("--catalog", str(p))]
    check = gpuopt_here("catalog", "check", *files, cwd=ROOT)
    assert check.returncode == 0, check.stdout


def test_version_numbers():
    today = dt.date(2026, 11, 24)
    assert next_version("2026.11.3", today) == "2026.11.4"
    assert next_version("2026.10.7", today) == "2026.11.1"
    assert next_version("unversioned", today) == "2026.11.1"
