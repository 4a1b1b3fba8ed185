"""Map providers' raw GPU spellings onto catalog slugs.

The pipeline is: clean the text, pick the first matching rule from an ordered table (a rule names
the candidate slugs for one GPU model), then narrow the candidates with what the name and context
say about form factor and memory. Anything still ambiguous maps to a form-factor-unknown family
entry when one fits, otherwise to UNKNOWN: a wrong guess would mislead the fit ranking, an
unknown only hides one offer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.gpus.catalog import UNKNOWN, GpuSpec, load_catalog

__all__ = ["UNKNOWN", "normalize_gpu_name"]

_L = r"(?<![a-z0-9])"  # left edge of a model token
_E = r"(?![a-z0-9])"  # right edge of a model token
# Variant suffixes that make a GeForce card a different product ("4090 D", "3090 Ti", laptop).
_NO_SUFFIX = r"(?!\s?(?:ti|super|s|d|m|max\s?q|laptop|mobile)" + _E + ")"


@dataclass(frozen=True)
class _Rule:
    """One GPU model: its spelling and the catalog entries it can resolve to."""

    pattern: re.Pattern[str]
    group: str  # rules sharing a group are spellings of one base model (context may refine)
    slugs: tuple[str, ...]  # concrete candidates; empty = known part we don't carry
    families: tuple[str, ...] = ()  # form-factor-unknown fallbacks, picked by memory size
    default_gb: float | None = None  # memory assumed when nothing states it
    requires_memory: bool = False  # the spelling alone is too ambiguous to trust
    prefer: str | None = None  # taken when only the form factor is open and nothing hints it


def _rule(
    pattern: str,
    group: str,
    *slugs: str,
    families: tuple[str, ...] = (),
    default_gb: float | None = None,
    requires_memory: bool = False,
    prefer: str | None = None,
) -> _Rule:
    return _Rule(re.compile(pattern), group, slugs, families, default_gb, requires_memory, prefer)


def _rtx(model: str, slug: str, suffix: str = "") -> _Rule:
    """GeForce rule; without a suffix it refuses "Ti"/"Super"/"D" variants we don't carry."""
    tail = suffix + _E if suffix else _NO_SUFFIX + _E
    return _rule(_L + r"rtx\s?" + model + tail, "rtx" + model, slug)


# Ordered: more specific spellings before the ones they contain (A10G before A10, L40S before
# L40, RTX 6000 Ada / PRO / Quadro before bare RTX 6000).
_RULES: tuple[_Rule, ...] = (
    _rule(_L + r"gb\s?[23]00" + _E, "gb200"),  # Grace-Blackwell superchips: not carried
    _rule(_L + r"b\s?300" + _E, "b300", "b300"),
    _rule(_L + r"b\s?200" + _E, "b200", "b200"),
    _rule(_L + r"b\s?100" + _E, "b100"),
    _rule(_L + r"gh\s?200" + _E, "gh200", "gh200"),
    _rule(_L + r"h\s?200(?!\d)", "h200", "h200", "h200-nvl", prefer="h200"),
    _rule(
        _L + r"h\s?100(?!\d)",
        "h100",
        "h100-sxm",
        "h100-pcie",
        "h100-nvl",
        families=("h100-80gb",),
        default_gb=80,
    ),
    _rule(_L + r"h\s?800" + _E, "h800"),
    _rule(_L + r"h\s?20" + _E, "h20", "h20"),
    _rule(_L + r"a\s?100\s?x" + _E, "a100", "a100-80gb-pcie"),
    _rule(
        _L + r"a\s?100" + _E,
        "a100",
        "a100-80gb-sxm",
        "a100-40gb-sxm",
        "a100-80gb-pcie",
        "a100-40gb-pcie",
        families=("a100-80gb", "a100-40gb"),
    ),
    _rule(
        _L + r"a\s?800" + _E,
        "a800",
        "a800-80gb-pcie",
        "a800-80gb-sxm",
        families=("a800-80gb",),
    ),
    _rule(_L + r"a\s?10\s?g" + _E, "a10g", "a10g"),
    _rule(_L + r"a\s?10" + _E, "a10", "a10"),
    _rule(_L + r"a\s?30" + _E, "a30", "a30"),
    _rule(_L + r"a\s?40" + _E, "a40", "a40"),
    _rule(_L + r"l\s?40\s?s" + _E, "l40s", "l40s"),
    _rule(_L + r"l\s?40" + _E, "l40", "l40"),
    _rule(_L + r"l4" + _E, "l4", "l4"),
    _rule(_L + r"rtx\s?pro\s?(?:server\s?)?6000(?:\s?s)?" + _E, "rtxpro6000", "rtx-pro-6000"),
    _rule(_L + r"rtx\s?6000\s?ada" + _E, "rtx6000ada", "rtx-6000-ada"),
    _rule(_L + r"quadro\s?rtx\s?6000" + _E, "rtx6000", "quadro-rtx-6000"),
    _rule(_L + r"(?:rtx\s?)?a\s?6000" + _E, "rtxa6000", "rtx-a6000"),
    # Bare "RTX 6000" is the Turing Quadro in Lambda/Seeweb feeds, but people also drop "Ada":
    # only the 24 GB memory hint makes it safe.
    _rule(_L + r"rtx\s?6000" + _E, "rtx6000", "quadro-rtx-6000", requires_memory=True),
    _rule(_L + r"(?:rtx\s?)?a\s?5000" + _E, "rtxa5000", "rtx-a5000"),
    _rule(_L + r"(?:rtx\s?)?a\s?4000" + _E, "rtxa4000", "rtx-a4000"),
    _rule(_L + r"(?:rtx\s?)?a\s?2000" + _E, "rtxa2000", "rtx-a2000", "rtx-a2000-6gb"),
    _rtx("5090", "rtx-5090"),
    _rtx("4090", "rtx-4090"),
    _rtx("4080", "rtx-4080"),
    _rtx("4070", "rtx-4070-ti-super", r"\s?(?:ti\s?s(?:uper)?|s(?:uper)?\s?ti)"),
    _rtx("4070", "rtx-4070"),
    _rule(_L + r"rtx\s?4060\s?ti" + _E, "rtx4060", "rtx-4060-ti-16gb", "rtx-4060-ti-8gb"),
    _rtx("4060", "rtx-4060"),
    _rtx("3090", "rtx-3090"),
    _rtx("3080", "rtx-3080"),
    _rtx("3070", "rtx-3070"),
    _rtx("3060", "rtx-3060-ti", r"\s?ti"),
    _rtx("3060", "rtx-3060"),
    # AWS G5g: "NVIDIA T4G Tensor Core GPUs", the T4 (TU104, 16 GB) paired with Graviton hosts.
    _rule(_L + r"t4\s?g" + _E, "t4", "t4"),
    _rule(_L + r"t4" + _E, "t4", "t4"),
    _rule(_L + r"v\s?100\s?s" + _E, "v100s"),  # V100S: faster memory, not carried
    _rule(_L + r"v\s?100" + _E, "v100", "v100-16gb", "v100-32gb"),
    _rule(_L + r"(?:quadro\s?)?p\s?4000" + _E, "p4000", "quadro-p4000"),
    _rule(_L + r"(?:quadro\s?)?m\s?4000" + _E, "m4000", "quadro-m4000"),
    _rule(_L + r"mi\s?325\s?x" + _E, "mi325x", "mi325x"),
    _rule(_L + r"mi\s?300\s?x" + _E, "mi300x", "mi300x"),
    _rule(_L + r"mi\s?250\s?x" + _E, "mi250x", "mi250x"),
)

# Cloud instance SKUs whose GPU (incl. form factor and memory) is fixed by the provider's docs.
# None marks SKUs we recognise but must not map (fractional vGPU slices).
_SKU_RULES: tuple[tuple[re.Pattern[str], str | None], ...] = tuple(
    (re.compile(_L + pattern + _E), slug)
    for pattern, slug in (
        # Azure
        (r"standard nd\d+is?r h100 v5", "h100-sxm"),
        (r"standard nc\d+ads h100 v5", "h100-nvl"),
        (r"standard ncc\d+ads h100 v5", "h100-nvl"),
        (r"standard nd\d+is?r h200 v5", "h200"),
        (r"standard nd\d+is?r mi300x v5", "mi300x"),
        (r"standard nd\d+amsr a100 v4", "a100-80gb-sxm"),
        (r"standard nd\d+asr v4", "a100-40gb-sxm"),
        (r"standard nc\d+ads a100 v4", "a100-80gb-pcie"),
        (r"standard nd40rs v2", "v100-32gb"),
        (r"standard nc\d+s v3", "v100-16gb"),
        (r"standard nc\d+as t4 v3", "t4"),
        (r"standard nv(?:36|72)ads a10 v5", "a10"),
        (r"standard nv\d+ads a10 v5", None),
        # AWS (EC2 accelerated instance docs: P5 H100 SXM, P5e/P5en H200, P4d/P4de A100 SXM4
        # 40/80 GB, P3dn V100 32 GB, P3 V100 16 GB, all SXM on HGX boards)
        (r"p5 \d+xlarge", "h100-sxm"),
        (r"p5en? \d+xlarge", "h200"),
        (r"p4d \d+xlarge", "a100-40gb-sxm"),
        (r"p4de \d+xlarge", "a100-80gb-sxm"),
        (r"p3dn \d+xlarge", "v100-32gb"),
        (r"p3 \d+xlarge", "v100-16gb"),
        # OCI
        (r"bm gpu h100 \d+", "h100-sxm"),
        (r"bm gpu h200 \d+", "h200"),
        (r"bm gpu a100 v2 \d+", "a100-80gb-sxm"),
        (r"bm gpu4 \d+", "a100-40gb-sxm"),
        (r"(?:bm|vm) gpu3 \d+", "v100-16gb"),
        (r"(?:bm|vm) gpu a10 \d+", "a10"),
        (r"bm gpu l40s(?: nc)? \d+", "l40s"),
        (r"bm gpu mi300x \d+", "mi300x"),
    )
)

# GCP accelerator type ids, matched exactly: each names one fixed part on GCP.
_GCP_TYPES: dict[str, str | None] = {
    "nvidia-b200": "b200",
    "nvidia-h200-141gb": "h200",
    "nvidia-h100-80gb": "h100-sxm",
    "nvidia-h100-mega-80gb": "h100-sxm",
    "nvidia-a100-80gb": "a100-80gb-sxm",
    "nvidia-tesla-a100": "a100-40gb-sxm",
    "nvidia-l4": "l4",
    "nvidia-tesla-t4": "t4",
    "nvidia-tesla-v100": "v100-16gb",
    "nvidia-tesla-p100": None,
    "nvidia-tesla-p4": None,
    "nvidia-tesla-k80": None,
}

_FORM_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # A glued instance count may follow: Shadeform's "crusoe_A100-80G-sxm4x8".
    ("SXM", re.compile(_L + r"sxm\d?(?:x\d+)?" + _E)),
    ("PCIe", re.compile(_L + r"pcie?\d?(?:x\d+)?" + _E)),
    ("NVL", re.compile(_L + r"nvl" + _E)),
    ("OAM", re.compile(_L + r"oam" + _E)),
)
# Weaker than an explicit form word: "H100_NVLINK" / HGX boards are SXM, but a PCIe card can
# also have an NVLink bridge, so an explicit "PCIe" wins.
_SXM_IMPLIED = re.compile(_L + r"(?:nvlink|hgx)" + _E)
_MEM_TYPE = re.compile(_L + r"(hbm2e?|hbm3e?|gddr[567]x?)" + _E)
# At most 3 digits so host RAM like "2048gb" in an instance type is not read as GPU memory.
_MEM_SIZE = re.compile(r"(?<![a-z0-9.])(\d{1,3}(?:\.\d+)?)\s?(?:gb|gib|g)" + _E)
# Verda encodes "<memory>S" for SXM right after the model: "1H100.80S.30V".
_VERDA_SXM = re.compile(r"^(\d{2,3})s$")
_CONTEXT_WINDOW = 3  # tokens after the model in an instance type that still describe the GPU


def _clean(text: str) -> str:
    """Lowercase, drop punctuation and vendor words, and unglue instance counts."""
    t = re.sub(r"[^a-z0-9]+", " ", text.lower())
    t = re.sub(r"nvidia|geforce", " ", t)  # also glued: "geforcertx4090"
    t = re.sub(r"\b(?:tesla|amd|instinct|intel)\b", " ", t)
    t = re.sub(r"\b\d+x?(?=[a-z]+\d)", "", t)  # "8xa100", "1h100", "4b200" -> model alone
    t = re.sub(r"(\d)\s+(gi?b)\b", r"\1\2", t)  # "80 gb" -> "80gb"
    return " ".join(t.split())


def _match_rule(text: str) -> tuple[_Rule, re.Match[str]] | None:
    for rule in _RULES:
        m = rule.pattern.search(text)
        if m:
            return rule, m
    return None


def _match_sku(text: str) -> tuple[bool, str | None]:
    """(matched, slug) for a known cloud SKU in text."""
    for pattern, slug in _SKU_RULES:
        if pattern.search(text):
            return True, slug
    return False, None


@dataclass
class _Hints:
    form: str | None = None
    form_conflict: bool = False
    mem_type: str | None = None
    mem_gb: tuple[float, ...] = ()


def _hints(whole: str, after: str, window: int | None) -> _Hints:
    """Form factor and memory stated in text; sizes only from tokens after the model match."""
    tokens = after.split()
    if window is not None:
        tokens = tokens[:window]
        whole = " ".join(tokens)  # context: form words also only near the model
    forms = {form for form, pattern in _FORM_WORDS if pattern.search(whole)}
    sizes: list[float] = []
    if tokens and (verda := _VERDA_SXM.match(tokens[0])):
        forms.add("SXM")
        sizes.append(float(verda.group(1)))
    if not forms and _SXM_IMPLIED.search(whole):
        forms.add("SXM")
    sizes.extend(float(m.group(1)) for m in _MEM_SIZE.finditer(" ".join(tokens)))
    mem_type = _MEM_TYPE.search(whole)
    return _Hints(
        form=next(iter(forms)) if len(forms) == 1 else None,
        form_conflict=len(forms) > 1,
        mem_type=mem_type.group(1) if mem_type else None,
        mem_gb=tuple(sizes),
    )


def _fits(spec: GpuSpec, gib: float) -> bool:
    # Feeds report marketed GB, GiB, or driver MiB/1024 (ECC on or off), so allow that spread
    # but nothing like a neighbouring memory variant (40 vs 80, 80 vs 94, 16 vs 32).
    return spec.vram_gib * 0.9 <= gib <= spec.vram_gb * 1.08 + 0.5


def _checked(slug: str | None, memory_gib: float | None) -> str:
    spec = load_catalog().get(slug) if slug else None
    if spec is None or (memory_gib is not None and not _fits(spec, memory_gib)):
        return UNKNOWN
    return spec.slug


def _narrow(cands: list[GpuSpec], sizes: tuple[float, ...], *, hard: bool) -> list[GpuSpec]:
    if not sizes:
        return cands
    kept = [c for c in cands if any(_fits(c, s) for s in sizes)]
    return kept if kept or hard else cands


def _resolve(rule: _Rule, name: _Hints, ctx: _Hints, memory_gib: float | None) -> str:
    catalog = load_catalog()
    cands = [catalog[s] for s in rule.slugs]
    if name.form_conflict or (name.form is None and ctx.form_conflict):
        return UNKNOWN
    form = name.form or ctx.form
    if form:
        cands = [c for c in cands if c.form_factor in (form, "unknown")]
    mem_type = name.mem_type or ctx.mem_type
    if mem_type:
        cands = [c for c in cands if c.memory_type.lower() == mem_type] or cands
    # The caller's figure and sizes printed in the name are facts; context sizes are hints only
    # (instance types also carry host RAM).
    if memory_gib is not None:
        cands = _narrow(cands, (memory_gib,), hard=True)
    cands = _narrow(cands, name.mem_gb, hard=True)
    cands = _narrow(cands, ctx.mem_gb, hard=False)
    if memory_gib is None and not name.mem_gb and not ctx.mem_gb:
        if rule.requires_memory:
            return UNKNOWN
        if rule.default_gb is not None:
            cands = _narrow(cands, (rule.default_gb,), hard=False)
    if len(cands) == 1:
        return cands[0].slug
    if not cands:
        return UNKNOWN
    if form is None and rule.prefer and any(c.slug == rule.prefer for c in cands):
        return rule.prefer
    sizes = {c.vram_gb for c in cands}
    if len(sizes) == 1:
        for family in rule.families:
            if catalog[family].vram_gb in sizes:
                return family
    return UNKNOWN


MAX_RAW_CHARS = 500


def normalize_gpu_name(raw: str, *, memory_gib: float | None = None, context: str = "") -> str:
    """Return the canonical slug for a provider's raw GPU spelling, or UNKNOWN (never a guess).

    memory_gib is the per-GPU memory the feed reports (0 or less counts as not reported);
    context is other text about the offer, such as its instance type or SKU.
    """
    if len(raw) > MAX_RAW_CHARS or len(context) > MAX_RAW_CHARS:
        return UNKNOWN  # untrusted input: no real GPU name is this long, and regexes cost O(n)
    if memory_gib is not None and memory_gib <= 0:
        memory_gib = None  # some feeds write 0 for "not reported"
    key = raw.strip().lower()
    if key in _GCP_TYPES:
        return _checked(_GCP_TYPES[key], memory_gib)
    name = _clean(raw)
    if not name:
        return UNKNOWN
    sku_found, sku_slug = _match_sku(name)
    if sku_found:
        return _checked(sku_slug, memory_gib)
    found = _match_rule(name)
    if found is None:
        return UNKNOWN
    rule, match = found
    name_hints = _hints(name, name[match.end() :], window=None)

    ctx = _clean(context)
    ctx_hints = _Hints()
    ctx_found = _match_rule(ctx) if ctx else None
    if ctx_found is not None and ctx_found[0].group == rule.group:
        # Aggregated feeds collapse variants ("RTX3060") that the SKU still spells out
        # ("RTX_3060_Ti"); the context's rule for the same base model is the more precise one.
        rule = ctx_found[0]
        ctx_hints = _hints(ctx, ctx[ctx_found[1].end() :], window=_CONTEXT_WINDOW)
    if not rule.slugs:
        return UNKNOWN
    if ctx:
        sku_found, sku_slug = _match_sku(ctx)
        if sku_found:
            allowed = rule.slugs + rule.families
            return _checked(sku_slug, memory_gib) if sku_slug in allowed else UNKNOWN
    return _resolve(rule, name_hints, ctx_hints, memory_gib)
