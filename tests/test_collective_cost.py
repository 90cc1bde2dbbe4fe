"""The ring model, its TPU prices for the LM-head gradient, and the CPU measurement's structure."""

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.collective_cost import (
    design_doc_comparison,
    finish_cost,
    lm_head_gradient_costs,
    predict,
)
from snippets.devices import make_mesh
from snippets.measure.collective_timing import finish_functions, main, time_finishes
from snippets.ring_model import ring_bytes_per_rank, ring_hops
from snippets.sources import BANDWIDTH_CASES, DESIGN_DOC_MEASURED, TPU_V5P
from snippets.support.timing import verdict


@pytest.mark.parametrize(
    ("tensor", "ranks", "sent", "hops"),
    [
        (16, 2, {"reduce-scatter": 8, "all-reduce": 16}, (1, 2)),  # the lesson's 2x2, float32
        (32_768_000, 4, {"reduce-scatter": 24_576_000, "all-reduce": 49_152_000}, (3, 6)),
    ],
    ids=["lesson", "design-doc"],
)
def test_ring_bytes_and_hops_as_the_sources_count_them(tensor, ranks, sent, hops):
    """The lesson's 8 bytes per rank; the design doc's llama2 gradient (section 4.2): 24.58 MB
    for a reduce-scatter, 49.15 MB for an all-reduce, per device on a 4-way ring."""
    costs = {kind: predict(kind, tensor, ranks) for kind in sent}
    assert {kind: cost["bytes_per_rank"] for kind, cost in costs.items()} == sent
    assert (costs["reduce-scatter"]["hops"], costs["all-reduce"]["hops"]) == hops
    assert costs["all-reduce"]["latency_us"] == pytest.approx(hops[1])  # 1 us per hop
    assert costs["reduce-scatter"]["transfer_us"] == pytest.approx(
        1e6 * sent["reduce-scatter"] / 9e10
    )


@pytest.mark.parametrize(
    ("kind", "result_bytes", "ranks", "sent"),
    [
        ("all-gather", 16, 2, 8),  # the result is the whole tensor; a rank sends its half
        ("all-gather", 10, 4, 7.5),
        ("all-to-all", 12, 4, 9),
        ("collective-permute", 8, 2, 8),  # the buffer, once, whatever the ring
        ("collective-permute", 8, 4, 8),
    ],
)
def test_ring_bytes_of_the_other_collectives(kind, result_bytes, ranks, sent):
    assert ring_bytes_per_rank(kind, result_bytes, ranks) == sent


def test_the_source_sizes():
    rows = {(r["emb"], r["dtype"], r["collective"]): r for r in lm_head_gradient_costs()}
    rs = rows[(512, "bf16", "reduce-scatter")]
    assert rs["gradient_bytes"] == 32_768_000  # the doc's 32.77 MB
    assert rs["bytes_per_rank"] == 24_576_000  # the doc's 24.58 MB
    assert rs["predicted_us"] == pytest.approx(276.07, abs=0.01)  # 3 hops + 24.576 MB at 90 GB/s
    assert rs["slice_us"] == 0
    ar = rows[(512, "bf16", "all-reduce + dynamic-slice")]
    assert ar["slice_us"] == pytest.approx(5.925, abs=0.001)  # 2 x 8.192 MB at 2765 GB/s
    assert ar["predicted_us"] == pytest.approx(
        ar["latency_us"] + ar["transfer_us"] + ar["slice_us"]
    )
    assert ar["ratio_to_reduce_scatter"] == pytest.approx(ar["predicted_us"] / rs["predicted_us"])
    assert len(rows) == 2 * 2 * 2


def test_every_model_number_is_the_one_its_source_quotes():
    for link in BANDWIDTH_CASES.values():
        quoted = re.search(r"([\d.]+e\d+) bytes/s", link.link_source)
        assert float(quoted[1]) == link.link_bytes_per_s
        assert "https://" in link.link_source
    latency = re.search(r"about (\d+) us per hop", TPU_V5P.latency_source)
    assert float(latency[1]) * 1e-6 == TPU_V5P.hop_latency_s
    memory = re.search(r"(\d+) GBps", TPU_V5P.memory_source)
    assert float(memory[1]) * 1e9 == TPU_V5P.memory_bytes_per_s


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ring_hops("all-to-all", 4), "Unknown collective 'all-to-all'"),
        (lambda: finish_cost("psum", 8, 2), "Unknown finish 'psum'"),
        (lambda: finish_cost("reduce-scatter", 8, 1), "at least 2 ranks"),
        (lambda: finish_cost("reduce-scatter", 9, 2), "divides evenly"),
        (lambda: lm_head_gradient_costs(dtypes=("f31",)), "Unknown dtype 'f31'"),
        (lambda: time_finishes((2, 8), rows=12, cols=2, repeats=1), "rows 12 over 8 ranks"),
        (lambda: time_finishes((1, 2), rows=12, cols=2, repeats=1), "rows 12 over 1 ranks"),
    ],
)
def test_bad_input_is_rejected(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_timed_collectives_compute_the_finish():
    mesh = make_mesh((2,), ("k",), "explicit")
    partials = jax.device_put(
        jnp.arange(16.0).reshape(4, 4), NamedSharding(mesh, P("k"))
    )  # rank r's partial is rows 2r, 2r+1
    finishes = finish_functions(mesh)
    total = np.arange(16.0).reshape(2, 2, 4).sum(axis=0)
    assert np.array_equal(np.asarray(finishes["all-reduce"](partials)), total)
    assert np.array_equal(np.asarray(finishes["reduce-scatter"](partials)), total)
    shards = [np.asarray(s.data) for s in finishes["reduce-scatter"](partials).addressable_shards]
    assert [s.shape for s in shards] == [(1, 4), (1, 4)]


def test_measurement_structure():
    report = time_finishes((2, 4), rows=8, cols=4, repeats=3)
    assert report["partial_bytes"] == 8 * 4 * 4
    assert {(t["ranks"], t["collective"]) for t in report["timings"]} == {
        (n, kind) for n in (2, 4) for kind in ("reduce-scatter", "all-reduce")
    }
    for t in report["timings"]:
        assert 0 < t["min_ms"] <= t["median_ms"] <= t["max_ms"]
    for r in report["ratios"]:
        assert r["model_bytes_ratio"] == 2.0
        assert r["ratio_min"] <= r["ratio_median"] <= r["ratio_max"]
        assert r["against_model"] == verdict(r["ratio_min"], r["ratio_max"], 2.0)
        assert r["against_1"] == verdict(r["ratio_min"], r["ratio_max"], 1.0)


def test_the_design_doc_comparison():
    rs, ar = design_doc_comparison()
    assert (rs["collective"], ar["collective"]) == ("reduce-scatter", "all-reduce")
    # the doc's bytes per device (section 4.2: 24.58 MB vs 49.15 MB)
    assert (round(rs["bytes_per_rank"] / 1e6, 2), round(ar["bytes_per_rank"] / 1e6, 2)) == (
        24.58,
        49.15,
    )
    for row in (rs, ar):
        slowest, fastest = DESIGN_DOC_MEASURED[row["collective"]]
        assert row["measured_us_min"] == pytest.approx(1e6 * row["bytes_per_rank"] / fastest)
        assert row["measured_us_max"] == pytest.approx(1e6 * row["bytes_per_rank"] / slowest)
        assert row["model_us_bidirectional"] < row["model_us_one-way"]
    # the doc's time ratio, reduce-scatter over all-reduce: 0.66-0.76x
    low = rs["measured_us_min"] / ar["measured_us_max"]
    high = rs["measured_us_max"] / ar["measured_us_min"]
    assert (round(low, 2), round(high, 2)) == (0.66, 0.76)


def test_cli_json(capsys):
    main(["--ranks", "2", "4", "--rows", "8", "--cols", "2", "--repeats", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert [r["ranks"] for r in report["ratios"]] == [2, 4]
    assert report["repeats"] == 2


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--ranks", "0"], ["argument --ranks", "at least 1"]),
        (["--rows", "6", "--ranks", "4"], ["rows 6 over 4 ranks", "a multiple of every rank"]),
        (["--ranks", "1", "2"], ["over 1 ranks", "a collective needs 2 ranks or more"]),
        (["--rows", "1000000000", "--cols", "1000000"], ["needs about", "GiB"]),
    ],
)
def test_cli_bad_input_is_one_error_line(argv, words, one_error_line):
    line = one_error_line(main, argv)
    for word in words:
        assert word in line
