"""What a benchmark ran on: CPUs, load, the solvers' versions and the commit, as the lines its report opens with.

A timing is only comparable with another taken on the same machine, under
the same load, with the same solver versions: HiGHS 1.15.1 took 3 to 4
times as long as 1.16.0 to prove q3 on the same commit and machine
(docs/performance.md, "The HiGHS version, and this machine"). So every
benchmark report says all four. The versions are read from the installed
distributions' metadata, without importing them (highspy and OR-Tools each
carry a HiGHS and must not meet in one process).
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

#: the distributions whose versions a timing depends on: the solvers, and what builds their models
DISTRIBUTIONS = ("highspy", "ortools", "PuLP", "numpy", "pandas")


def versions() -> dict[str, str]:
    """Installed version of each of :data:`DISTRIBUTIONS` (``"absent"`` where it is not installed), and Python's."""
    out = {"python": platform.python_version()}
    for name in DISTRIBUTIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def commit() -> str:
    """The checkout's commit (short hash, ``+changes`` when the work tree differs from it), or ``"unknown"``
    outside a git checkout or without git."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def load() -> str:
    """The 1-, 5- and 15-minute load averages, as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def header(prefix: str = "# ") -> list[str]:
    """The lines a benchmark report opens with: CPUs and load at the start, then the commit and versions."""
    v = versions()
    return [f"{prefix}{os.cpu_count()} CPUs, load average at start {load()}",
            f"{prefix}commit {commit()}; " + ", ".join(f"{k} {val}" for k, val in v.items())]
