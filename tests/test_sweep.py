"""gpuopt sweep: grid, outputs (table, JSON, CSV, PNG), break points, serial = processes = Dask."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from optimizer.cli import main
from optimizer.studies.sweep import linspace, parse_vary, parse_vary_scale
from test_whatif_toy import toy, write


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def sweep_json(*args) -> dict:
    r = cli("sweep", *args, "--format", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_vary_grammar():
    d = parse_vary("offerings[aws-p5-spot].price_per_hour*=0.5:1.5:11")
    assert d.op == "*=" and d.target == "offerings[aws-p5-spot].price_per_hour" and len(d.values) == 11
    assert d.values[0] == 0.5 and d.values[5] == 1.0 and d.values[-1] == 1.5
    assert parse_vary("offerings[x].max_units=0:10:6").values == [0, 2, 4, 6, 8, 10]
    assert parse_vary("finance.objective=cost,npv").values == ["cost", "npv"]
    s = parse_vary_scale("pricing=spot,gpu=H100-SXM:0.5:1.5:3")
    assert s.kind == "scale" and s.values == [0.5, 1.0, 1.5] and s.selector.filters["pricing"] == ["spot"]
    assert parse_vary_scale("demand:1,2").values == [1, 2]
    assert linspace(1, 2, 1) == [1]


@pytest.mark.parametrize("args, word", [
    (["--vary", "offerings[od].price_per_hour=1:2"], "START:STOP:STEPS"),
    (["--vary", "offerings[od].price_per_hour=a:2:3"], "not a number"),
    (["--vary", "offerings[od].price_per_hour=1:2:0"], "STEPS"),
    (["--vary", "offerings[nope].price_per_hour=1:2:2"], "nope"),
    (["--vary-scale", "pricing=spot,gpu=L4:1:2:2"], "pricing=spot,gpu=L4"),
    (["--vary", "a=1,2", "--vary", "b=1,2", "--vary", "c=1,2"], "one or two dimensions"),
    ([], "--vary"),
])
def test_bad_dimensions_exit_2(tmp_path, args, word):
    r = cli("sweep", write(tmp_path, toy()), *args)
    assert r.exit_code == 2, r.output
    assert word in r.stderr and "Traceback" not in r.stderr


def test_raising_a_price_or_a_demand_never_lowers_the_cost(tmp_path):
    p = write(tmp_path, toy())
    d = sweep_json(p, "--vary", "offerings[res].price_per_hour=30:110:3")
    objs = [pt["objective"] for pt in d["points"]]
    assert objs == sorted(objs) and objs[0] < objs[-1]
    import highspy  # the version the sweep names is the one HiGHS reports

    assert d["solver"] == "highs" and d["solver_version"] == f"highspy {highspy.Highs().version()}"
    d = sweep_json(p, "--vary-scale", "demand:0.5:3:3")
    objs = [pt["objective"] for pt in d["points"]]
    assert all(a <= b + 1e-6 for a, b in zip(objs, objs[1:])) and objs[0] < objs[-1]
    d = sweep_json(p, "--vary-scale", "pricing=spot:0.5:2:3", "--scale", "demand,service=chat:1.5")
    objs = [pt["objective"] for pt in d["points"]]
    assert all(a <= b + 1e-6 for a, b in zip(objs, objs[1:]))


def test_points_break_points_and_outputs(tmp_path):
    p = write(tmp_path, toy())
    out, png = tmp_path / "out", tmp_path / "sweep.png"
    d = sweep_json(p, "--vary", "offerings[res].price_per_hour=40:100:4", "-o", out, "--plot", png)
    assert [pt["values"] for pt in d["points"]][:2] == [{"offerings[res].price_per_hour": 40},
                                                       {"offerings[res].price_per_hour": 60}]
    for pt in d["points"]:
        assert {"values", "status", "objective", "mix"} <= set(pt)
        # proven optimal (the point solved or settled): its bound is its objective, its gap within the 1e-6
        assert pt["status"] == "optimal" and 0 <= pt["gap"] <= 1e-6
        assert pt["bound"] == pytest.approx(pt["objective"], rel=1e-6)
    # cheap reservations are taken, dear ones are not: the mix changes once reservations stop paying
    assert d["points"][0]["mix"].get("res") and not d["points"][-1]["mix"].get("res")
    assert d["break_points"] and all(b["changes"] for b in d["break_points"])
    b = d["break_points"][0]
    assert d["points"][b["from_index"]]["mix"] != d["points"][b["to_index"]]["mix"]
    assert (out / "points.csv").read_text().count("\n") == 5 and (out / "break_points.csv").exists()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # never overwrite without --force, and refuse before solving anything
    before = png.read_bytes()
    r = cli("sweep", p, "--vary", "offerings[res].price_per_hour=40:100:2", "--plot", png)
    assert r.exit_code == 2 and "overwrite" in r.stderr and png.read_bytes() == before
    r = cli("sweep", p, "--vary", "offerings[res].price_per_hour=40:100:2", "-o", out)
    assert r.exit_code == 2 and "overwrite" in r.stderr
    r = cli("sweep", p, "--vary", "offerings[res].price_per_hour=40:100:2", "-o", out, "--plot", png, "--force")
    assert r.exit_code == 0, r.output
    assert (out / "points.csv").read_text().count("\n") == 3
    # the table names the break points; no progress bar when stderr is not a terminal
    r = cli("sweep", p, "--vary", "offerings[res].price_per_hour=40,100")
    assert r.exit_code == 0 and "Break points" in r.stdout and "res 1->0" in r.stdout
    assert " gap " not in r.stdout.splitlines()[1]  # every point proven: no gap column
    assert "\r" not in r.stderr


def test_two_dimensions_plot(tmp_path):
    p = write(tmp_path, toy())
    png = tmp_path / "grid.png"
    d = sweep_json(p, "--vary", "offerings[res].price_per_hour=40:100:2", "--vary-scale", "demand:1:2:2",
                   "--plot", png)
    assert len(d["points"]) == 4 and png.exists()
    assert d["points"][1]["values"] == {"offerings[res].price_per_hour": 40, "scale(demand)": 2}


def _digest(d: dict) -> list:
    return [(p["index"], p["values"], p["status"], p["objective"], p["mix"], p["by_pricing"]) for p in d["points"]]


def test_serial_processes_and_dask_agree(tmp_path):
    from dask.distributed import LocalCluster

    p = write(tmp_path, toy())
    args = [p, "--vary", "offerings[res].price_per_hour=40,100", "--vary-scale", "pricing=spot:0.5:1.5:2"]
    serial = sweep_json(*args)
    procs = sweep_json(*args, "--workers", "2")
    assert _digest(procs) == _digest(serial)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        dask = sweep_json(*args, "--executor", "dask", "--scheduler", cluster.scheduler_address)
    finally:
        cluster.close()
    assert _digest(dask) == _digest(serial)
    assert serial["break_points"] == procs["break_points"] == dask["break_points"]


def test_progress_bar_only_on_a_terminal():
    import io

    from optimizer.studies.sweep import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress(3, stream=stream)
        for _ in range(3):
            bar.update()
        bar.close()
    assert "\r" in tty.getvalue() and "3/3" in tty.getvalue()
    assert pipe.getvalue() == ""
