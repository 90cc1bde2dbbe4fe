"""The causal control: with the Sharding calls kept, explicit mode loses the fold on CPU too."""

import json

import pytest

from snippets.hlo import causal_control as cc
from snippets.lowering import StepConfig
from snippets.measure import causal_control as cc_command

FIXES = ("VE", "custom-vjp", "auto-axes")


@pytest.fixture(scope="module")
def rows():
    return {(row["mode"], row["variant"]): row for row in cc.causal_control(StepConfig())}


def test_the_sharding_call_keeps_the_explicit_gradient_transposed(rows):
    row = rows["explicit", "EV"]
    assert row["gradient_in_kernel_order"] is False
    assert row["gradient_transposes"] >= 1
    assert row["sharding_calls_at_first_simplifier"] > 0
    assert row["ending"] == "codegen failed as expected"
    labels = [step.split()[0] for step in row["chain_at_site"]["chain"].split(" -> ")]
    assert labels == ["dot", "Sharding", "transpose"]


def test_without_the_calls_the_simplifier_folds_the_transpose(rows):
    row = rows["auto", "EV"]
    assert row["gradient_in_kernel_order"] is True
    assert row["gradient_transposes"] == 0
    assert row["sharding_calls_at_first_simplifier"] == 0
    assert row["chain_at_site"]["next_pass"] == "algsimp"  # the site's last stop: the fold


@pytest.mark.parametrize("mode", ["explicit", "auto"])
@pytest.mark.parametrize("variant", FIXES)
def test_every_fix_writes_the_gradient_in_stored_order(rows, mode, variant):
    row = rows[mode, variant]
    assert row["gradient_in_kernel_order"] is True
    assert row["gradient_transposes"] == 0
    if variant == "auto-axes":  # like auto mode: the dot feeds its transpose, algsimp folds it
        assert row["chain_at_site"]["next_pass"] == "algsimp"
    else:  # the gradient never needs a transpose
        assert row["chain_at_site"] is None


@pytest.mark.parametrize(
    ("calls", "error", "message"),
    [
        (100, None, "step compiled; expected codegen to fail"),
        (100, "INTERNAL: something else\nmore", "failed with: INTERNAL: something else;"),
        (0, f"NOT_FOUND: {cc.EXPECTED_CODEGEN_ERROR} for Host", "expected it to compile"),
    ],
)
def test_any_other_ending_says_xla_changed(calls, error, message):
    with pytest.raises(cc.XlaChangedError, match=message) as raised:
        cc.check_ending("explicit/EV", calls, error)
    assert "XLA changed" in str(raised.value)


def test_a_compile_that_succeeds_with_calls_fails_loudly(monkeypatch):
    monkeypatch.setattr(cc, "compile_with_dumps", lambda *_: ({}, None))
    with pytest.raises(cc.XlaChangedError, match=r"explicit/EV: with \d+ Sharding call"):
        cc.control(StepConfig())


def final_module(transposed: bool) -> str:
    """A compiled module whose dot writes the [64, 256] gradient, with a transpose left or not."""
    left = "  t = f32[64,256]{1,0} transpose(w), dimensions={1,0}\n" if transposed else ""
    return (
        "HloModule m\nENTRY main {\n"
        "  x = f32[128,64]{1,0} parameter(0)\n  g = f32[128,256]{1,0} parameter(1)\n"
        "  w = f32[256,64]{1,0} parameter(2)\n"
        "  d = f32[64,256]{1,0} dot(x, g), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
        f"{left}  ROOT r = f32[64,256]{{1,0}} add(d, d)\n}}\n"
    )


@pytest.mark.parametrize(("transposed", "in_order"), [(False, True), (True, False)])
def test_in_kernel_order_means_a_kernel_order_dot_and_no_transpose(
    monkeypatch, transposed, in_order
):
    """Both ways, on hand-written dumps: a dot that writes [emb, vocab] is not enough."""
    dumps = {
        "module_0001.jit_f.0001.simplification.after_dce.before_algsimp.txt": final_module(False),
        "module_0001.jit_f.after_optimizations.txt": final_module(transposed),
    }
    ended = f"INTERNAL: {cc.EXPECTED_CODEGEN_ERROR} for Host"
    monkeypatch.setattr(cc, "compile_with_dumps", lambda *_: (dumps, ended))
    row = cc.control(StepConfig())
    assert (row["gradient_in_kernel_order"], row["gradient_transposes"]) == (in_order, transposed)


def test_with_the_remover_on_a_compile_with_calls_is_the_expected_ending():
    assert cc.check_ending("explicit/EV", 100, None, remover=True) == "compiled"


def test_the_pair_is_one_explicit_module_with_the_remover_on_then_off(monkeypatch):
    monkeypatch.setattr(cc, "control", lambda config, remover: (config, remover))
    explicit = StepConfig(mode="explicit", variant="EV")
    assert cc.paired_control(StepConfig(mode="auto", variant="VE")) == [
        (explicit, True),
        (explicit, False),
    ]


def test_only_the_remover_decides_the_fold(rows):
    on, off = cc.control(StepConfig(), remover=True), rows["explicit", "EV"]
    assert (on["sharding_remover"], off["sharding_remover"]) == ("on", "off")
    assert on["sharding_calls_at_first_simplifier"] == 0
    assert off["sharding_calls_at_first_simplifier"] > 0
    assert (on["gradient_in_kernel_order"], off["gradient_in_kernel_order"]) == (True, False)
    assert on["chain_at_site"]["next_pass"] == "algsimp"  # the remover's module: algsimp folds
    assert (on["ending"], off["ending"]) == ("compiled", "codegen failed as expected")


def test_the_cli_prints_every_row(rows, monkeypatch, capsys):
    monkeypatch.setattr(cc_command, "causal_control", lambda base: list(rows.values()))
    cc_command.main(["--json"])
    assert json.loads(capsys.readouterr().out) == list(rows.values())
    cc_command.main([])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| mode | variant | sharding_remover | gradient_in_kernel_order |")
    assert len(lines) == 2 + len(rows)


def test_an_unknown_flag_is_one_error_line(one_error_line):
    line = one_error_line(cc_command.main, ["--devices", "2"])
    assert line.startswith("error: unrecognized arguments: --devices 2")
