"""The fold rule (snippets/hlo/fold.py) against what XLA:CPU does on one device, and on
hand-written HLO for each condition; the stack-frame walk to the user's own line."""

import jax
import jax.numpy as jnp
import pytest

from find_barriers.program import instructions, read_hlo
from find_barriers.shapes import array_shapes
from find_barriers.sites import find_sites
from tests.hlo_fixtures import SITES


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


def test_each_condition_decides_as_xla_does():
    sites = {site.transpose: site for site in find_sites(read_hlo(SITES))}
    assert (sites["t1"].verdict, sites["t1"].no_fold) == ("blocked", None)
    assert (sites["t2"].verdict, sites["t2"].no_fold) == ("foldable", None)
    assert sites["t6"].verdict == "kept"  # the dot has a second user: no fold
    assert sites["t6"].no_fold == "the dot has 2 users"
    assert sites["t3"].verdict == "kept"  # an all-reduce stands between (partitioned)
    assert sites["t3"].no_fold.startswith("an all-reduce stands between")


FRAMES = """
HloModule jit_step, entry_computation_layout={(f32[2,3]{1,0}, f32[3,4]{1,0})->f32[4,2]{0,1}}

FileNames
1 "/home/me/train.py"
2 "/venv/lib/python3.12/site-packages/flax/nnx/nn/linear.py"

FunctionNames
1 "<module>"
2 "Linear.__call__"

FileLocations
1 {file_name_id=1 function_name_id=1 line=58 end_line=58 column=4 end_column=20}
2 {file_name_id=2 function_name_id=2 line=422 end_line=422 column=4 end_column=20}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}


ENTRY main.1 {
  a = f32[2,3]{1,0} parameter(0), metadata={op_name="params['w']"}
  b = f32[3,4]{1,0} parameter(1)
  d = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=2}
  ROOT t = f32[4,2]{0,1} transpose(d), dimensions={1,0}
}
"""


def test_the_user_line_is_the_first_frame_outside_the_libraries():
    (site,) = find_sites(read_hlo(FRAMES))
    library = "/venv/lib/python3.12/site-packages/flax/nnx/nn/linear.py:422"
    assert site.stack == (library, "/home/me/train.py:58")  # innermost first, then its parent
    assert (site.source, site.user_source) == (library, "/home/me/train.py:58")
