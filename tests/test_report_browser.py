"""The HTML report in a real browser (headless Chromium): no console errors, every chart drawn.

Skipped, with the reason, only where no Chromium is installed (Debian:
``apt-get install chromium``; ``.ci/run`` installs it where it can). The
screenshots are kept in ``test-artifacts/`` (not versioned).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_rentbuy import TINY
from test_whatif_toy import TOY, write

from conftest import gpuopt_here, write_problem

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed (apt-get install chromium)")


def gpuopt(*args) -> subprocess.CompletedProcess:
    """The command in this process (the browser is the real process here)."""
    return gpuopt_here(*args, cwd=ROOT)


def open_in_browser(page: Path, shot: Path) -> tuple[str, str]:
    """The DOM after the page's script ran, and the browser's log; a screenshot is written to ``shot``."""
    common = [BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              "--enable-logging=stderr", "--v=0", "--window-size=1200,2400"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    return dom.stdout, dom.stderr


def check_page(page: Path, name: str, expected_charts: set[str]) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"report-{name}.png"
    dom, log = open_in_browser(page, shot)
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    assert not [c for c in console if re.search(r"error|uncaught", c, re.I)], console
    charts = set(re.findall(r'data-chart="([^"]+)"', dom))
    assert expected_charts <= charts
    # the page's own check: every chart's SVG has its shapes (it sets these after load)
    drawn = re.search(r'data-charts-drawn="(\d+)"', dom)
    total = re.search(r'data-charts-total="(\d+)"', dom)
    assert drawn and total and drawn.group(1) == total.group(1) == str(len(charts))
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50, "the screenshot is blank"  # text, bars and lines in many shades


def test_solve_report_draws_every_chart(tmp_path):
    toy = write(tmp_path, TOY)
    page = tmp_path / "solve.html"
    r = gpuopt("solve", toy, "--html", page)
    assert r.returncode == 0, r.stderr
    check_page(page, "solve", {"cost-by-pricing", "cost-by-workload", "fleet", "utilisation"})


def test_rentbuy_report_from_saved_json(tmp_path):
    p = write_problem(tmp_path, TINY)
    saved = tmp_path / "rb.json"
    assert gpuopt("rentbuy", p, "--format", "json", "-o", saved, "--solver", "highs").returncode == 0
    page = tmp_path / "rentbuy.html"
    r = gpuopt("report", saved, "-o", page)
    assert r.returncode == 0, r.stderr
    assert json.loads(saved.read_text())["cash_flows"]["npv"] is not None
    check_page(page, "rentbuy", {"strategies", "cash-flows", "tornado"})
