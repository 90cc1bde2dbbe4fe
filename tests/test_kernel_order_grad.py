"""The two kernel-order heads a reader copies, the custom VJP and the auto_axes region, alone
and as the layer's ``weight_grad_in_kernel_order`` options."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from snippets.hlo.sites import transpose_of_dot_sites
from snippets.kernel_order_grad import auto_axes_dot_general, kernel_order_logits
from snippets.lm_head import DenseGeneral

EMB, VOCAB = 16, 32
BATCH = P("data", None, None)


def auto_axes_logits(x, kernel, out_sharding):
    """``x @ kernel`` through :func:`auto_axes_dot_general`, as ``DenseGeneral`` calls it."""
    contract = (((x.ndim - 1,), (0,)), ((), ()))
    return auto_axes_dot_general(x, kernel, contract, out_sharding=out_sharding)


HEADS = {"kernel-order-grad": kernel_order_logits, "auto-axes": auto_axes_logits}


def _inputs():
    keys = jax.random.split(jax.random.key(0), 2)
    return jax.random.normal(keys[0], (2, 4, EMB)), jax.random.normal(keys[1], (EMB, VOCAB))


def _loss(head, out_sharding=None):
    return lambda x, kernel: jnp.sum(jnp.sin(head(x, kernel, out_sharding)))


def _reference(x, kernel):
    return jnp.sum(jnp.sin(x @ kernel))


@pytest.mark.parametrize("name", HEADS)
def test_values_and_gradients_match_plain_autodiff(name):
    x, kernel = _inputs()
    np.testing.assert_allclose(HEADS[name](x, kernel, None), x @ kernel, rtol=1e-6, atol=1e-6)
    grads = jax.grad(_loss(HEADS[name]), argnums=(0, 1))(x, kernel)
    expected = jax.grad(_reference, argnums=(0, 1))(x, kernel)
    for got, want in zip(grads, expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("option", "shape"),
    [("custom_vjp", {}), ("auto_axes", {}), ("auto_axes", {"axis": (-2, -1), "out": (4, 8)})],
)
def test_the_layer_option_matches_the_plain_layer(option, shape):
    """Both options give the plain layer's values and gradients; auto_axes on any kernel."""
    x = jax.random.normal(jax.random.key(1), (2, 4, EMB))
    axis, out = shape.get("axis", -1), shape.get("out", VOCAB)
    features = (4, EMB) if axis != -1 else EMB
    plain, fixed = (
        DenseGeneral(
            features, out, axis=axis, use_bias=True, weight_grad_in_kernel_order=o, rngs=nnx.Rngs(0)
        )
        for o in (None, option)
    )
    np.testing.assert_allclose(fixed(x), plain(x), rtol=1e-6, atol=1e-6)
    grads = [nnx.grad(lambda layer: jnp.sum(jnp.sin(layer(x))))(h) for h in (plain, fixed)]
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
    assert transpose_of_dot_sites(_explicit_grad_hlo(kernel_order_logits), (EMB, VOCAB)) == []


@pytest.mark.needs_devices(2)
@pytest.mark.parametrize("out_sharding", [BATCH, None], ids=["given", "inferred"])
def test_auto_axes_leaves_the_dot_feeding_its_transpose(out_sharding):
    sites = transpose_of_dot_sites(_explicit_grad_hlo(auto_axes_logits, out_sharding), (EMB, VOCAB))
    assert [site.kind for site in sites] == ["foldable"]


@pytest.mark.needs_devices(2)
def test_the_plain_dot_keeps_the_barrier():
    """The control: without either head, explicit mode puts a Sharding call in between."""
    sites = transpose_of_dot_sites(_explicit_grad_hlo(lambda x, k, s: x @ k), (EMB, VOCAB))
    assert [site.kind for site in sites] == ["barrier"]


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


def test_kernel_order_logits_derives_its_sharding_by_default():
    x, kernel = _inputs()
    np.testing.assert_allclose(kernel_order_logits(x, kernel), x @ kernel, rtol=1e-6, atol=1e-6)
