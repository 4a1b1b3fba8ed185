"""Table-driven tests for GPU name normalization (spellings taken from real provider feeds)."""

from __future__ import annotations

import pytest

from app.gpus.catalog import UNKNOWN, load_catalog
from app.gpus.normalize import normalize_gpu_name

# (raw, memory_gib, context, expected)
CASES: list[tuple[str, float | None, str, str]] = [
    # --- H100: form factor from name, SKU or memory type; otherwise the 80 GB family
    ("NVIDIA H100 80GB HBM3", None, "", "h100-sxm"),  # nvidia-smi name of the SXM part
    ("H100 SXM", None, "", "h100-sxm"),
    ("H100_SXM5", None, "", "h100-sxm"),
    ("H100-80GB", None, "", "h100-80gb"),
    ("H100 PCIE", None, "", "h100-pcie"),
    ("H100 NVL", None, "", "h100-nvl"),
    ("H100 (80 GB SXM5)", None, "", "h100-sxm"),
    ("gpu_8x_h100_sxm5", None, "", "h100-sxm"),
    ("1x H100 SXM5 80GB", None, "", "h100-sxm"),
    ("1H100.80S.30V", None, "", "h100-sxm"),
    ("H100_SXM5_80GB", None, "", "h100-sxm"),
    ("H100_PCIE_80GB", None, "", "h100-pcie"),
    ("H100_NVLINK_80GB", None, "", "h100-sxm"),  # fluidstack: HGX board, not H100 NVL
    ("H100-SXM-80GB", None, "", "h100-sxm"),
    ("h100-sxm5-80gb", None, "", "h100-sxm"),
    ("H100", 79.6, "", "h100-80gb"),
    ("H100", 93.6, "", "h100-nvl"),
    ("H100", None, "", "h100-80gb"),
    ("H100", 141.0, "", UNKNOWN),
    ("H100", 80.0, "gpu_8x_h100_sxm5", "h100-sxm"),
    ("H100", 80.0, "gpu_1x_h100_pcie", "h100-pcie"),
    ("H100", 80.0, "1H100.80S.32V", "h100-sxm"),
    ("H100", 80.0, "H100_PCIE_80GB::2", "h100-pcie"),
    ("H100", 93.6, "1x-H100_NVL-32-65536", "h100-nvl"),
    ("H100", 80.0, "gpu-h100-sxm_8gpu-128vcpu-1600gb", "h100-sxm"),
    ("H100", 80.0, "1x_H100_24V_200G", "h100-80gb"),  # 200G is host RAM
    ("H100", None, "Standard_NC40ads_H100_v5", "h100-nvl"),
    ("Standard_ND96isr_H100_v5", None, "", "h100-sxm"),
    ("Standard_NC40ads_H100_v5", None, "", "h100-nvl"),
    ("nvidia-h100-80gb", None, "", "h100-sxm"),
    ("nvidia-h100-mega-80gb", None, "", "h100-sxm"),
    ("H100 80GB GPU", None, "", "h100-80gb"),
    ("BM.GPU.H100.8", None, "", "h100-sxm"),
    ("gpu-h100-sxm", None, "", "h100-sxm"),
    ("nvidia_h100", 79.6, "", "h100-80gb"),
    # --- H200 / GH200
    ("NVIDIA H200", None, "", "h200"),
    ("H200 SXM", None, "", "h200"),
    ("H200 NVL", None, "", "h200-nvl"),
    ("H200-141G-SXM5", None, "", "h200"),
    ("H200 SXM5 141GB", None, "", "h200"),
    ("H200", 140.4, "1x-H200-32-65536", "h200"),
    ("Standard_ND96isr_H200_v5", None, "", "h200"),
    ("GH200", 96.0, "gpu_1x_gh200", "gh200"),
    ("H200 PCIe", None, "", UNKNOWN),
    # --- A100 / A800: memory picks 40 vs 80, form factor picks SXM vs PCIe
    ("NVIDIA A100-SXM4-80GB", None, "", "a100-80gb-sxm"),
    ("NVIDIA A100 80GB PCIe", None, "", "a100-80gb-pcie"),
    ("A100 SXM4", 40.0, "", "a100-40gb-sxm"),
    ("A100 SXM4", None, "", UNKNOWN),
    ("A100 PCIE", 80.0, "", "a100-80gb-pcie"),
    ("A100 PCIe", None, "", UNKNOWN),
    ("A100X", None, "", "a100-80gb-pcie"),
    ("A800 PCIE", None, "", "a800-80gb-pcie"),
    ("A800", 80.0, "intel-ice-lake-a800-pci_1x12v24gb", "a800-80gb-pcie"),
    ("A800", 80.0, "", "a800-80gb"),
    ("A100 (40 GB SXM4)", None, "", "a100-40gb-sxm"),
    ("gpu_8x_a100_80gb_sxm4", None, "", "a100-80gb-sxm"),
    ("A100 SXM4 80GB", None, "", "a100-80gb-sxm"),
    ("A100_NVLINK_80GB", None, "", "a100-80gb-sxm"),
    ("A100_PCIE_40GB", None, "", "a100-40gb-pcie"),
    ("A100-PCIe-80GB", None, "", "a100-80gb-pcie"),
    ("a100-pcie-80gb", None, "", "a100-80gb-pcie"),
    ("NVIDIA_A100", 40.0, "", "a100-40gb"),
    ("NVIDIA_A100", None, "", UNKNOWN),
    ("A100", 40.0, "gpu_1x_a100", "a100-40gb"),
    ("A100", 40.0, "1x-A100_SXM4-32-65536", "a100-40gb-sxm"),
    ("A100", 80.0, "epyc-genoa-a100-pcie_1x12v24gb", "a100-80gb-pcie"),
    ("A100-80GB", None, "", "a100-80gb"),
    ("a100-80gb", 80.0, "A100_PCIE_80GB::1", "a100-80gb-pcie"),
    ("A100-80GB", 80.0, "gpu_8x_a100_80gb_sxm4", "a100-80gb-sxm"),
    ("A100-80GB", 40.0, "", UNKNOWN),
    ("nvidia-tesla-a100", None, "", "a100-40gb-sxm"),
    ("nvidia-a100-80gb", None, "", "a100-80gb-sxm"),
    ("Standard_ND96amsr_A100_v4", None, "", "a100-80gb-sxm"),
    ("Standard_ND96asr_v4", None, "", "a100-40gb-sxm"),
    ("BM.GPU4.8", None, "", "a100-40gb-sxm"),
    ("BM.GPU.A100-v2.8", None, "", "a100-80gb-sxm"),
    # --- GeForce
    ("NVIDIA GeForce RTX 4090", None, "", "rtx-4090"),
    ("RTX 4090", 24.0, "", "rtx-4090"),
    ("RTX4090", 23.99, "1x-RTX_4090-32-65536", "rtx-4090"),
    ("geforcertx4090-pcie-24gb", None, "", "rtx-4090"),
    ("RTX 4090", 80.0, "", UNKNOWN),  # memory contradicts the name
    ("RTX4090", 47.99, "", UNKNOWN),  # 48 GB modded cards are not a 4090 we can spec
    ("RTX 4090 D", None, "", UNKNOWN),
    ("RTX 3090", None, "", "rtx-3090"),
    ("RTX 3090 Ti", None, "", UNKNOWN),
    ("RTX5090", 31.8, "", "rtx-5090"),
    ("RTX3060", 12.0, "1x-RTX_3060-32-65536", "rtx-3060"),
    ("RTX3060", 8.0, "2x-RTX_3060_Ti-32-65536", "rtx-3060-ti"),
    ("RTX3060", 8.0, "", UNKNOWN),
    ("RTX4060", 16.0, "1x-RTX_4060_Ti-32-65536", "rtx-4060-ti-16gb"),
    ("RTX4070", 16.0, "2x-RTX_4070S_Ti-32-65536", "rtx-4070-ti-super"),
    ("RTX3080", 10.0, "", "rtx-3080"),
    ("RTX3070", 8.0, "", "rtx-3070"),
    # --- the RTX 6000 family of traps
    ("NVIDIA RTX 6000 Ada Generation", None, "", "rtx-6000-ada"),
    ("RTX 6000Ada", None, "", "rtx-6000-ada"),
    ("RTX6000 Ada 48GB", None, "", "rtx-6000-ada"),
    ("nvidia_rtx6000_ada", None, "", "rtx-6000-ada"),
    ("RTX6000-Ada", 48.0, "", "rtx-6000-ada"),
    ("NVIDIA RTX A6000", None, "", "rtx-a6000"),
    ("RTX A6000 48GB", None, "", "rtx-a6000"),
    ("RTX_A6000_48GB", None, "", "rtx-a6000"),
    ("RTX-A6000", None, "", "rtx-a6000"),
    ("rtxa6000-pcie-48gb", None, "", "rtx-a6000"),
    ("A6000", 48.0, "gpu_1x_a6000", "rtx-a6000"),
    ("RTX PRO 6000 96GB", None, "", "rtx-pro-6000"),
    ("RTX-PRO6000", None, "", "rtx-pro-6000"),
    ("RTX PRO Server 6000", None, "", "rtx-pro-6000"),
    ("RTXPRO6000S", 95.6, "1x-RTX_PRO_6000_S-32-65536", "rtx-pro-6000"),
    ("RTX PRO 6000 96GB", 0.0, "ECS1GPU12", "rtx-pro-6000"),  # 0 = not reported
    ("Quadro RTX 6000", None, "", "quadro-rtx-6000"),
    ("RTX6000", 24.0, "gpu_1x_rtx6000", "quadro-rtx-6000"),
    ("RTX6000", None, "", UNKNOWN),  # could be the Ada card with "Ada" dropped
    ("RTX 6000", 48.0, "", UNKNOWN),
    ("RTXA2000", 6.0, "2x-RTX_A2000-32-65536", "rtx-a2000-6gb"),
    ("RTX A2000 12GB", None, "", "rtx-a2000"),
    ("RTXA5000", 24.0, "", "rtx-a5000"),
    ("A4000", None, "", "rtx-a4000"),
    # --- V100
    ("Tesla V100-SXM2-16GB", None, "", "v100-16gb"),
    ("Tesla V100-PCIE-16GB", None, "", "v100-16gb"),
    ("Tesla V100-SXM2-32GB", None, "", "v100-32gb"),
    ("Tesla V100", 15.8, "", "v100-16gb"),
    ("Tesla V100", None, "", UNKNOWN),
    ("Tesla_V100_SXM2_16GB", None, "", "v100-16gb"),
    ("nvidia-tesla-v100", None, "", "v100-16gb"),
    ("VM.GPU3.4", None, "", "v100-16gb"),
    ("Standard_ND40rs_v2", None, "", "v100-32gb"),
    ("V100-32GB", None, "V100-32G", "v100-32gb"),
    ("V100S", None, "", UNKNOWN),
    # --- Ada / Ampere datacenter, incl. the A10/A100 and L40/L40S traps
    ("NVIDIA L40S", None, "", "l40s"),
    ("L40S (compute mode)", None, "", "l40s"),
    ("L40S 48GB", None, "", "l40s"),
    ("L40S-48GB", None, "", "l40s"),
    ("NVIDIA L40s 48GB", None, "", "l40s"),
    ("L40", 48.0, "L40_48GB::1", "l40"),
    ("A10G", None, "", "a10g"),
    ("A10", 24.0, "gpu_1x_a10", "a10"),
    ("A10 (24 GB PCIe)", None, "", "a10"),
    ("VM.GPU.A10.2", None, "", "a10"),
    ("Standard_NV36ads_A10_v5", None, "", "a10"),
    ("Standard_NV12ads_A10_v5", None, "", UNKNOWN),  # 1/3 of an A10
    ("A30", 24.0, "", "a30"),
    ("A40", 45.0, "", "a40"),
    ("Tesla T4", None, "", "t4"),
    ("nvidia-tesla-t4", None, "", "t4"),
    ("Standard_NC4as_T4_v3", None, "", "t4"),
    ("L4", None, "", "l4"),
    ("nvidia-l4", None, "", "l4"),
    # --- Blackwell
    ("NVIDIA B200", None, "", "b200"),
    ("B200 SXM6 180GB", None, "", "b200"),
    ("B200-SXM-180GB", None, "", "b200"),
    ("nvidia-b200", None, "", "b200"),
    ("B200", 179.1, "2x-B200-32-65536", "b200"),
    ("B300", 262.5, "1B300.30V", "b300"),
    ("GB200", None, "", UNKNOWN),
    # --- AMD
    ("AMD Instinct MI300X OAM", None, "", "mi300x"),
    ("amd_mi300x", None, "", "mi300x"),
    ("MI300X-192GB", None, "", "mi300x"),
    ("vbm-256c-2048gb-8-mi300x-gpu", None, "", "mi300x"),  # 2048gb is host RAM
    ("MI325X", None, "", "mi325x"),
    ("MI250", None, "", UNKNOWN),
    # --- older Quadro
    ("P4000", None, "P4000", "quadro-p4000"),
    ("M4000", None, "GPU+", "quadro-m4000"),
    # --- garbage and empty-ish names
    ("", None, "", UNKNOWN),
    ("   ", None, "", UNKNOWN),
    ("-", None, "", UNKNOWN),
    ("NVIDIA", None, "", UNKNOWN),
    ("GPU", None, "", UNKNOWN),
    ("N/A", None, "", UNKNOWN),
    ("Tesla K80", None, "", UNKNOWN),
    ("banana 9000", None, "", UNKNOWN),
    ("", None, "gpu_8x_h100_sxm5", UNKNOWN),  # context alone never names the GPU
    ("A100", 80.0, "gpu_1x_h100_sxm5", "a100-80gb"),  # unrelated context is ignored
    # Shadeform glues the GPU count to the form word; hyperstack spells it out.
    ("A100-80GB", 80.0, "crusoe_A100-80G-sxm4x8", "a100-80gb-sxm"),
    ("A100-80G-PCIe-NVLink", 80.0, "n3-A100x8-NVLink", "a100-80gb-pcie"),
    ("H100-80G-PCIe-NVLink", 80.0, "", "h100-pcie"),
]


@pytest.mark.parametrize(("raw", "memory_gib", "context", "expected"), CASES)
def test_normalize(raw: str, memory_gib: float | None, context: str, expected: str) -> None:
    assert normalize_gpu_name(raw, memory_gib=memory_gib, context=context) == expected


def test_case_count() -> None:
    assert len(CASES) >= 70


def test_every_result_is_a_catalog_slug_or_unknown() -> None:
    catalog = load_catalog()
    for raw, memory_gib, context, _ in CASES:
        slug = normalize_gpu_name(raw, memory_gib=memory_gib, context=context)
        assert slug == UNKNOWN or slug in catalog


def test_rules_only_name_catalog_slugs() -> None:
    from app.gpus import normalize

    catalog = load_catalog()
    for rule in normalize._RULES:
        for slug in rule.slugs + rule.families:
            assert slug in catalog, slug
    for _, sku_slug in normalize._SKU_RULES:
        assert sku_slug is None or sku_slug in catalog
    for gcp_slug in normalize._GCP_TYPES.values():
        assert gcp_slug is None or gcp_slug in catalog
