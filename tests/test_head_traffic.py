"""The LM head's collectives in each orientation, and the design doc's traffic recomputed.

The head's traffic is computed once for these tests and the flagship guide, which shares the two
configurations below (:mod:`snippets.cache.results`).
"""

import pytest

from snippets.hlo.collectives import collectives
from snippets.hlo.head_traffic import design_doc_traffic, head_traffic
from snippets.hlo.programs import lower_step
from snippets.lowering import StepConfig

WIDE_VOCAB = StepConfig(mesh="fsdp", emb=64, vocab=8192, batch=8, seq=16)
"""8192 vocab entries against 128 tokens: the vocab-parallel head should move far less."""
MANY_TOKENS = StepConfig(mesh="fsdp", emb=64, vocab=256, batch=64, seq=128)
"""8192 tokens against 256 entries: the default orientation should move less."""


VARIANTS = ("EV", "vocab-parallel")


@pytest.fixture(scope="module")
def traffic() -> dict:
    """``head_traffic`` of ``WIDE_VOCAB`` on both meshes (``wide``) and of ``MANY_TOKENS``."""
    meshes = ("fsdp", "dp_fsdp")
    wide = {mesh: head_traffic(WIDE_VOCAB.replace(mesh=mesh), VARIANTS) for mesh in meshes}
    return {"wide": wide, "many": head_traffic(MANY_TOKENS, VARIANTS)}


@pytest.fixture(scope="module")
def wide(traffic) -> dict:
    """The traffic on the fsdp mesh."""
    return traffic["wide"]["fsdp"]


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_the_orientation_with_the_smaller_tensor_moves_fewer_bytes(traffic, wide, mode):
    many = traffic["many"]
    assert wide[mode]["vocab-parallel"]["bytes"] < wide[mode]["EV"]["bytes"] / 10
    assert many[mode]["vocab-parallel"]["bytes"] > 10 * many[mode]["EV"]["bytes"]


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_the_default_head_gathers_its_kernel_and_the_rotated_head_the_hidden_state(wide, mode):
    ev, vp = (wide[mode][v]["collectives"] for v in ("EV", "vocab-parallel"))
    emb, vocab, tokens = WIDE_VOCAB.emb, WIDE_VOCAB.vocab, (WIDE_VOCAB.batch, WIDE_VOCAB.seq)
    assert {c["shape"].split("{")[0] for c in ev if c["op"] == "all-gather"} == {
        f"f32[{emb},{vocab}]"
    }
    gathered = {c["shape"].split("{")[0] for c in vp if c["op"] == "all-gather"}
    assert gathered == {f"f32[{tokens[0]},{tokens[1]},{emb}]", f"s32[{tokens[0]},{tokens[1]}]"}


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_the_rotated_kernel_gradient_needs_a_collective_only_over_data(traffic, wide, mode):
    assert wide[mode]["EV"]["weight_gradient_collectives"]
    assert wide[mode]["vocab-parallel"]["weight_gradient_collectives"] == []
    with_data = traffic["wide"]["dp_fsdp"][mode]["vocab-parallel"]
    (reduction,) = with_data["weight_gradient_collectives"]
    assert reduction.startswith("all-reduce")  # over the data axis, of this device's vocab columns
    assert f"[{WIDE_VOCAB.vocab // 2},{WIDE_VOCAB.emb}]" in reduction


@pytest.mark.needs_devices(4)
def test_the_head_accounts_for_the_whole_steps_difference(wide):
    """Compiled alone or in the step, the head changes the step's bytes by the same amount."""
    step = {
        v: sum(
            c.bytes_per_rank
            for c in collectives(lower_step(WIDE_VOCAB.replace(variant=v)).compiled)
        )
        for v in VARIANTS
    }
    head = {v: wide["explicit"][v]["bytes"] for v in step}
    assert step["EV"] - step["vocab-parallel"] == pytest.approx(
        head["EV"] - head["vocab-parallel"], abs=8
    )


def test_the_design_docs_figures_follow_from_its_shapes():
    llama2, qwen3 = design_doc_traffic()
    assert round(llama2["default_MB"], 1) == 196.6
    assert round(qwen3["default_MB"], 1) == 1400.2
    assert round(llama2["vocab_parallel_MB"], 1) == round(qwen3["vocab_parallel_MB"], 1) == 25.2
    assert llama2["ratio"] == pytest.approx(llama2["vocab_over_tokens"])
    assert qwen3["ratio"] == pytest.approx(1.5 * qwen3["vocab_over_tokens"])  # its all-reduce
