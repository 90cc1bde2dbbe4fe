"""The flagship's step compiled for a TPU v5p slice on this machine (libtpu, no TPU): explicit mode
adds the six copies of the head kernel's shard the design doc's §4.3 lists, auto none, and the
kernel-order fix none; the page renders what ``--record`` wrote, which a fresh compile repeats.

libtpu is the ``tpu`` extra: ``nox -s tpu`` installs it and runs these; elsewhere they skip."""

import json

import pytest

from find_barriers import find_sites, read_hlo
from snippets.hlo.compiled import kernel_copies
from snippets.hlo.tpu_relayouts import RECORD, STEP, compile_runs
from snippets.lowering import build_step
from snippets.tpu_compile import compile_for_tpu, libtpu_version

pytestmark = [
    pytest.mark.needs_devices(4),
    pytest.mark.skipif(
        libtpu_version() is None,
        reason="libtpu is not installed here: `nox -s tpu` installs the `tpu` extra and runs these",
    ),
]


@pytest.fixture(scope="module")
def compiled() -> dict:
    return compile_runs()


def test_explicit_copies_the_head_kernel_shard_in_and_out_three_times_and_auto_never(compiled):
    shards = compiled["EV explicit"]["kernel_copies"]
    assert (
        sorted(shards)
        == ["f32[128,32000]{0,1:T(8,128)}"] * 3 + ["f32[128,32000]{1,0:T(8,128)}"] * 3
    )
    assert compiled["EV auto"]["kernel_copies"] == []
    assert compiled["auto-axes explicit"]["kernel_copies"] == []  # fix 1 removes them


def test_the_recorded_compile_is_what_this_libtpu_makes(compiled):
    recorded = json.loads(RECORD.read_text())
    if recorded["versions"]["libtpu"] != libtpu_version():
        pytest.skip(f"recorded with libtpu {recorded['versions']['libtpu']}: run --record again")
    assert (recorded["step"], recorded["compiled"]) == (STEP.model_dump(), compiled)


def test_a_step_without_a_blocked_fold_compiles_without_the_copies():
    step = build_step(STEP.replace(mode="auto", optimizer="none"))
    assert kernel_copies(compile_for_tpu(step), STEP.kernel_dims) == []


@pytest.mark.parametrize("vocab", [32000, 32064])
def test_find_barriers_estimates_the_copies_the_compiler_makes(vocab):
    """A shard of 8,016 columns fills no whole 128-element tiles: TPU stores it transposed, as the
    gradient comes, and copies nothing; find-barriers' estimate, read from the CPU module, agrees."""
    step = build_step(STEP.replace(vocab=vocab))
    compiled = kernel_copies(compile_for_tpu(step), (STEP.emb, vocab))
    module = read_hlo(step.lower().as_text(dialect="hlo", debug_info=True))
    (head,) = [site for site in find_sites(module) if site.blocked]
    assert head.cost.relayout_copies == len(compiled) == (6 if vocab == 32000 else 0)
