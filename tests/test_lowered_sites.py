"""lowered_sites: find-barriers' site finder on a ``jax.jit(...).lower(...)``, read from its
StableHLO module, with each output named as the reader writes the parameter."""

import inspect

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

import find_barriers
from find_barriers.frames import readable
from find_barriers.program import Frame
from snippets.hlo.lowered import lowered_sites, output_name
from snippets.lowering import StepConfig, build_step


def test_output_names_read_as_a_reader_writes_the_parameter():
    grads = nnx.State({"head": {"kernel": nnx.Param(jnp.ones(2))}})
    outputs = (jnp.ones(()), grads, [2, 3], {"layers": [4]})  # as (loss, grads), and more
    paths = [path for path, _ in jax.tree.leaves_with_path(outputs)]
    names = ["result[0]", "head.kernel", "result[2][0]", "result[2][1]", "layers.0"]
    assert [output_name(path) for path in paths] == names
    assert output_name(()) == "result"


def helper(x, w):
    return x @ w


def test_a_plain_gradient_names_its_line_function_and_output():
    line = inspect.currentframe().f_lineno + 1
    lowered = jax.jit(jax.grad(lambda w, x: helper(x, w).sum())).lower(
        jnp.ones((3, 4)), jnp.ones((2, 3))
    )
    (site,) = lowered_sites(lowered)
    assert (site.chain, site.between, site.output) == (
        "dot f32[4,3] -> transpose f32[3,4]",
        (),
        "result",
    )
    assert not site.blocked
    here = "tests/test_lowered_sites.py"
    assert [(readable(frame), frame.function) for frame in site.user_stack[:2]] == [
        (f"{here}:{inspect.getsourcelines(helper)[1] + 1}", "helper"),
        (
            f"{here}:{line}",
            "test_a_plain_gradient_names_its_line_function_and_output.<locals>.<lambda>",
        ),
    ]
    assert lowered.compiler_ir().operation.attributes["sym_name"]  # the program has a name


def test_a_program_without_a_site_has_none():
    lowered = jax.jit(lambda a, b: a @ b).lower(jnp.ones((2, 3)), jnp.ones((3, 4)))
    assert lowered_sites(lowered) == []


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize(("mode", "between"), [("explicit", ("Sharding",)), ("auto", ())])
def test_the_guides_step_has_one_site_the_heads(mode, between):
    lowered = build_step(StepConfig(mode=mode, devices=4)).lower()
    (site,) = lowered_sites(lowered)
    assert (site.dot_shape, site.shape) == ("f32[256,64]", "f32[64,256]")
    assert (site.between, site.blocked) == (between, bool(between))
    assert site.output == "head.kernel"  # not [1]['head']['kernel'].value
    assert readable(site.user_line).startswith("snippets/lm_head.py:")


def test_a_source_reads_from_its_package_or_from_the_projects_root(tmp_path, monkeypatch):
    assert readable(Frame(jax.__file__, 3)) == "jax/__init__.py:3"
    here = Frame(inspect.getfile(lowered_sites), 7)
    assert readable(here) == "snippets/hlo/lowered.py:7"
    monkeypatch.chdir("guides")  # as a notebook runs: still from the project's root
    assert readable(here) == "snippets/hlo/lowered.py:7"
    monkeypatch.chdir(tmp_path)  # in no project: the whole path
    assert readable(here) == str(here)


def test_find_sites_of_a_lowered_step_raises_a_type_error_naming_the_reader():
    lowered = jax.jit(lambda w, x: (x @ w).T).lower(jnp.ones((3, 4)), jnp.ones((2, 3)))
    with pytest.raises(TypeError, match=r"not a jax\.stages\.Lowered: find_sites\(read_hlo\("):
        find_barriers.find_sites(lowered)
    (site,) = find_barriers.find_sites(
        find_barriers.read_hlo(lowered.as_text(dialect="hlo", debug_info=True))
    )
    assert site.verdict == "foldable"
