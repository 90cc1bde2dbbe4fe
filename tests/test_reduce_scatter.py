"""The executed 2x2 walkthrough, its N-rank generalisation and the byte counts."""

import numpy as np
import pytest

from snippets.devices import TooFewDevicesError
from snippets.reduce_scatter import (
    cpu_weight_gradient_collectives,
    lm_head_threshold_table,
    schedule,
    schedule_bytes_per_rank,
    walkthrough,
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


@pytest.mark.parametrize("ranks", [2, 4, pytest.param(8, marks=pytest.mark.needs_devices(8))])
def test_n_ranks_on_random_integers_match_numpy_and_bytes_agree(ranks):
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
    assert report["bytes_per_rank"]["reduce_scatter"] == (ranks - 1) * 2 * 5 * 4
    assert (
        report["hlo_bytes_per_rank"]["all_reduce"] == 2 * report["bytes_per_rank"]["reduce_scatter"]
    )


def test_schedule_sends_each_owner_its_rows():
    transfers = schedule(rows=4, cols=3, ranks=2, itemsize=4)
    sent = [(t.step, t.source, t.target, t.rows) for t in transfers]
    assert ("reduce-scatter", 0, 1, (2, 4)) in sent
    assert ("all-gather", 0, 1, (0, 2)) in sent
    assert schedule_bytes_per_rank(transfers, "all-gather") == 2 * 3 * 4


def test_shapes_that_do_not_divide_are_rejected():
    with pytest.raises(
        ValueError, match=r"contracted size 3 and the output rows 4 must both divide by 2"
    ):
        walkthrough(2, np.ones((4, 3), np.float32), np.ones((3, 2), np.float32))


def test_mismatched_contraction_is_rejected():
    with pytest.raises(ValueError, match="contracted sizes 2 and 3 differ"):
        walkthrough(2, np.ones((2, 2), np.float32), np.ones((3, 2), np.float32))


def test_more_ranks_than_devices_is_rejected(device_count):
    ranks = 2 * device_count
    with pytest.raises(TooFewDevicesError, match=f"{ranks} devices are needed"):
        walkthrough(ranks, np.ones((ranks, ranks), np.float32), np.ones((ranks, 2), np.float32))


def test_lm_head_threshold_table():
    table = lm_head_threshold_table((512, 1024, 2048, 4096), ranks=4)
    assert [row["per_shard_bytes"] for row in table] == [512, 1024, 2048, 4096]
    assert [row["at_or_below_threshold"] for row in table] == [True, False, False, False]


def test_cpu_never_forms_a_reduce_scatter_from_all_reduce_and_slice():
    counts = cpu_weight_gradient_collectives(ranks=4)
    assert counts["reduce-scatter"] == 0
    assert counts["all-reduce"] == 1
    assert counts["dynamic-slice"] >= 1
