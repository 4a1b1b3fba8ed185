"""The ranking's per-version work on shapes: the pruning index built in one pass, the facts
interned across data versions and the fit cache per job."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from app.fit import OfferFacts, OfferFit, Workload
from app.fit.offer_facts import MarketCost
from app.queries.assess import Assessor
from app.queries.params import Sort
from app.queries.shapes import (
    Limits,
    Shape,
    _decode_shapes,
    _encode_shapes,
    _floor,
    interned_facts,
    prune_index,
    shape_bound,
)

FACTS = OfferFacts(
    gpu_count=1, vram_gib_per_gpu=80.0, bf16_tflops=989.0, fp16_tflops=989.0, memory_type="HBM3"
)


def _fit(markets: dict[str, tuple[float, float]]) -> OfferFit:
    return OfferFit(
        fits=True,
        per_gpu_gib_needed=10.0,
        headroom_pct=50.0,
        est_hours=1.0,
        billed_hours=1.0,
        est_total_cost=1.0,
        cost_per_m_tokens=1.0,
        score=1.0,
        factors={},
        explanation="",
        reason=None,
        markets={
            m: MarketCost(m, wall, node_hours, node_hours, 0.1)
            for m, (wall, node_hours) in markets.items()
        },
    )


def reference(
    fitting: list[tuple[Shape, OfferFit]], sort: Sort, limits: Limits
) -> tuple[list[float], list[int], list[tuple[float, int]]]:
    """The index as ranked_ids first built it: shape_bound and _floor over every shape."""
    vouched = sorted(v for s, f in fitting for v in shape_bound(s, f, sort, limits))
    totals = list(itertools.accumulate(n for _, n in vouched))
    floors = sorted((_floor(s, f, sort), i) for i, (s, f) in enumerate(fitting))
    return [v for v, _ in vouched], totals, floors


prices = st.none() | st.floats(min_value=0.01, max_value=100.0)
market_terms = st.tuples(
    st.floats(min_value=0.01, max_value=500.0), st.floats(min_value=0.0, max_value=500.0)
)
shape_fits = st.tuples(
    st.tuples(prices, prices),
    st.tuples(prices, prices),
    st.integers(min_value=0, max_value=40),
    st.dictionaries(st.sampled_from(["on_demand", "spot"]), market_terms),
)
limits_ = st.builds(
    Limits,
    max_hours=st.none() | st.floats(min_value=0.1, max_value=500.0),
    max_cost=st.none() | st.floats(min_value=0.1, max_value=5_000.0),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(shape_fits, max_size=25),
    st.sampled_from(["fit", "cost", "time", "cost_per_m"]),
    limits_,
)
def test_prune_index_equals_shape_bound_and_floor(
    items: list[
        tuple[
            tuple[float | None, float | None],
            tuple[float | None, float | None],
            int,
            dict[str, tuple[float, float]],
        ]
    ],
    sort: Sort,
    limits: Limits,
) -> None:
    fitting = [
        (Shape((i,), FACTS, max(priced, 1), low, high, priced), _fit(markets))
        for i, (low, high, priced, markets) in enumerate(items)
    ]
    values, totals, floors = prune_index(fitting, sort, limits)
    want_values, want_totals, want_floors = reference(fitting, sort, limits)
    assert (values, totals) == (want_values, want_totals)
    if sort != "cost_per_m":  # no bound is ever drawn from an empty index: floors unused
        assert floors == want_floors
    else:
        assert values == []


def test_prune_index_vouches_for_the_cheapest_and_the_rest_at_the_dearest() -> None:
    # 3 offers at 2-5 $/h on demand over 10 node-hours, 1-1.5 $/h spot over 30: the cheapest
    # costs at most min(20, 30) = 20, and every one at most max(50, 45) = 50.
    shape = Shape(("a",), FACTS, 3, (2.0, 1.0), (5.0, 1.5), 3)
    fit = _fit({"on_demand": (10.0, 10.0), "spot": (40.0, 30.0)})
    values, totals, floors = prune_index([(shape, fit)], "cost", Limits())
    assert values == [20.0, 50.0]
    assert totals == [1, 3]
    assert floors == [(20.0, 0)]
    # A budget of 30 admits the cheapest offer's bound, not the dearest one's.
    assert prune_index([(shape, fit)], "cost", Limits(max_cost=30.0))[:2] == ([20.0], [1])


def test_decoded_shapes_share_one_facts_object_per_distinct_facts() -> None:
    shapes = [Shape(("k", i), FACTS, 2, (1.0, None), (2.0, None), 2) for i in range(3)]
    first, _ = _decode_shapes(_encode_shapes((shapes, {})))
    second, _ = _decode_shapes(_encode_shapes((shapes, {})))
    assert first == shapes
    assert first[0].facts is first[2].facts is second[1].facts
    other = OfferFacts(**{**FACTS.__dict__, "gpu_count": 2})
    assert interned_facts(tuple(other.__dict__.values())) == other
    assert interned_facts(tuple(other.__dict__.values())) is not first[0].facts


def test_fit_cache_is_per_job_and_outlives_assessors() -> None:
    workload = Workload(model="llama-3.1-8b", method="qlora")
    first = Assessor(workload)(FACTS)
    again = Assessor(workload)(OfferFacts(**FACTS.__dict__))  # equal facts, another object
    assert again is first
    other_job = Assessor(Workload(model="llama-3.1-8b", method="lora"))(FACTS)
    assert other_job is not first
    assert other_job.per_gpu_gib_needed > first.per_gpu_gib_needed  # LoRA holds 16-bit weights
