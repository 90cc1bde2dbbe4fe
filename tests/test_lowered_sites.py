"""find_barriers.jax on the site's steps: ``lowered_sites`` reads the sites of the HLO text of the
same lowering, on the guides' step and MaxText's decoder, each output named as a reader writes the
parameter. Its own tests, on plain JAX steps, are find-barriers' (``nox -s checker_jax``)."""

import inspect

import jax
import pytest

from find_barriers import Frame, TransposeSite, find_sites, read_hlo, readable
from find_barriers.jax import lowered_sites, output_names
from snippets.hlo.maxtext_decoder import DecoderConfig, lower_decoder
from snippets.lowering import StepConfig, build_step


def facts(site: TransposeSite, names: list[str]) -> tuple:
    """Everything a site says but the instruction names, which each reading makes up; its output
    by name."""
    output = names[site.output] if isinstance(site.output, int) else site.output
    return (
        site.dot_shape,
        site.shape,
        site.between,
        site.verdict,
        output,
        site.op_name,
        site.source,
        site.trips,
    )


def both_readings(lowered: jax.stages.Lowered) -> tuple[list[tuple], list[tuple]]:
    """The sites ``lowered_sites`` reads, and those of the HLO text XLA converts the module to."""
    names = output_names(lowered)
    text = read_hlo(lowered.as_text(dialect="hlo", debug_info=True))
    from_module = [facts(site, names) for site in lowered_sites(lowered)]
    return from_module, [facts(site, names) for site in find_sites(text)]


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize(("mode", "between"), [("explicit", ("Sharding",)), ("auto", ())])
def test_the_guides_step_has_one_site_the_heads(mode, between):
    lowered = build_step(StepConfig(mode=mode, devices=4)).lower()
    (site,) = lowered_sites(lowered)
    assert (site.dot_shape, site.shape) == ("f32[256,64]", "f32[64,256]")
    assert (site.between, site.blocked) == (between, bool(between))
    assert site.output == "head.kernel"  # not [1]['head']['kernel'].value
    assert readable(site.user_line).startswith("snippets/lm_head.py:")


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mesh", ["dp", "dp_fsdp"])
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_the_guides_step_reads_the_same_both_ways(mode, mesh):
    lowered, text = both_readings(build_step(StepConfig(mode=mode, mesh=mesh)).lower())
    assert lowered == text
    assert len(lowered) == 1
    assert lowered[0][2] == (("Sharding",) if mode == "explicit" else ())


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("scan", [False, True], ids=["unrolled", "scan"])
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_maxtext_decoder_reads_the_same_both_ways(mode, scan):
    lowered, text = both_readings(lower_decoder(DecoderConfig(layers=2, scan=scan), mode).lowered)
    assert lowered == text
    assert len(lowered) == (24 if scan else 44)  # a layer's sites once in the loop body
    weight_gradients = [site for site in lowered if site[4] is not None]
    assert weight_gradients
    if scan:  # in the 2-layer loop, or not; the layers' weight gradients leave the loop
        assert {site[7] for site in lowered} == {1, 2}
        assert any(site[7] == 2 for site in weight_gradients)
    assert all(("Sharding" in site[2]) == (mode == "explicit") for site in lowered)


def test_a_source_reads_from_its_package_or_from_the_projects_root(tmp_path, monkeypatch):
    assert readable(Frame(jax.__file__, 3)) == "jax/__init__.py:3"
    here = Frame(inspect.getfile(build_step), 7)
    assert readable(here) == "snippets/lowering.py:7"
    monkeypatch.chdir("guides")  # as a notebook runs: still from the project's root
    assert readable(here) == "snippets/lowering.py:7"
    monkeypatch.chdir(tmp_path)  # in no project: the whole path
    assert readable(here) == str(here)
