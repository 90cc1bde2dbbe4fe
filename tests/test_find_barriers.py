"""find_barriers and the site details it rests on, on hand-written HLO and on lowered programs."""

import dataclasses
import inspect

import jax
import jax.numpy as jnp
import pytest
from find_barriers.provenance import readable, user_frame
from flax import nnx

from find_barriers.loops import run_counts
from find_barriers.outputs import outputs_reached
from find_barriers.program import read_hlo
from find_barriers.sites import TransposeSite, find_sites
from snippets.hlo.lowered import lowered_sites, output_name
from snippets.lowering import StepConfig, build_step
from tests.hlo_fixtures import SITES

LOOP = """
HloModule jit_scan, entry_computation_layout={(f32[3,2]{1,0})->f32[2,2,3]{2,1,0}}

update {
  stack = f32[2,2,3]{2,1,0} parameter(0)
  slice = f32[2,3]{1,0} parameter(1)
  i = s32[] parameter(2)
  r = f32[1,2,3]{2,1,0} reshape(slice)
  z = s32[] constant(0)
  ROOT dus = f32[2,2,3]{2,1,0} dynamic-update-slice(stack, r, i, z, z)
}

body {
  carry = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) parameter(0)
  i = s32[] get-tuple-element(carry), index=0
  stack = f32[2,2,3]{2,1,0} get-tuple-element(carry), index=1
  w = f32[3,2]{1,0} get-tuple-element(carry), index=2
  d = f32[3,2]{1,0} dot(w, w), lhs_contracting_dims={}, rhs_contracting_dims={}
  t = f32[2,3]{0,1} transpose(d), dimensions={1,0}
  stacked = f32[2,2,3]{2,1,0} call(stack, t, i), to_apply=update
  unrelated = f32[2,2,3]{2,1,0} call(stack, stack, i), to_apply=update
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT carry_out = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) tuple(next, stacked, w)
}

cond {
  carry = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) parameter(0)
  i = s32[] get-tuple-element(carry), index=0
  two = s32[] constant(2)
  ROOT lt = pred[] compare(i, two), direction=LT
}

ENTRY main {
  w = f32[3,2]{1,0} parameter(0)
  zero = s32[] constant(0)
  init = f32[2,2,3]{2,1,0} broadcast(), dimensions={}
  loop = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) tuple(zero, init, w)
  result = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) while(loop), condition=cond, body=body
  ROOT grads = f32[2,2,3]{2,1,0} get-tuple-element(result), index=1
}
"""


def test_sites_carry_the_dot_shape_op_name_source_and_output():
    sites = {site.transpose: site for site in find_sites(read_hlo(SITES))}
    assert set(sites) == {"t1", "t2", "t3", "t6"}
    assert sites["t2"].dot_shape == "f32[32,16]"  # shapes without layouts
    assert sites["t2"].op_name == "jit(step)/dot_general"
    assert sites["t2"].source == "/somewhere/site-packages/model/layers.py:42"
    assert sites["t1"].op_name is None
    assert sites["t1"].source is None
    assert sites["t1"].between == ("Sharding",)
    assert [sites[name].output for name in ("t2", "t1", "t3")] == [0, 1, None]


def frames(program):
    """The innermost ``file:line`` of each stack frame id."""
    return {key: stack[0] for key, stack in program.stacks.items() if stack}


def test_frames_read_the_stack_frame_tables():
    assert frames(read_hlo(SITES)) == {1: "/somewhere/site-packages/model/layers.py:42"}
    assert frames(read_hlo("ENTRY main { ROOT x = f32[] constant(0) }")) == {}


def test_outputs_are_followed_through_a_loop_body_and_the_call_that_stacks_them():
    assert outputs_reached(read_hlo(LOOP), ["t", "d", "unrelated", "w"]) == {
        "t": 0,  # transpose -> stacking call -> loop result -> the entry's root
        "d": 0,  # the dot's value flows the same way, through the transpose
        "unrelated": None,  # a value nothing reads reaches nothing
        "w": None,  # the weights feed a dot, which makes a new value
    }


def test_a_site_in_a_loop_runs_once_per_trip_read_from_the_loop_condition():
    (site,) = find_sites(read_hlo(LOOP))
    assert site.trips == 2  # the counter starts at 0, steps by 1, runs while below 2
    assert str(site).endswith("x2 per run (in a loop)")
    assert find_sites(read_hlo(LOOP.replace("constant(2)", "constant(7)")))[0].trips == 7
    assert find_sites(read_hlo(LOOP.replace("direction=LT", "direction=LE")))[0].trips == 3
    known = LOOP.replace("body=body", 'body=body, backend_config={"known_trip_count":{"n":"9"}}')
    assert find_sites(read_hlo(known))[0].trips == 9  # what XLA wrote wins
    unknown = LOOP.replace("compare(i, two)", "compare(i, i)")  # no constant bound
    assert find_sites(read_hlo(unknown))[0].trips is None
    assert "x? per run (in a loop)" in str(find_sites(read_hlo(unknown))[0])


def test_a_loops_condition_runs_once_more_than_its_body():
    count = run_counts(read_hlo(LOOP))
    assert (count("main"), count("body"), count("cond"), count("update")) == (1, 2, 3, 4)
    assert count("nothing calls it") == 1


def test_output_names_read_as_a_reader_writes_the_parameter():
    grads = nnx.State({"head": {"kernel": nnx.Param(jnp.ones(2))}})
    outputs = (jnp.ones(()), grads, [2, 3], {"layers": [4]})  # as (loss, grads), and more
    paths = [path for path, _ in jax.tree.leaves_with_path(outputs)]
    names = ["result[0]", "head.kernel", "result[2][0]", "result[2][1]", "layers.0"]
    assert [output_name(path) for path in paths] == names
    assert output_name(()) == "result"


def test_a_call_that_does_not_pass_the_value_on_is_not_followed():
    (site,) = find_sites(read_hlo(LOOP))
    assert site.transpose == "t"
    assert site.output == 0
    changed = LOOP.replace("call(stack, t, i)", "call(stack, stack, i)")
    assert outputs_reached(read_hlo(changed), ["t"]) == {"t": None}


def test_find_barriers_on_a_plain_gradient():
    line = inspect.currentframe().f_lineno + 1
    lowered = jax.jit(jax.grad(lambda w, x: (x @ w).sum())).lower(
        jnp.ones((3, 4)), jnp.ones((2, 3))
    )
    (site,) = lowered_sites(lowered)
    assert (site.chain, site.between) == ("dot f32[4,3] -> transpose f32[3,4]", ())
    assert site.output == "result"
    assert not site.blocked
    assert readable(site.source) == f"tests/test_find_barriers.py:{line}"
    assert str(site) == (
        f"foldable  tests/test_find_barriers.py:{line}  weight gradient (output result)  "
        "dot f32[4,3] -> transpose f32[3,4]"
    )


def test_find_barriers_finds_nothing_in_a_program_without_a_site():
    assert (
        lowered_sites(jax.jit(lambda a, b: a @ b).lower(jnp.ones((2, 3)), jnp.ones((3, 4)))) == []
    )


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize(("mode", "between"), [("explicit", ("Sharding",)), ("auto", ())])
def test_find_barriers_on_the_guides_step(mode, between):
    lowered = build_step(StepConfig(mode=mode, devices=4)).lower()
    (site,) = lowered_sites(lowered)
    assert (site.dot_shape, site.shape) == ("f32[256,64]", "f32[64,256]")
    assert site.between == between
    assert site.blocked == bool(between)
    assert site.output == "head.kernel"  # not [1]['head']['kernel'].value
    assert readable(site.source).startswith("snippets/lm_head.py:")


def test_a_source_reads_from_its_package_or_from_the_projects_root(tmp_path, monkeypatch):
    assert readable(f"{jax.__file__}:3") == "jax/__init__.py:3"
    here = f"{inspect.getfile(find_barriers)}:7"
    assert readable(here) == "snippets/hlo/lowered.py:7"
    monkeypatch.chdir("guides")  # as a notebook runs: still from the project's root
    assert readable(here) == "snippets/hlo/lowered.py:7"
    monkeypatch.chdir(tmp_path)  # in no project: the whole path
    assert readable(here) == here
    assert readable("/elsewhere/model.py:7") == "/elsewhere/model.py:7"


def test_a_found_site_reads_as_one_line():
    site = TransposeSite("t", "f32[2,8]{0,1}", "d", ("Sharding",), "barrier", "f32[8,2]{1,0}")
    site = dataclasses.replace(site, output="w", source="/elsewhere/m.py:3", role="weight gradient")
    line = "/elsewhere/m.py:3  weight gradient (output w)  dot f32[8,2] -> Sharding -> transpose f32[2,8]"
    assert str(site) == f"blocked   {line}"
    assert site.line("accepted") == f"accepted  {line}"
    assert site.blocked
    bare = dataclasses.replace(site, output=None, source=None, role="unknown")
    assert str(bare).startswith("blocked   no source line  unknown  dot")


def test_maxtexts_process_wide_constraint_shim_is_not_the_users_line():
    """Once imported, MaxText's tunix adapter wraps ``with_sharding_constraint`` for every caller."""
    shim = "/v/site-packages/maxtext/integration/tunix/tunix_adapter.py:43"
    assert user_frame([shim, "/home/me/model.py:7"]) == "/home/me/model.py:7"
    assert user_frame(["/v/site-packages/maxtext/layers/linears.py:9"]).endswith("linears.py:9")
