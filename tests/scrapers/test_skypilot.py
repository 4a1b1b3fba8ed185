"""skypilot-catalog importer over recorded rows (tests/fixtures/skypilot/real/SOURCE.md)."""

from __future__ import annotations

import pytest

from app.records import Availability
from scrapers.skypilot import parse_catalog_csv, parse_gcp_catalog
from tests.scrapers.conftest import fixture_text


def real(name: str) -> str:
    return fixture_text("skypilot", f"real/{name}")


def test_real_hyperstack_rows_with_json_null_in_gpu_info_import() -> None:
    result = parse_catalog_csv("hyperstack", real("hyperstack_vms.csv"))
    assert result.warnings == []
    assert len(result.records) == 25
    by_type = {r.instance_type: r for r in result.records}
    a100 = by_type["n3-A100x1"]
    assert (a100.gpu_model, a100.vram_gib_per_gpu, a100.price_per_hour) == (
        "a100-80gb-pcie",
        80,
        1.35,
    )
    assert (a100.provider, a100.region) == ("hyperstack", "CANADA-1")
    assert {r.gpu_model for r in result.records} >= {"h100-sxm", "h100-pcie", "rtx-a6000", "l40"}
    assert all(r.availability is Availability.UNKNOWN for r in result.records)


def test_real_shadeform_rows_read_gb_sizes_as_gb() -> None:
    result = parse_catalog_csv("shadeform", real("shadeform_vms_excerpt.csv"))
    assert result.warnings == []
    by_key = {(r.instance_type, r.region): r for r in result.records}
    a6000 = by_key[("massedcompute_A6000x8", "kansascity-usa-1")]
    assert (a6000.gpu_model, a6000.gpu_count, a6000.vram_gib_per_gpu) == ("rtx-a6000", 8, 48)
    assert a6000.price_per_hour == 4.56
    sxm = by_key[("crusoe_A100-80G-sxm4x8", "culpeper-usa-1")]
    assert (sxm.gpu_model, sxm.vram_gib_per_gpu, sxm.price_per_hour) == ("a100-80gb-sxm", 80, 18.4)
    pro = by_key[("massedcompute_RTXPro6000", "beltsville-usa-1")]
    assert (pro.gpu_model, pro.vram_gib_per_gpu) == ("rtx-pro-6000", 96)
    assert by_key[("denvr_Gaudi2x8", "houston-usa-1")].gpu_model == "unknown"  # not carried
    # The fetcher lists only available instance types (available=true): in stock when recorded.
    assert all(r.availability is Availability.IN_STOCK for r in result.records)
    assert len(result.records) == 5


def test_real_lium_nodes_are_in_stock() -> None:
    result = parse_catalog_csv("lium", real("lium_vms.csv"))
    assert result.warnings == [] and len(result.records) == 40
    b200 = next(r for r in result.records if (r.instance_type, r.region) == ("B200_8x", "US"))
    assert (b200.gpu_model, b200.gpu_count, b200.price_per_hour) == ("b200", 8, 52.0)
    assert all(r.availability is Availability.IN_STOCK for r in result.records)


def test_real_aws_zone_rows_collapse_to_the_region_with_the_cheapest_spot() -> None:
    result = parse_catalog_csv("aws", real("aws_vms_excerpt.csv"))
    assert result.warnings == []
    by_type = {r.instance_type: r for r in result.records}
    p4d = by_type["p4d.24xlarge"]
    assert p4d.region == "us-east-1"
    assert (p4d.price_per_hour, p4d.spot_price_per_hour) == (21.957642, 2.4655)
    # AcceleratorName says only "A100"; the instance family fixes the SXM4 40 GB part.
    assert (p4d.gpu_model, p4d.vram_gib_per_gpu, p4d.gpu_count) == ("a100-40gb-sxm", 40, 8)
    assert by_type["g5g.xlarge"].gpu_model == "t4"
    assert len(result.records) == 2


def test_real_gcp_hosts_and_gpus_are_added_per_zone() -> None:
    result = parse_gcp_catalog(real("gcp_vms_excerpt.csv"), real("gcp_gpu_host_vms_excerpt.csv"))
    by_type = {r.instance_type: r for r in result.records}
    a3 = by_type["a3-highgpu-8g"]
    # The README's worked example: 9.46006 (host) + 33.60609 (H100 x8).
    assert a3.price_per_hour == pytest.approx(43.06615)
    assert a3.spot_price_per_hour == pytest.approx(2.88933 + 23.9408)
    assert (a3.gpu_model, a3.gpu_count, a3.region) == ("h100-sxm", 8, "us-central1")
    l4 = by_type["g2-standard-8"]
    assert l4.price_per_hour == pytest.approx(0.29358 + 0.56004)
    assert (l4.gpu_model, l4.vcpus) == ("l4", 8)
    assert "a4-highgpu-8g" not in by_type  # host priced 0.0 and not a machine gpufit prices
    assert sorted(by_type) == ["a3-highgpu-8g", "g2-standard-4", "g2-standard-8"]


def test_lambda_rows_collapse_to_the_direct_scrapers_region() -> None:
    header = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo\n"
    info = "\"{'Gpus': [{'Name': 'A100', 'Count': 1.0, 'MemoryInfo': {'SizeInMiB': 40960}}]}\""
    rows = "".join(f"gpu_1x_a100_sxm4,A100,1.0,30.0,200.0,1.99,{r},{info}\n" for r in ("a", "b"))
    result = parse_catalog_csv("lambda", header + rows)
    assert [(r.region, r.availability) for r in result.records] == [("any", Availability.UNKNOWN)]


@pytest.mark.parametrize(
    "gpu_info",
    [
        "\"{'Gpus': [{'Name': __import__('os').getcwd()}]}\"",
        "\"{'Gpus': [{'Name': nothing}]}\"",
    ],
)
def test_gpu_info_with_code_or_unknown_names_is_rejected(gpu_info: str) -> None:
    header = "InstanceType,AcceleratorName,AcceleratorCount,Price,GpuInfo\n"
    result = parse_catalog_csv("hyperstack", f"{header}x,A100,1,1.0,{gpu_info}\n")
    assert result.records == []
    assert len(result.warnings) == 1 and "skipped" in result.warnings[0]
