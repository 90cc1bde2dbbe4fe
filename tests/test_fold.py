"""find-barriers' fold rule against what XLA:CPU does on one device: the rule's verdict
on each program's site is what the compiled module shows (find-barriers' own tests check each
condition on hand-written HLO)."""

import jax
import jax.numpy as jnp
import pytest

from find_barriers import array_shapes, find_sites, instructions, read_hlo


def weight_gradient(w, x):
    return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)


def attention_gradient(q, k):
    return jax.grad(lambda q: jnp.sum(jnp.tanh(jnp.einsum("bqhd,bkhd->bhqk", q, k))))(q)


def heads_gradient(w, x):  # a DenseGeneral kernel [embed, heads, head_dim], as MaxText's
    return jax.grad(lambda w: jnp.sum(jnp.tanh(jnp.einsum("bse,ehd->bshd", x, w))))(w)


def reshape_chain(x, w):
    return jnp.transpose((x @ w).reshape(32, 4, 6), (1, 0, 2))


PROGRAMS = {
    "2-D weight gradient": (weight_gradient, [(16, 24), (32, 16)], "foldable"),
    "batched 4-D attention einsum": (attention_gradient, [(8, 16, 4, 16)] * 2, "kept"),
    "reshape chain": (reshape_chain, [(32, 16), (16, 24)], "kept"),
    "3-D kernel's weight gradient": (heads_gradient, [(16, 4, 8), (2, 8, 16)], "kept"),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_rule_predicts_what_xla_cpu_does_on_one_device(name):
    function, shapes, verdict = PROGRAMS[name]
    lowered = jax.jit(function).lower(*(jnp.ones(shape) for shape in shapes))  # one device
    (site,) = find_sites(read_hlo(lowered.as_text(dialect="hlo")))
    compiled = lowered.compile().as_text()
    transposes = [i for i in instructions(compiled) if i.opcode == "transpose"]
    left = [i for i in transposes if array_shapes(i.shape) == array_shapes(site.shape)]
    assert site.verdict == verdict
    assert bool(left) == (verdict == "kept")  # kept: XLA:CPU left the transpose; folded: none
    assert (site.no_fold is None) == (verdict == "foldable")
