"""The lowered LM-head step on the simulated mesh: barrier, fold sites, fixes, pin and control."""

import functools
import typing

import numpy as np
import pytest

from snippets.devices import SHARD_MODES, TooFewDevicesError
from snippets.hlo.barrier import logits_pin_diff, pass_window, run_report, single_device_control
from snippets.hlo.counts import kernel_sites
from snippets.hlo.maxtext_decoder import DecoderConfig
from snippets.hlo.programs import lower_built, lower_step
from snippets.lowering import (
    MESH_AXES,
    VARIANTS,
    StepConfig,
    build_step,
    every_mode_and_variant,
)

BASE = StepConfig()
DIMS = BASE.kernel_dims


@pytest.fixture(scope="module")
def steps():
    """``build_step``, once per config: lowering a built step and calling it share one compile."""
    return functools.cache(build_step)


@pytest.fixture(scope="module")
def runs(steps):
    """The barrier report of every (mode x variant) on the 4-way data-parallel mesh."""
    return {
        (mode, variant): run_report(lower_built(steps(BASE.replace(mode=mode, variant=variant))))
        for mode in ("explicit", "auto")
        for variant in ("EV", "VE", "custom-vjp", "auto-axes")
    }


def test_the_configs_literals_spell_out_the_tables_they_choose_from():
    """The tables keyed by a Literal must have one entry per value, no more."""
    tables = {"mode": SHARD_MODES, "variant": VARIANTS, "mesh": MESH_AXES}
    for name, table in tables.items():
        assert typing.get_args(StepConfig.model_fields[name].annotation) == tuple(table), name
    assert typing.get_args(DecoderConfig.model_fields["mesh"].annotation) == tuple(MESH_AXES)


def test_explicit_ev_has_the_barrier_and_no_foldable_site(runs):
    run = runs[("explicit", "EV")]
    assert run["sharding_calls"] > 0
    assert run["barrier_sites"] >= 1
    assert run["foldable_sites"] == 0


def test_auto_ev_has_the_transpose_of_dot_with_nothing_between(runs):
    run = runs[("auto", "EV")]
    assert run["sharding_calls"] == 0
    assert run["foldable_sites"] == 1
    assert run["barrier_sites"] == 0


def test_the_barrier_chain_is_dot_sharding_transpose(steps):
    hlo = lower_built(steps(BASE)).hlo
    (site,) = kernel_sites(hlo, DIMS)
    assert site.between == ("Sharding",)
    assert site.verdict == "blocked"


@pytest.mark.parametrize("mode", ["explicit", "auto"])
@pytest.mark.parametrize("variant", ["VE", "custom-vjp"])
def test_fixes_leave_no_weight_gradient_transpose(runs, mode, variant):
    run = runs[(mode, variant)]
    assert run["barrier_sites"] == run["foldable_sites"] == 0
    assert run["compiled_transposes"] == []
    assert run["relayout_copies"] == []


@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_auto_axes_lowers_the_head_as_auto_mode_does(runs, mode):
    """No barrier; the dot feeds its transpose directly, so the TPU/GPU simplifier can fold it.

    On a multi-device CPU the partitioner runs first (an all-reduce lands between), so
    the compiled leftovers are auto EV's; the causal control shows the fold itself.
    """
    run = runs[(mode, "auto-axes")]
    assert run["barrier_sites"] == 0
    assert run["foldable_sites"] == 1
    assert run["compiled_transposes"] == runs[("auto", "EV")]["compiled_transposes"]
    assert run["relayout_copies"] == runs[("auto", "EV")]["relayout_copies"]


@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_ev_keeps_a_relayout_of_the_weight_gradient_on_cpu(runs, mode):
    assert runs[(mode, "EV")]["relayout_copies"] == [f"f32[{BASE.emb},{BASE.vocab}]{{1,0}}"]


def test_the_out_sharding_pin_contributes_nothing():
    pin = logits_pin_diff(BASE)
    assert pin["lines"] == []
    assert pin["sharding_calls_from_pin"] == 0
    assert pin["sharding_calls_pinned"] > 0


@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_single_device_folds_the_transpose(mode):
    control = single_device_control(BASE.replace(mode=mode))
    assert control["folded"]
    assert control["kernel_order_dots"] == [f"f32[{BASE.emb},{BASE.vocab}]{{1,0}}"]


def test_single_device_ve_writes_no_embed_vocab_gradient():
    """The negative case: VE's gradient is [vocab, emb], its own order; no dot writes [emb, vocab]."""
    control = single_device_control(BASE.replace(variant="VE"))
    assert not control["folded"]
    assert control["kernel_order_dots"] == []


def test_cpu_partitions_before_it_simplifies():
    window = pass_window(BASE)
    assert window["partitioner_first"] is True
    (site,) = window["sites_at_first_algsimp"]
    assert "all-reduce" in site["between"]
    assert "Sharding" not in site["between"]


@pytest.mark.parametrize("mesh", ["dp", "dp_fsdp", "fsdp"])
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_every_variant_has_the_same_gradients(steps, mesh, mode):
    config = BASE.replace(mesh=mesh, mode=mode)
    loss, grads = steps(config)()
    ev_kernel = np.asarray(grads.head.kernel[...])
    variants = {c.variant for c in every_mode_and_variant(config)} - {"EV"}
    for variant in sorted(variants):
        other_loss, other = steps(config.replace(variant=variant))()
        kernel = np.asarray(other.head.kernel[...])
        np.testing.assert_allclose(other_loss, loss, rtol=1e-6)
        np.testing.assert_allclose(
            kernel.T if variant == "VE" else kernel, ev_kernel, rtol=1e-5, atol=1e-7
        )
        np.testing.assert_allclose(other.embedding[...], grads.embedding[...], rtol=1e-5, atol=1e-7)


def test_the_step_runs_on_the_mesh(steps):
    step = steps(BASE)
    loss, grads = step()
    assert np.isfinite(float(loss))
    assert grads.head.kernel[...].shape == DIMS
    tokens = step.args[1]
    assert len(tokens.sharding.device_set) == BASE.devices


def test_more_devices_than_exist_is_rejected(device_count):
    with pytest.raises(TooFewDevicesError, match=f"{2 * device_count} devices are needed"):
        build_step(BASE.replace(devices=2 * device_count, batch=2 * device_count))


@pytest.fixture(scope="module")
def fsdp_runs(steps):
    """The barrier report of every (mode x variant) on the data x fsdp mesh."""
    return {
        (config.mode, config.variant): run_report(lower_built(steps(config)))
        for config in every_mode_and_variant(BASE.replace(mesh="dp_fsdp"))
    }


def test_fsdp_explicit_ev_relays_its_gradient_found_by_data_flow(fsdp_runs):
    run = fsdp_runs[("explicit", "EV")]
    assert run["gradient_relayouts"] >= 1
    assert any("transpose" in op for op in run["gradient_relayout_ops"])


@pytest.mark.parametrize("mode", ["explicit", "auto"])
@pytest.mark.parametrize("variant", ["VE", "custom-vjp"])
def test_fsdp_fixes_relay_no_gradient(fsdp_runs, mode, variant):
    assert fsdp_runs[(mode, variant)]["gradient_relayouts"] == 0


@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_fsdp_auto_axes_relays_as_auto_ev_does_on_cpu(fsdp_runs, mode):
    """CPU partitions before it simplifies, so auto mode's own relayout stays (see the guide)."""
    expected = fsdp_runs[("auto", "EV")]["gradient_relayouts"]
    assert fsdp_runs[(mode, "auto-axes")]["gradient_relayouts"] == expected


def test_the_optimizer_step_updates_and_reports_its_relayouts(steps):
    config = BASE.replace(mesh="dp_fsdp", optimizer="adam")
    loss, params, opt_state = steps(config)()
    assert np.isfinite(float(loss))
    assert params.head.kernel[...].shape == DIMS
    assert int(opt_state[0].count) == 1  # AdamW took one step
    run = run_report(lower_built(steps(config)))
    assert run["optimizer"] == "adam"
    assert run["gradient_relayouts"] >= 1
    ve = run_report(lower_step(config.replace(variant="VE")))
    assert ve["gradient_relayouts"] == 0
