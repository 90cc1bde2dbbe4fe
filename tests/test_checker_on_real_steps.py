"""find-barriers on steps made here with JAX: its fixtures are what this JAX dumps of their models
today, and MaxText's decoder with scanned layers has every weight gradient named and counted."""

from pathlib import Path

import pytest

from find_barriers import find_sites, main, read_hlo, read_module
from snippets.hlo.maxtext_decoder import DecoderConfig, lower_decoder
from tests.checker_fixtures import DATA, fixtures

pytestmark = pytest.mark.needs_devices(4)


def summary(sites) -> list[tuple]:
    return [(s.where, s.what, s.chain, s.trips, s.verdict, s.placed_at) for s in sites]


def test_the_checkers_fixtures_are_what_this_jax_dumps_of_their_models():
    fresh = fixtures()
    assert sorted(fresh) == sorted(path.name for path in DATA.glob("*.hlo.txt"))
    for name, text in fresh.items():
        committed = find_sites(read_module(str(DATA / name)))
        assert summary(find_sites(read_hlo(text))) == summary(committed), (
            f"{name}: run `python -m tests.checker_fixtures` to write the fixtures anew"
        )


@pytest.fixture(scope="module")
def maxtext_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """XLA:CPU's dump of MaxText's decoder, two scanned layers, explicit mode."""
    folder = tmp_path_factory.mktemp("maxtext")
    decoder = lower_decoder(DecoderConfig(scan=True, layers=2), "explicit", devices=4)
    options = {"xla_dump_to": str(folder), "xla_dump_hlo_as_text": True}
    decoder.lowered.compile(compiler_options=options | {"xla_dump_hlo_module_re": "step"})
    return folder


def test_maxtexts_scanned_layers_have_every_weight_gradient_named_and_counted(maxtext_dump):
    (module,) = maxtext_dump.glob("*.before_optimizations.txt")
    weights = [s for s in find_sites(read_module(str(module))) if s.role == "weight gradient"]
    layers = [s for s in weights if "['layers']" in (s.parameter or "")]
    assert all(s.parameter and s.parameter.startswith("params['decoder']") for s in weights)
    assert {s.trips for s in layers} == {2}  # once per scanned layer
    mlp = {s.parameter.split("['mlp']")[1] for s in layers if s.verdict == "blocked"}
    assert mlp == {"['wi_0']['kernel'].value", "['wi_1']['kernel'].value", "['wo']['kernel'].value"}
    attention = {
        s.parameter.split("['self_attention']")[1] for s in layers if s.verdict == "pinned"
    }
    assert attention == {f"['{name}']['kernel'].value" for name in ("query", "key", "value", "out")}
    assert {s.cost.bytes for s in layers} == {0}  # stacked in the scan
    assert any("['logits_dense']" in s.parameter for s in weights if s.blocked and s.trips == 1)


def test_maxtexts_step_is_found_by_its_module_name(maxtext_dump, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([str(maxtext_dump), "--module", "^jit_step$", "--quiet"])
    (finding,) = capsys.readouterr().out.splitlines()  # the layers' cost nothing: FB005, below
    assert exit_info.value.code == 1
    assert (": FB001 " in finding, "['logits_dense']" in finding) == (True, True)
