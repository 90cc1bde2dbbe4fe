"""The two heads a reader copies: the kernel-order custom VJP and the auto_axes region."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from snippets.auto_axes_head import auto_axes_logits
from snippets.hlo import transpose_of_dot_sites
from snippets.kernel_order_grad import kernel_order_logits

EMB, VOCAB = 16, 32
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


def _explicit_grad_hlo(head):
    mesh = jax.make_mesh((2,), ("data",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((4, 4, EMB)), P("data", None, None))
        kernel = jax.device_put(jnp.ones((EMB, VOCAB)), P())
        grad = jax.jit(jax.grad(_loss(head, P("data", None, None)), argnums=1))
        return grad.lower(x, kernel).compiler_ir("hlo").as_hlo_text()


@pytest.mark.needs_devices(2)
def test_the_custom_vjp_writes_the_weight_gradient_without_a_transpose():
    assert transpose_of_dot_sites(_explicit_grad_hlo(kernel_order_logits), (EMB, VOCAB)) == []


@pytest.mark.needs_devices(2)
def test_auto_axes_leaves_the_dot_feeding_its_transpose():
    sites = transpose_of_dot_sites(_explicit_grad_hlo(auto_axes_logits), (EMB, VOCAB))
    assert [site.kind for site in sites] == ["foldable"]
