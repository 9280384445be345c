"""SkyPilot vms.csv importer: one small fixture per catalog quirk (tests/fixtures/skypilot/)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from optimizer.errors import InputError
from optimizer.importers import gpu_name_map, load_offering_file
from optimizer.importers.derive import interruptions_per_hour
from optimizer.importers.offerings import dump_offering_file
from optimizer.importers.skypilot import gpu_memory_gb, import_skypilot, map_accelerator, parse_gpu_info
from optimizer.schema import Offering

FIX = Path(__file__).parent / "fixtures" / "skypilot"


def run(name: str, provider: str, **kw):
    aliases = gpu_name_map()
    offs, report = import_skypilot(FIX / name, provider, date="2026-11-01", aliases=aliases,
                                   known_gpus=set(aliases.values()), **kw)
    return {o.id: o for o in offs}, report


def test_aws_columns_by_name_zones_fold_to_one_offering_per_region():
    offs, report = run("aws_zones.csv", "aws")
    od = offs["aws-p5.48xlarge-us-east-1-od"]
    spot = offs["aws-p5.48xlarge-us-east-1-spot"]
    assert (od.gpu, od.gpus_per_unit, od.price_per_hour) == ("H100-SXM", 8, 55.04)
    # three us-east-1 zones fold to one offering; use1-az1's 55.04 equals on-demand (a placeholder), so
    # two quotes remain, 10.2397 (a local zone) and 17.6289: the middle one, the dearer of two, is taken
    assert spot.price_per_hour == pytest.approx(17.6289)
    assert "use1-az6" in spot.notes and "10.2397 to 17.6289" in spot.notes
    cheapest, _ = run("aws_zones.csv", "aws", spot_zone="cheapest")
    assert cheapest["aws-p5.48xlarge-us-east-1-spot"].price_per_hour == pytest.approx(10.2397)
    assert sum(1 for k in offs if k.startswith("aws-p5.48xlarge-us-east-1")) == 2
    # ca-central-1: the only spot quote equals on-demand -> placeholder, no spot offering
    assert "aws-p5.48xlarge-ca-central-1-od" in offs
    assert "aws-p5.48xlarge-ca-central-1-spot" not in offs
    assert "p5.48xlarge in ca-central-1" in report.spot_placeholder
    for o in offs.values():
        assert o.source and "aws_zones.csv" in o.source and o.date == "2026-11-01"
        assert o.provider == "aws" and o.instance_type


def test_aws_a100_40_vs_80_and_capacity_block_only_rows():
    offs, report = run("aws_zones.csv", "aws")
    assert offs["aws-p4d.24xlarge-us-east-1-od"].gpu == "A100-40GB"
    assert offs["aws-p4de.24xlarge-us-east-1-od"].gpu == "A100-80GB"
    # p5e has no on-demand price (capacity-block only): reported, no on-demand offering
    assert "aws-p5e.48xlarge-us-east-2-od" not in offs
    assert "p5e.48xlarge in us-east-2" in report.no_price
    assert offs["aws-p5e.48xlarge-us-east-2-spot"].gpu == "H200"


def test_fractional_gpu_counts_are_skipped_and_reported():
    offs, report = run("aws_zones.csv", "aws")
    assert not any("g6f" in k for k in offs)
    assert any("g6f.large" in k for k in report.fractional)
    offs, report = run("azure_fractional.csv", "azure")
    assert not any("nv6ads" in k for k in offs)
    assert sum(report.fractional.values()) == 1
    assert offs["azure-standard-nv36ads-a10-v5-eastus-od"].gpu == "A10"
    assert any("fractional" in line for line in report.lines())


def test_spot_interruption_rate_from_monthly_band():
    offs, _ = run("aws_zones.csv", "aws")
    lam = offs["aws-p5.48xlarge-us-east-1-spot"].interruptions_per_hour
    assert lam == pytest.approx(-math.log(1 - 0.15) / 730, rel=1e-5)
    offs, _ = run("aws_zones.csv", "aws", interruption_band=0.05)
    assert offs["aws-p5.48xlarge-us-east-1-spot"].interruptions_per_hour == pytest.approx(
        interruptions_per_hour(0.05), rel=1e-5)
    assert all(o.interruptions_per_hour is None for o in offs.values() if o.pricing == "on_demand")


def test_crlf_line_endings_and_lambda_column_order(tmp_path):
    raw = (FIX / "lambda_crlf.csv").read_bytes()
    assert b"\r\n" in raw, "fixture must keep its CRLF line endings"
    offs, report = run("lambda_crlf.csv", "lambda")
    pcie = offs["lambda-gpu-1x-h100-pcie-us-east-1-od"]
    assert (pcie.gpu, pcie.price_per_hour) == ("H100-PCIe", 3.29)
    assert offs["lambda-gpu-8x-h100-sxm5-us-east-1-od"].gpu == "H100-SXM"
    assert offs["lambda-gpu-8x-h100-sxm5-us-west-1-od"].region == "us-west-1"
    assert offs["lambda-gpu-1x-a100-sxm4-us-east-1-od"].gpu == "A100-40GB"
    assert not any(o.pricing == "spot" for o in offs.values())   # blank SpotPrice column
    assert report.cpu_rows == 1
    assert all("\r" not in o.region and "\r" not in o.instance_type for o in offs.values())
    # the same data with LF endings gives the same offerings
    lf = tmp_path / "lambda_lf.csv"
    lf.write_bytes(raw.replace(b"\r\n", b"\n"))
    offs_lf, _ = import_skypilot(lf, "lambda", date="2026-11-01", aliases=gpu_name_map())
    assert {k: o.price_per_hour for k, o in offs.items()} == {o.id: o.price_per_hour for o in offs_lf}


def test_gcp_gpu_rows_priced_with_their_host_vm():
    offs, report = run("gcp_attachable.csv", "gcp")
    od = offs["gcp-a3-highgpu-8g-us-central1-od"]
    assert od.gpu == "H100-SXM" and od.gpus_per_unit == 8
    assert od.price_per_hour == pytest.approx(33.60609 + 9.46006)
    # spot: zones where both the GPU and the host have a price (zone f has no host row): a 32.0104 + 3.86318,
    # c 31.0 + 3.5; the dearer of the two middles is a's
    spot = offs["gcp-a3-highgpu-8g-us-central1-spot"]
    assert spot.price_per_hour == pytest.approx(32.0104 + 3.86318)
    assert any("us-central1-f" in k for k in report.no_host)
    # a4 host rows carry price 0.0: the B200 row already holds the whole price
    assert offs["gcp-a4-highgpu-8g-us-central1-od"].price_per_hour == pytest.approx(90.216)
    # N1 hosts carry several GPU counts: one offering per pairing
    assert offs["gcp-n1-highmem-8-1xt4-us-central1-od"].price_per_hour == pytest.approx(0.35 + 0.47321)
    assert offs["gcp-n1-highmem-8-2xt4-us-central1-od"].gpus_per_unit == 2
    assert report.unknown["tpu-v5p-8"] == 2


def test_azure_extra_fields_and_h100_variants():
    offs, report = run("azure_fractional.csv", "azure")
    assert report.extra_fields >= 2
    assert offs["azure-standard-nd96isr-h100-v5-eastus-od"].gpu == "H100-SXM"
    assert offs["azure-standard-nc40ads-h100-v5-eastus-od"].gpu == "H100-NVL"
    assert offs["azure-standard-nc24ads-a100-v4-eastus-od"].gpu == "A100-PCIe-80GB"
    # H200 spot equal to on-demand is a placeholder
    assert "azure-standard-nd96isr-h200-v5-eastus2-spot" not in offs
    assert "azure-standard-nd96isr-h200-v5-eastus2-od" in offs


def test_blank_nonnumeric_and_inverted_prices():
    offs, report = run("runpod_blank_prices.csv", "runpod")
    assert offs["runpod-1x-h100-sxm-secure-us-od"].price_per_hour == 2.99
    assert offs["runpod-1x-h100-sxm-secure-us-spot"].price_per_hour == 2.69
    # spot above on-demand (RunPod L40S): dropped and reported
    assert "runpod-1x-l40s-secure-us-spot" not in offs
    assert "1x_L40S_SECURE in US" in report.spot_placeholder
    # no price at all: no offering, reported
    assert not any("l4-secure" in k for k in offs)
    assert "1x_L4_SECURE in US" in report.no_price
    # non-numeric price in one region; the other region still imports
    assert "runpod-1x-h100-secure-us-od" not in offs
    assert offs["runpod-1x-h100-secure-ca-od"].gpu == "H100-PCIe"
    # duplicated rows fold to one offering
    assert sum(1 for k in offs if k.startswith("runpod-8x-b200")) == 1
    assert offs["runpod-1x-a100-80gb-secure-ca-od"].gpu == "A100-PCIe-80GB"


def test_unknown_accelerators_are_reported_with_counts():
    offs, report = run("unknown_accelerators.csv", "lambda")
    assert report.unknown == {"A6000": 2, "V100": 1}
    assert list(offs) == ["lambda-gpu-1x-a10-us-east-1-od"]
    text = "\n".join(report.lines())
    assert "UNKNOWN" in text and "A6000: 2" in text and "V100: 1" in text


def test_vast_memory_is_total_and_counts_must_be_powers_of_two():
    offs, report = run("vast_memory.csv", "vast")
    # 2 x A100 with 163840 MiB in total = 80 GB each
    two = offs["vast-2x-a100-sxm4-32-65536-texas-us-na-od"]
    assert two.gpu == "A100-80GB" and two.region == "Texas, US, NA"
    assert offs["vast-1x-a100-sxm4-32-65536-quebec-ca-na-od"].gpu == "A100-40GB"
    assert any("RTX4090 x 5" in k for k in report.not_pow2)
    assert offs["vast-1x-rtx-4090-32-65536-germany-de-eu-od"].gpu == "RTX-4090"
    assert not any(o.pricing == "spot" for o in offs.values())   # 0.00 spot = no quote


def test_gpuinfo_is_parsed_as_a_literal_never_evaluated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    offs, _ = run("gpuinfo_not_literal.csv", "cudo")
    assert not (tmp_path / "GPUOPT_PWNED").exists()
    assert offs["cudo-evil-1x-a100-eu-1-od"].gpu == "A100-40GB"   # memory unknown -> 40 GB
    assert offs["cudo-odd-1x-a100-eu-1-od"].gpu == "A100-40GB"
    cudo = offs["cudo-cudo-1x-a100-eu-1-od"]
    assert cudo.gpu == "A100-80GB" and cudo.price_per_hour == 1.5    # float noise rounded
    assert parse_gpu_info("__import__('os')") is None
    assert parse_gpu_info("{'Gpus': [{'MemoryInfo': {'SizeInMiB': 80}}]}") is not None


def test_gpu_memory_quirks():
    info = parse_gpu_info("{'Gpus': [{'MemoryInfo': {'SizeInMiB': 80}}], 'TotalGpuMemoryInMiB': 80}")
    assert gpu_memory_gb(info, 1, "runpod") == 80          # RunPod v8 writes GB
    info = parse_gpu_info("{'Gpus': [{'MemoryInfo': {'SizeInMiB': 287542}}]}")
    assert gpu_memory_gb(info, 2, "vast") == pytest.approx(287542 / 2 / 1024)
    info = parse_gpu_info("{'Gpus': [{'Count': 8.0, 'MemoryInfo': {'SizeInMiB': 81920}}]}")
    assert gpu_memory_gb(info, 8, "lambda") == 80


@pytest.mark.parametrize("name, inst, gpu", [
    ("H100", "p5.48xlarge", "H100-SXM"),
    ("H100", "gpu_1x_h100_pcie", "H100-PCIe"),
    ("H100", "gpu_8x_h100_sxm5", "H100-SXM"),
    ("H100", "Standard_NC80adis_H100_v5", "H100-NVL"),
    ("H100", "1x-H100_NVL-32-65536", "H100-NVL"),
    ("H100", "1x_H100_SECURE", "H100-PCIe"),
    ("H100-MEGA", "a3-megagpu-8g", "H100-SXM"),
    ("H200-SXM", "8x_H200-SXM_SECURE", "H200"),
    ("A100-80GB", "H100_PCIE_80GB::1", "A100-PCIe-80GB"),
    ("A100-80GB-SXM", "1x_A100-80GB-SXM_SECURE", "A100-80GB"),
    ("RTX4090", "1x_RTX4090_SECURE", "RTX-4090"),
    ("MI300X", "Standard_ND96isr_MI300X_v5", "MI300X"),
])
def test_accelerator_mapping(name, inst, gpu):
    assert map_accelerator(name, inst, None, gpu_name_map())[0] == gpu


def test_missing_column_and_missing_file_are_input_errors(tmp_path):
    with pytest.raises(InputError) as exc:
        import_skypilot(FIX / "missing_price_column.csv", "lambda")
    assert "Price" in str(exc.value) and "missing_price_column.csv" in str(exc.value)
    with pytest.raises(InputError, match="file not found"):
        import_skypilot(tmp_path / "nope.csv", "aws")
    with pytest.raises(InputError, match="provider"):
        import_skypilot(FIX / "aws_zones.csv", "a w s")


def test_default_date_is_the_file_modification_date(tmp_path):
    p = tmp_path / "vms.csv"
    p.write_bytes((FIX / "unknown_accelerators.csv").read_bytes())
    os.utime(p, (1_700_000_000, 1_700_000_000))   # 2023-11-14
    offs, _ = import_skypilot(p, "lambda", aliases=gpu_name_map())
    assert offs[0].date == "2023-11-14"


def test_imported_file_round_trips_through_the_loader(tmp_path):
    offs, _ = run("aws_zones.csv", "aws")
    out = tmp_path / "aws.yaml"
    dump_offering_file(out, list(offs.values()), provider="aws")
    back = load_offering_file(out)
    assert [o.model_dump() for o in back] == [o.model_dump() for o in offs.values()]
    assert all(isinstance(o, Offering) for o in back)
