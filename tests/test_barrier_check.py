"""find-barriers on the guides' own step: XLA:CPU's dumps and the HLO lowered for TPU list the
sites lowered_sites finds, and the files XLA and JAX write beside them are refused by name."""

import importlib.resources
import json
import re
import subprocess
import sys
from pathlib import Path

import jax
import jsonschema
import pytest

from find_barriers import find_sites, main, read_module
from find_barriers.jax import lowered_sites, output_names
from snippets.lowering import StepConfig, build_step

ROOT = Path(__file__).resolve().parent.parent
PARAMETER = "model.head.kernel.value"
"""How XLA's dump of the guides' step names the head's kernel (its ``op_name``)."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The guides' step in each mode: XLA:CPU's own dumps (text and proto), its HLO lowered for
    TPU, its StableHLO text, and the ``lowered_sites`` of the same lowering."""
    found: dict = {}
    for mode in ("explicit", "auto"):
        out = tmp_path_factory.mktemp(mode)
        step = build_step(StepConfig(mode=mode, emb=128))
        lowered = step.lower()
        dumps = {
            "xla_dump_to": str(out),
            "xla_dump_hlo_as_text": True,
            "xla_dump_hlo_as_proto": True,
        }
        lowered.compile(compiler_options=dumps)
        with jax.set_mesh(step.mesh):
            tpu = step.function.trace(*step.args).lower(lowering_platforms=("tpu",))
        (out / "tpu.hlo.txt").write_text(tpu.as_text(dialect="hlo", debug_info=True))
        (out / "step.mlir").write_text(lowered.as_text())
        found[mode] = {
            "dump": next(out.glob("module_*.before_optimizations.txt")),
            "proto": next(out.glob("module_*.before_optimizations.hlo.pb")),
            "after": next(out.glob("module_*after_optimizations.txt")),
            "tpu": out / "tpu.hlo.txt",
            "mlir": out / "step.mlir",
            "sites": lowered_sites(lowered),
            "outputs": output_names(lowered),
        }
    return found


def check(capsys, *argv: str) -> tuple[int, str, str]:
    """``find-barriers ARGV`` in this process: its exit status, stdout and stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize(("mode", "status"), [("explicit", 1), ("auto", 0)])
@pytest.mark.parametrize("kind", ["dump", "tpu"])
def test_a_dump_exits_1_with_a_blocked_fold_and_0_without(files, capsys, mode, status, kind):
    code, out, err = check(capsys, "--verbose", files[mode][kind])
    assert (code, err) == (status, "")
    header, line, *details, total = out.splitlines()
    counts = (
        f"1 transpose-of-dot site: {status} blocked{' (1 new)' * status}, {1 - status} foldable"
    )
    cost = r"; estimated cost \d[\d.]* [kMG]?B a step" if status else ""
    summary = re.escape(f"{counts}, 0 kept") + cost
    assert re.fullmatch(f".*: {summary}", header)
    assert re.fullmatch(f"1 module: {summary}", total)
    between = "-> Sharding ->" if status else "->"
    assert line.startswith(
        "  FB001 blocked   snippets/lm_head.py:" if status else "        foldable  snippets/"
    )
    assert line.endswith(
        f"weight gradient of {PARAMETER}  dot f32[256,128] {between} transpose f32[128,256]"
    )
    assert len(details) == 2 * status  # a blocked site: its bytes and caller, then its rule's fix
    assert all(
        d.startswith("FB001 fix: produce this weight gradient in the kernel's own order")
        for d in details[1:]
    )


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mode", ["explicit", "auto"])
@pytest.mark.parametrize("kind", ["dump", "tpu"])
def test_a_file_lists_the_same_sites_as_lowered_sites(files, mode, kind):
    (read,) = find_sites(read_module(str(files[mode][kind])))
    (lowered,) = files[mode]["sites"]
    shown = ("dot_shape", "shape", "between", "verdict", "op_name", "trips", "user_line")
    assert [getattr(read, key) for key in shown] == [getattr(lowered, key) for key in shown]
    assert files[mode]["outputs"][read.output] == lowered.output == "head.kernel"


@pytest.mark.needs_devices(4)
def test_json_gives_the_same_sites_as_records(files, capsys):
    code, out, _ = check(
        capsys, "--format", "json", files["explicit"]["dump"], files["auto"]["dump"]
    )
    document = json.loads(out)
    schema = importlib.resources.files("find_barriers").joinpath("find_barriers.schema.json")
    jsonschema.validate(document, json.loads(schema.read_text()))
    explicit, auto = document["modules"]
    assert code == document["exit_status"] == 1  # one blocked fold among the files is enough
    assert (explicit["counts"]["blocked"], auto["counts"]["blocked"]) == (1, 0)
    (site,) = explicit["sites"]
    assert (site["verdict"], site["rule"], site["output"], site["trips"]) == (
        "blocked",
        "FB001",
        2,
        1,
    )
    assert (site["parameter"], site["placed_by"], site["status"]) == (PARAMETER, "explicit", "new")
    assert site["user_line"].startswith("snippets/lm_head.py:")


BAD_FILES = {
    "after_optimizations": ("after", ["already optimised", "before_optimizations.txt"]),
    "its proto": ("proto", ["binary", ".pb", "--xla_dump_hlo_as_text"]),
    "StableHLO text": ("mlir", ["StableHLO/MLIR text", 'as_text(dialect="hlo")']),
}


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("case", BAD_FILES)
def test_the_other_files_of_a_dump_are_refused_by_name(files, capsys, case):
    kind, words = BAD_FILES[case]
    code, out, err = check(capsys, files["explicit"]["dump"], files["explicit"][kind])
    assert (code, out, err.count("\n"), err[:7]) == (2, "", 1, "error: ")
    assert all(word in err for word in words)


@pytest.mark.needs_devices(4)
def test_a_compiled_modules_text_is_refused(files, capsys, tmp_path):
    compiled = tmp_path / "compiled.txt"
    compiled.write_text(files["explicit"]["after"].read_text())
    code, _, err = check(capsys, compiled)
    assert (code, "a compiled (scheduled) module" in err) == (2, True)


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_the_installed_command_and_python_dash_m_agree(files, mode):
    dump = str(files[mode]["dump"])
    commands = [
        [sys.executable, "-m", "find_barriers", dump],
        [str(Path(sys.executable).with_name("find-barriers")), dump],
    ]
    results = [
        subprocess.run(c, capture_output=True, text=True, check=False, cwd=ROOT) for c in commands
    ]
    answers = {(r.returncode, r.stdout, r.stderr) for r in results}
    assert len(answers) == 1, results
    assert answers.pop()[0] == (1 if mode == "explicit" else 0)
