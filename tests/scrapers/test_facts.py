"""Facts files: every shipped file loads, rules resolve, and apply_facts never overrides a feed."""

from __future__ import annotations

from importlib import resources

import pytest

from app.records import Billing, Interconnect, Network, OfferRecord
from scrapers.facts import FactsError, apply_facts, load_facts, parse_facts

SAMPLE_CLOUDS = [
    "lambda", "cudo", "do", "fluidstack", "jarvislabs", "nebius", "paperspace",
    "primeintellect", "seeweb", "vast", "verda",
]  # fmt: skip
LIVE = ["azure", "vastai", "tensordock", "oci", "aws", "lambdalabs", "runpod", "verda", "gcp"]


def _record(**kw: object) -> OfferRecord:
    base: dict[str, object] = {
        "provider": "lambda", "instance_type": "gpu_8x_h100_sxm5", "region": "us-east-1",
        "gpu_model": "h100-sxm", "gpu_raw_name": "H100 (80 GB SXM5)", "gpu_count": 8,
        "price_per_hour": 23.92,
    }  # fmt: skip
    base.update(kw)
    return OfferRecord.model_validate(base)


@pytest.mark.parametrize("provider", sorted(set(SAMPLE_CLOUDS + LIVE)))
def test_every_expected_provider_has_facts(provider: str) -> None:
    facts = load_facts(provider)
    assert facts.describe("x", "h100-sxm", 8) or facts.data.interconnect


def test_all_shipped_files_parse() -> None:
    folder = resources.files("scrapers").joinpath("facts")
    names = [p.name for p in folder.iterdir() if p.name.endswith(".yaml")]
    assert len(names) >= 15
    for name in names:
        parse_facts(name, folder.joinpath(name).read_text(encoding="utf-8"))


def test_unknown_provider_and_path_tricks_give_empty_facts() -> None:
    for name in ("nosuch", "../etc/passwd", "_common", ""):
        facts = load_facts(name)
        assert facts.billing is Billing.UNKNOWN
        assert facts.interconnect_for("BM.GPU.H100.8", "h100-sxm", 8) is Interconnect.UNKNOWN


def test_invalid_file_raises() -> None:
    with pytest.raises(FactsError):
        parse_facts("x", "billing: {value: fortnight, source: s}")
    with pytest.raises(FactsError):
        parse_facts("x", "interconnect: [{instance_type: '(', value: pcie, source: s}]")
    with pytest.raises(FactsError):
        parse_facts("x", "billing: {value: hour}")  # a fact without a source is rejected


def test_apply_fills_unknown_fields() -> None:
    out = apply_facts(_record(), load_facts("lambda"))
    assert out.billing is Billing.MINUTE
    assert out.interconnect is Interconnect.NVSWITCH
    assert out.network is Network.ETHERNET


def test_feed_values_win() -> None:
    rec = _record(
        billing="second",
        interconnect="nvlink",
        network="infiniband",
        network_gbps=400,
        provider_url="https://example.com/offer/1",
    )
    assert apply_facts(rec, load_facts("lambda")) == rec


def test_single_gpu_gets_no_interconnect() -> None:
    facts = load_facts("lambda")
    out = apply_facts(_record(instance_type="gpu_1x_h100_sxm5", gpu_count=1), facts)
    assert out.interconnect is Interconnect.UNKNOWN
    described = {f.name: f.value for f in facts.describe("gpu_1x_h100_sxm5", "h100-sxm", 1)}
    assert described["interconnect"] == "n/a (single GPU)"


@pytest.mark.parametrize(
    ("provider", "instance_type", "gpu", "count", "interconnect", "network", "gbps"),
    [
        ("aws", "p5.48xlarge", "h100-sxm", 8, "nvswitch", "efa", 3200),
        ("aws", "g5.12xlarge", "a10g", 4, "pcie", "ethernet", None),
        ("azure", "Standard_ND96isr_H100_v5", "h100-sxm", 8, "nvswitch", "infiniband", 3200),
        ("azure", "Standard_NC80adis_H100_v5", "h100-nvl", 2, "nvlink", "ethernet", None),
        ("oci", "BM.GPU.H100.8", "h100-sxm", 8, "nvswitch", "roce", 3200),
        ("gcp", "a3-highgpu-8g", "h100-sxm", 8, "nvswitch", "ethernet", 1000),
        (
            "nebius",
            "gpu-h100-sxm_8gpu-128vcpu-1600gb",
            "h100-sxm",
            8,
            "nvswitch",
            "infiniband",
            3200,
        ),
        ("fluidstack", "H100_PCIE_80GB::4", "h100-pcie", 4, "pcie", "unknown", None),
        ("cudo", "epyc-genoa-l40s-graphics_2x16v32gb", "l40s", 2, "pcie", "unknown", None),
        ("vastai", "vast-1-2x-rtx-4090", "rtx-4090", 2, "pcie", "ethernet", None),
    ],
)
def test_rules(
    provider: str, instance_type: str, gpu: str, count: float,
    interconnect: str, network: str, gbps: float | None,
) -> None:  # fmt: skip
    facts = load_facts(provider)
    assert facts.interconnect_for(instance_type, gpu, count) == interconnect
    assert facts.network_for(instance_type, gpu, count) == (network, gbps)
