"""Latency under load against public online-serving measurements (closed loop, fixed concurrency).

Usage::

    python bench/online.py [bench/data/online_serving.csv] [--set NAME=VALUE ...]

For every row, ``gpuopt estimate inference ... --concurrency C`` (the Python
API, same model) is compared with the measured mean TTFT, mean TPOT (the
source's inter-token latency) and output tokens/s; the table gives each
error in percent (model / measured - 1) and the median absolute error per
metric. These rows were not used to fit any factor.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from optimizer.api import estimate_inference  # noqa: E402

METRICS = ("ttft_ms", "tpot_ms", "output_tokens_per_s")


def evaluate(csv_path: str, overrides: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per measurement: the measured figures, the model's, and the error of each in percent."""
    rows = []
    for r in pd.read_csv(csv_path).itertuples(index=False):
        est = estimate_inference(r.model, r.gpu, int(r.gpu_count), precision=r.precision,
                                 prompt_tokens=int(r.prompt_tokens), output_tokens=int(r.output_tokens),
                                 concurrency=int(r.concurrency), efficiency=overrides or None)
        out = {"model": r.model, "gpu": f"{r.gpu_count}x{r.gpu}", "precision": r.precision,
               "isl:osl": f"{r.prompt_tokens}:{r.output_tokens}", "concurrency": r.concurrency}
        for m in METRICS:
            measured, model = float(getattr(r, m)), float(est[m])
            out[m] = measured
            out[m + "_model"] = round(model, 2)
            out[m + "_err_pct"] = round(100.0 * (model / measured - 1.0), 1)
        rows.append(out)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="?", default=str(Path(__file__).resolve().parent / "data" / "online_serving.csv"))
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override an efficiency factor")
    args = ap.parse_args(argv)
    over = {k: float(v) for k, v in (s.split("=", 1) for s in args.set)}
    data = evaluate(args.csv, over)
    print(data.to_string(index=False))
    print()
    for m in METRICS:
        print(f"median |error| {m}: {data[m + '_err_pct'].abs().median():.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
