"""The executed 2x2 walkthrough, its N-rank generalisation and the byte counts."""

import json

import jax
import numpy as np
import pytest

from snippets.collective_cost import FUSION_THRESHOLD_BYTES, lm_head_threshold_table
from snippets.devices import TooFewDevicesError
from snippets.hlo.gradient_finish import lm_head_gradient_finish
from snippets.hlo.reduce_scatter import schedule, schedule_bytes_per_rank, walkthrough
from snippets.measure.reduce_scatter import main

on_cpu = pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="states what XLA:CPU compiles; other backends differ"
)


@pytest.fixture(scope="module")
def seed():
    return walkthrough(2)


def test_the_seed_numbers(seed):
    assert seed["partials"] == [[[5, 6], [15, 18]], [[14, 16], [28, 32]]]
    assert seed["shards"] == [[[19, 22]], [[43, 50]]]
    assert seed["all_reduced"] == [[[19, 22], [43, 50]]] * 2
    assert seed["gathered"] == [[[19, 22], [43, 50]]] * 2
    assert seed["reference_equal"]


def test_the_seed_bytes(seed):
    assert seed["bytes_per_rank"] == {"reduce_scatter": 8, "all_gather": 8}
    assert seed["bytes_total"] == 32
    assert seed["hlo_bytes_per_rank"] == {"reduce_scatter": 8, "all_gather": 8, "all_reduce": 16}


def test_concatenating_partials_is_wrong(seed):
    assert seed["concatenated_shape"] == [4, 2]
    assert seed["concatenated"] == [[5, 6], [15, 18], [14, 16], [28, 32]]
    stacked = np.array(seed["concatenated"])
    assert not np.array_equal(stacked[:2], np.array(seed["gathered"][0]))


@pytest.mark.parametrize(
    ("ranks", "scattered"),
    [(2, 40), (4, 120), pytest.param(8, 280, marks=pytest.mark.needs_devices(8))],
)
def test_n_ranks_on_random_integers_match_numpy_and_bytes_agree(ranks, scattered):
    """``scattered``: bytes each rank sends, ranks - 1 blocks of 2 rows x 5 float32 columns."""
    rng = np.random.default_rng(ranks)
    a = rng.integers(-20, 20, (2 * ranks, 3 * ranks)).astype(np.float32)
    b = rng.integers(-20, 20, (3 * ranks, 5)).astype(np.float32)
    report = walkthrough(ranks, a, b)
    expected = a.astype(np.int64) @ b.astype(np.int64)
    assert np.array_equal(np.concatenate([np.array(s) for s in report["shards"]]), expected)
    for full in report["gathered"]:
        assert np.array_equal(np.array(full), expected)
    for kind in ("reduce_scatter", "all_gather"):
        assert report["hlo_bytes_per_rank"][kind] == report["bytes_per_rank"][kind]
    assert report["bytes_per_rank"]["reduce_scatter"] == scattered
    assert (
        report["hlo_bytes_per_rank"]["all_reduce"] == 2 * report["bytes_per_rank"]["reduce_scatter"]
    )
    assert np.array_equal(np.array(report["explicit_mode"]["resharded"]), expected)
    assert report["explicit_mode"]["compiled_collectives"]["shard_map_psum_scatter"] == {
        "reduce-scatter": 1,
        "all-reduce": 0,
        "all-gather": 0,
        "dynamic-slice": 0,
    }


def test_schedule_sends_each_owner_its_rows():
    messages = schedule(rows=4, cols=3, ranks=2, itemsize=4)
    sent = [(m["step"], m["source"], m["target"], m["rows"]) for m in messages]
    assert ("reduce-scatter", 0, 1, (2, 4)) in sent
    assert ("all-gather", 0, 1, (0, 2)) in sent
    assert schedule_bytes_per_rank(messages, "all-gather") == 2 * 3 * 4


@pytest.mark.parametrize(("ranks", "each"), [(2, 48), (3, 64), (4, 72)])
def test_every_rank_sends_as_much_as_rank_0(ranks, each):
    """12 rows of 2 float32 columns: each rank sends ranks - 1 blocks of 12 / ranks rows."""
    messages = schedule(rows=12, cols=2, ranks=ranks, itemsize=4)
    for step in ("reduce-scatter", "all-gather"):
        for source in range(ranks):
            sent = sum(m["bytes"] for m in messages if (m["step"], m["source"]) == (step, source))
            assert sent == schedule_bytes_per_rank(messages, step) == each


SPLIT = r"must be matrices whose contracted sizes match, with that size and A's rows divisible"


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ((4, 3), (3, 2), SPLIT),
        ((2, 2), (3, 2), SPLIT),
        ((3, 2), (2, 2), r"rows 3 must divide by ranks 2: rank r owns one block"),
        ((4,), (4, 2), SPLIT),
    ],
    ids=["contraction does not divide", "contractions differ", "rows do not divide", "vector"],
)
def test_shapes_that_do_not_split_are_rejected(a, b, message):
    with pytest.raises(ValueError, match=message):
        walkthrough(2, np.ones(a, np.float32), np.ones(b, np.float32))


def test_more_ranks_than_devices_is_rejected(device_count):
    ranks = 2 * device_count
    with pytest.raises(TooFewDevicesError, match=f"{ranks} devices are needed"):
        walkthrough(ranks, np.ones((ranks, ranks), np.float32), np.ones((ranks, 2), np.float32))


def test_explicit_mode_gives_the_lessons_partials_and_rows(seed):
    explicit = seed["explicit_mode"]
    assert explicit["unreduced_partials"] == seed["partials"]
    assert explicit["unreduced_type"] == "float32[2,2]{U:k}"
    assert explicit["resharded"] == [[19, 22], [43, 50]]
    assert explicit["resharded_type"] == "float32[2@k,2]"


def test_explicit_mode_compiled_collectives(seed):
    compiled = seed["explicit_mode"]["compiled_collectives"]
    assert set(compiled) == {
        "dot_unreduced",
        "dot_unreduced_then_reshard",
        "dot_out_sharding_rows",
        "shard_map_psum_scatter",
    }
    assert compiled["dot_unreduced"] == dict.fromkeys(compiled["dot_unreduced"], 0)
    assert compiled["shard_map_psum_scatter"]["reduce-scatter"] == 1
    assert compiled["shard_map_psum_scatter"]["all-reduce"] == 0


@on_cpu
def test_cpu_compiles_the_explicit_finishes_to_all_reduce_and_slice(seed):
    compiled = seed["explicit_mode"]["compiled_collectives"]
    for form in ("dot_unreduced_then_reshard", "dot_out_sharding_rows"):
        assert compiled[form] == {
            "reduce-scatter": 0,
            "all-reduce": 1,
            "all-gather": 0,
            "dynamic-slice": 1,
        }


def test_cli_json_has_explicit_mode(capsys):
    main(["--ranks", "2", "--json"])
    explicit = json.loads(capsys.readouterr().out)["explicit_mode"]
    assert explicit["unreduced_partials"] == [[[5, 6], [15, 18]], [[14, 16], [28, 32]]]
    assert explicit["resharded"] == [[19, 22], [43, 50]]
    assert explicit["compiled_collectives"]["shard_map_psum_scatter"]["reduce-scatter"] == 1


def test_threshold_rule_is_per_shard_bytes_at_least_512():
    rows = lm_head_threshold_table()
    assert len(rows) == 4 * 2 * 3
    for row in rows:
        assert set(row) == {"emb", "dtype", "shards", "per_shard_bytes", "fuses"}
        itemsize = {"bf16": 2, "f32": 4}[row["dtype"]]
        assert row["per_shard_bytes"] == row["emb"] // row["shards"] * itemsize
        assert row["fuses"] == (row["per_shard_bytes"] >= FUSION_THRESHOLD_BYTES)


def test_threshold_at_four_shards():
    fuses = {
        (row["dtype"], row["emb"]): row["fuses"] for row in lm_head_threshold_table(shards=(4,))
    }
    assert fuses == {
        ("bf16", 512): False,
        ("bf16", 1024): True,  # 256 elements x 2 B: exactly the boundary
        ("bf16", 2048): True,
        ("bf16", 4096): True,
        ("f32", 512): True,  # 128 elements x 4 B: exactly the boundary
        ("f32", 1024): True,
        ("f32", 2048): True,
        ("f32", 4096): True,
    }


def test_cli_threshold_json(capsys):
    main(["--threshold", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["threshold_bytes"] == 512
    rows = {(r["emb"], r["dtype"], r["shards"]): r for r in report["rows"]}
    assert not rows[(512, "bf16", 4)]["fuses"]
    assert rows[(2048, "bf16", 4)]["fuses"]
    assert rows[(4096, "bf16", 4)]["fuses"]
    assert all(r["fuses"] == (r["per_shard_bytes"] >= 512) for r in report["rows"])


def test_cli_cost_model_json(capsys):
    main(["--cost-model", "--json"])
    report = json.loads(capsys.readouterr().out)
    cases = report["bandwidth_cases"]
    assert set(cases) == {"one-way", "bidirectional"}
    assert cases["one-way"]["bandwidth_bytes_per_s"] == 9e10
    assert (
        cases["bidirectional"]["bandwidth_bytes_per_s"]
        == 2 * cases["one-way"]["bandwidth_bytes_per_s"]
    )
    for case in cases.values():
        assert "https://jax-ml.github.io/scaling-book/tpus/" in case["source"]
    measured = report["design_doc_measured"]
    assert "pull/5091" in measured["source"]
    assert "section 4.2" in measured["source"]
    assert [row["collective"] for row in measured["rows"]] == ["reduce-scatter", "all-reduce"]
    assert "a model" in report["model"]
    by_case = {}
    for row in cases["one-way"]["rows"]:
        assert {"collective", "bytes_per_rank", "predicted_us"} <= set(row)
        by_case.setdefault((row["emb"], row["dtype"]), {})[row["collective"]] = row
    assert set(by_case) == {(512, "bf16"), (512, "f32"), (4096, "bf16"), (4096, "f32")}
    for pair in by_case.values():
        rs, ar = pair["reduce-scatter"], pair["all-reduce + dynamic-slice"]
        assert ar["bytes_per_rank"] == 2 * rs["bytes_per_rank"]
        assert ar["predicted_us"] > rs["predicted_us"]


def test_cli_modes_are_exclusive(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--threshold", "--cost-model"])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: argument --cost-model: not allowed with argument --threshold")


@pytest.fixture(scope="module", params=["dp", "dp_fsdp"])
def finish(request):
    return lm_head_gradient_finish(request.param)


def test_lm_head_gradient_is_sharded_only_under_fsdp(finish):
    assert finish["kernel"] == [64, 256]
    if finish["mesh"] == "dp":
        assert finish["mesh_axes"] == {"data": 4}
        assert finish["gradient_per_rank"] == [64, 256]
        assert not finish["gradient_sharded"]
        assert finish["finish"] == "all-reduce"
        assert finish["gradient_shard_slices"] == 0
        assert [c["kind"] for c in finish["collectives"]] == ["all-reduce"]
    else:
        assert finish["mesh_axes"] == {"data": 2, "fsdp": 2}
        assert finish["gradient_per_rank"] == [32, 256]
        assert finish["gradient_sharded"]
        assert "all-gather" in [c["kind"] for c in finish["collectives"]]
        assert len(finish["gradient_shard_slice_shapes"]) == finish["gradient_shard_slices"]


@on_cpu
def test_cpu_finishes_the_fsdp_gradient_with_all_reduce_and_slice(finish):
    expected = {"dp": "all-reduce", "dp_fsdp": "all-reduce + dynamic-slice"}
    assert finish["finish"] == expected[finish["mesh"]]
    assert (finish["gradient_shard_slices"] > 0) == (finish["mesh"] == "dp_fsdp")
    assert "reduce-scatter" not in [c["kind"] for c in finish["collectives"]]
