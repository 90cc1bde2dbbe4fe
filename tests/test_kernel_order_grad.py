"""The two kernel-order dot_generals a reader copies, the custom VJP and the auto_axes region,
alone and as a layer's ``dot_general``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from snippets.hlo.counts import kernel_sites
from snippets.kernel_order_grad import auto_axes_dot_general, kernel_order_dot_general
from snippets.lm_head import KERNEL_ORDER, DenseGeneral

EMB, VOCAB = 16, 32
BATCH = P("data", None, None)


def logits(dot_general):
    """``x @ kernel`` through ``dot_general``, as ``DenseGeneral`` calls it."""

    def head(x, kernel, out_sharding=None):
        contract = (((x.ndim - 1,), (0,)), ((), ()))
        return dot_general(x, kernel, contract, out_sharding=out_sharding)

    return head


HEADS = {name: logits(dot_general) for name, dot_general in KERNEL_ORDER.items() if name}


def _normal(seed, shape):
    """Standard normal float32 samples drawn by NumPy: no XLA compile per shape."""
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


def _inputs():
    return _normal(0, (2, 4, EMB)), _normal(1, (EMB, VOCAB))


def _loss(head, out_sharding=None):
    return lambda x, kernel: jnp.sum(jnp.sin(head(x, kernel, out_sharding)))


def _reference(x, kernel):
    return jnp.sum(jnp.sin(x @ kernel))


@pytest.mark.parametrize("name", HEADS)
def test_values_and_gradients_match_plain_autodiff(name):
    x, kernel = _inputs()
    np.testing.assert_allclose(HEADS[name](x, kernel, None), x @ kernel, rtol=1e-6, atol=1e-6)
    grads = jax.jit(jax.grad(_loss(HEADS[name]), argnums=(0, 1)))(x, kernel)
    expected = jax.jit(jax.grad(_reference, argnums=(0, 1)))(x, kernel)
    for got, want in zip(grads, expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("option", "shape"),
    [("custom_vjp", {}), ("auto_axes", {}), ("auto_axes", {"axis": (-2, -1), "out": (2, 8)})],
)
def test_the_layer_option_matches_the_plain_layer(option, shape):
    """Both dot_generals give the plain layer's values and gradients; auto_axes on any kernel."""
    x = _normal(2, (2, 4, EMB))
    axis, out = shape.get("axis", -1), shape.get("out", VOCAB)
    features = (4, EMB) if axis != -1 else EMB
    plain, fixed = (
        DenseGeneral(features, out, axis=axis, use_bias=True, dot_general=d, rngs=nnx.Rngs(0))
        for d in (jax.lax.dot_general, KERNEL_ORDER[option])
    )
    np.testing.assert_allclose(fixed(x), plain(x), rtol=1e-6, atol=1e-6)
    grad = nnx.jit(nnx.grad(lambda layer: jnp.sum(jnp.sin(layer(x)))))
    grads = [grad(h) for h in (plain, fixed)]
    np.testing.assert_allclose(grads[1].kernel[...], grads[0].kernel[...], rtol=1e-5, atol=1e-5)


def _explicit_grad_hlo(head, out_sharding=BATCH):
    mesh = jax.make_mesh((2,), ("data",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((4, 4, EMB)), BATCH)
        kernel = jax.device_put(jnp.ones((EMB, VOCAB)), P())
        grad = jax.jit(jax.grad(_loss(head, out_sharding), argnums=1))
        return grad.lower(x, kernel).compiler_ir("hlo").as_hlo_text()


@pytest.mark.needs_devices(2)
def test_the_custom_vjp_writes_the_weight_gradient_without_a_transpose():
    sites = kernel_sites(_explicit_grad_hlo(HEADS["custom_vjp"]), (EMB, VOCAB))
    assert sites == []


@pytest.mark.needs_devices(2)
@pytest.mark.parametrize("out_sharding", [BATCH, None], ids=["given", "inferred"])
def test_auto_axes_leaves_the_dot_feeding_its_transpose(out_sharding):
    head = HEADS["auto_axes"]
    sites = kernel_sites(_explicit_grad_hlo(head, out_sharding), (EMB, VOCAB))
    assert [site.verdict for site in sites] == ["foldable"]


@pytest.mark.needs_devices(2)
def test_the_plain_dot_keeps_the_barrier():
    """The control: without either head, explicit mode puts a Sharding call in between."""
    sites = kernel_sites(_explicit_grad_hlo(lambda x, k, s: x @ k), (EMB, VOCAB))
    assert [site.verdict for site in sites] == ["blocked"]


@pytest.mark.needs_devices(2)
def test_auto_axes_steps_aside_for_a_reduced_operand():
    """A kernel typed ``reduced`` gets the plain dot, as MaxText's region does: same program."""
    mesh = jax.make_mesh((2,), ("data",), axis_types=(AxisType.Explicit,))
    contract = (((1,), (0,)), ((), ()))

    def hlo(dot):
        def loss(kernel, x):
            kernel = jax.sharding.reshard(kernel, P(reduced={"data"}))
            return jnp.sum(dot(x, kernel, contract))

        with jax.set_mesh(mesh):
            x = jax.device_put(jnp.ones((4, EMB)), P("data", None))
            kernel = jax.device_put(jnp.ones((EMB, VOCAB)), P())
            return jax.jit(jax.grad(loss)).lower(kernel, x).as_text()

    assert hlo(auto_axes_dot_general) == hlo(jax.lax.dot_general)


def test_the_custom_vjp_derives_its_sharding_by_default():
    x, kernel = _inputs()
    np.testing.assert_allclose(HEADS["custom_vjp"](x, kernel), x @ kernel, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("axis", "flag"), [(-1, True), (0, False)])
def test_the_custom_vjp_rejects_any_kernel_but_in_out(axis, flag):
    """It writes an ``[in, out]`` kernel's gradient: a layer with any other says so when called."""
    custom_vjp = {"dot_general": kernel_order_dot_general}
    layer = DenseGeneral(16, 8, axis=axis, kernel_transposed=flag, **custom_vjp, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"last axis times a 2-axis \[in, out\] kernel's"):
        layer(jnp.ones((16, 16)))
