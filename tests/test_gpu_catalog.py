"""Sanity checks on the packaged GPU catalog."""

from __future__ import annotations

import pytest

from app.gpus.catalog import (
    MAX_DENSE_TFLOPS,
    UNKNOWN,
    CatalogError,
    GpuSpec,
    _parse,
    get_gpu,
    load_catalog,
)

REQUIRED = [
    "b200", "h200", "h100-sxm", "h100-pcie", "h100-nvl", "gh200", "a100-80gb-sxm",
    "a100-40gb-sxm", "a100-80gb-pcie", "l40s", "l40", "l4", "a10g", "a10", "a40", "rtx-a6000",
    "rtx-6000-ada", "rtx-4090", "rtx-3090", "v100-16gb", "v100-32gb", "t4", "mi300x", "mi250x",
    # families for feeds that don't state the form factor
    "h100-80gb", "a100-80gb", "a100-40gb",
]  # fmt: skip
MEMORY_TYPES = {"HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR5", "GDDR6", "GDDR6X", "GDDR7"}
FORM_FACTORS = {"SXM", "PCIe", "NVL", "OAM", "unknown"}


def _specs() -> list[GpuSpec]:
    return list(load_catalog().values())


@pytest.mark.parametrize("slug", REQUIRED)
def test_required_slug_present(slug: str) -> None:
    spec = get_gpu(slug)
    assert spec is not None
    assert spec.slug == slug


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.slug)
def test_entry_is_sane(spec: GpuSpec) -> None:
    assert spec.source.strip()
    assert spec.vendor in {"nvidia", "amd", "intel"}
    assert spec.memory_type in MEMORY_TYPES
    assert spec.form_factor in FORM_FACTORS
    assert spec.vram_gb > 0 and spec.vram_gib > 0
    assert spec.vram_gib <= spec.vram_gb * 1.08
    assert spec.memory_bandwidth_gbps > 0
    assert 0 < spec.fp16_tflops <= MAX_DENSE_TFLOPS
    if spec.bf16_tflops is not None:
        assert 0 < spec.bf16_tflops <= MAX_DENSE_TFLOPS
    if spec.nvlink_gbps is not None:
        assert spec.nvlink_gbps > 0
    assert spec.architecture


def test_families_are_marked_unknown_and_conservative() -> None:
    pairs = {
        "h100-80gb": ("h100-sxm", "h100-pcie"),
        "a100-80gb": ("a100-80gb-sxm", "a100-80gb-pcie"),
        "a100-40gb": ("a100-40gb-sxm", "a100-40gb-pcie"),
    }
    for family_slug, members in pairs.items():
        family = get_gpu(family_slug)
        assert family is not None and family.form_factor == "unknown"
        for member_slug in members:
            member = get_gpu(member_slug)
            assert member is not None
            assert family.vram_gb == member.vram_gb
            assert family.memory_bandwidth_gbps <= member.memory_bandwidth_gbps
            assert (family.bf16_tflops or 0) <= (member.bf16_tflops or 0)


def test_throughput_ordering() -> None:
    def tflops(slug: str) -> float:
        spec = get_gpu(slug)
        assert spec is not None
        return spec.bf16_tflops or spec.fp16_tflops

    assert tflops("b200") > tflops("h100-sxm") > tflops("h100-pcie") > tflops("a100-80gb-sxm")
    assert tflops("a100-80gb-sxm") > tflops("v100-32gb") > tflops("t4")
    assert tflops("l40s") > tflops("l40")


def test_known_datasheet_values() -> None:
    h100 = get_gpu("h100-sxm")
    assert h100 is not None
    assert (h100.vram_gb, h100.memory_bandwidth_gbps, h100.bf16_tflops) == (80, 3350, 989)
    assert h100.nvlink_gbps == 900 and h100.fp8 and h100.memory_type == "HBM3"
    assert round(h100.vram_gib, 1) == 79.6
    v100 = get_gpu("v100-16gb")
    t4 = get_gpu("t4")
    assert v100 is not None and t4 is not None
    assert v100.bf16_tflops is None and t4.bf16_tflops is None
    assert t4.fp16_tflops == 65
    a100_40 = get_gpu("a100-40gb-sxm")
    assert a100_40 is not None and a100_40.memory_bandwidth_gbps == 1555


def test_unknown_is_not_a_slug() -> None:
    assert get_gpu(UNKNOWN) is None
    assert get_gpu("no-such-gpu") is None


def test_load_is_cached() -> None:
    assert load_catalog() is load_catalog()


def _entry(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "slug": "x1", "vendor": "nvidia", "name": "X1", "vram_gb": 24, "vram_gib": 24,
        "memory_type": "GDDR6", "memory_bandwidth_gbps": 600, "bf16_tflops": 100,
        "fp16_tflops": 100, "fp8": False, "form_factor": "PCIe", "nvlink_gbps": None,
        "architecture": "ampere", "source": "vendor datasheet",
    }  # fmt: skip
    base.update(overrides)
    return base


@pytest.mark.parametrize(
    "bad",
    [
        {"memory_type": "DDR4"},
        {"form_factor": "Socket"},
        {"bf16_tflops": 5000},  # a sparse figure slipped in
        {"vram_gb": 0},
        {"vram_gib": 80},  # above the marketed 24 GB
        {"source": ""},
        {"extra_field": 1},
    ],
)
def test_bad_entries_fail_loudly(bad: dict[str, object]) -> None:
    with pytest.raises(CatalogError):
        _parse({"gpus": [_entry(**bad)]})


def test_bad_file_shapes_fail() -> None:
    with pytest.raises(CatalogError):
        _parse(None)
    with pytest.raises(CatalogError):
        _parse({"gpus": [_entry(), _entry()]})  # duplicate slug
    assert "x1" in _parse({"gpus": [_entry()]})
