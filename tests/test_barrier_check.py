"""The HLO-file check (find-barriers): real dumps, exit statuses, bad input, and no JAX."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import jsonschema
import pytest

from find_barriers.sites import find_sites
from snippets.hlo import check as barrier_check
from snippets.hlo.lowered import lowered_sites, output_names
from snippets.lowering import StepConfig, build_step

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "snippets" / "hlo" / "find_barriers.schema.json"
PARAMETER = "model.head.kernel.value"
"""How XLA's dump of the guides' step names the head's kernel (its ``op_name``)."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The guides' step in each mode: XLA:CPU's own dumps (text and proto), its HLO lowered for
    TPU, its StableHLO text, and the ``lowered_sites`` of the same lowering."""
    found: dict = {}
    for mode in ("explicit", "auto"):
        out = tmp_path_factory.mktemp(mode)
        step = build_step(StepConfig(mode=mode))
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


def check(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """``find-barriers ARGV`` in this process: its exit status, stdout and stderr."""
    try:
        barrier_check.main(list(argv))
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize(("mode", "status"), [("explicit", 1), ("auto", 0)])
@pytest.mark.parametrize("kind", ["dump", "tpu"])
def test_a_dump_exits_1_with_a_blocked_fold_and_0_without(files, capsys, mode, status, kind):
    code, out, err = check(capsys, str(files[mode][kind]))
    assert (code, err) == (status, "")
    header, line, *fix = out.splitlines()
    verdicts = f"{status} blocked, {1 - status} foldable, 0 kept"
    assert header.endswith(f": 1 transpose-of-dot site: {verdicts}")
    between = "-> Sharding ->" if status else "->"
    assert line.startswith(
        "  blocked   snippets/lm_head.py:" if status else "  foldable  snippets/"
    )
    assert line.endswith(
        f"weight gradient of {PARAMETER}  dot f32[256,64] {between} transpose f32[64,256]"
    )
    assert len(fix) == status  # a blocked site says what put the call there and the fix
    assert all(
        "explicit mesh's type; fix: write this weight gradient in kernel order" in f for f in fix
    )


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mode", ["explicit", "auto"])
@pytest.mark.parametrize("kind", ["dump", "tpu"])
def test_a_file_lists_the_same_sites_as_find_barriers(files, mode, kind):
    from_file = find_sites(barrier_check.read_file(str(files[mode][kind])))
    from_lowered = files[mode]["sites"]
    assert len(from_file) == len(from_lowered) == 1
    for read, lowered in zip(from_file, from_lowered, strict=True):
        shown = ("dot_shape", "shape", "between", "kind", "op_name", "trips")
        assert [getattr(read, key) for key in shown] == [getattr(lowered, key) for key in shown]
        assert files[mode]["outputs"][read.output] == lowered.output == "head.kernel"
        assert read.source == lowered.source


@pytest.mark.needs_devices(4)
def test_json_gives_the_same_sites_as_records(files, capsys):
    code, out, _ = check(
        capsys, "--json", str(files["explicit"]["dump"]), str(files["auto"]["dump"])
    )
    document = json.loads(out)
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))
    explicit, auto = document["modules"]
    assert code == document["exit_status"] == 1  # one blocked fold among the files is enough
    assert (explicit["counts"]["blocked"], auto["counts"]["blocked"]) == (1, 0)
    assert document["total"] == {"blocked": 1, "foldable": 1, "kept": 0, "new_blocked": 1}
    (site,) = explicit["sites"]
    assert site["between"] == ["Sharding"]
    assert (site["verdict"], site["output"], site["trips"]) == ("blocked", 2, 1)
    assert (site["parameter"], site["placed_by"], site["no_fold"]) == (PARAMETER, "explicit", None)
    assert site["user_line"].startswith("snippets/lm_head.py:")


ALL_REDUCE_BETWEEN = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  p = f32[2,4]{1,0} parameter(0)
  d = f32[4,4]{1,0} dot(p, p), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  r = f32[4,4]{1,0} all-reduce(d), replica_groups={{0,1}}, to_apply=add
  t = f32[4,4]{0,1} transpose(r), dimensions={1,0}
  u = f32[4,4]{0,1} transpose(d), dimensions={1,0}
  ROOT o = (f32[4,4]{0,1}, f32[4,4]{0,1}) tuple(t, u)
}
"""


def test_an_all_reduce_between_is_kept_not_blocked(tmp_path, capsys):
    """An all-reduce between stops the fold too, but no Sharding call does: kept, exit 0."""
    (tmp_path / "step.hlo.txt").write_text(ALL_REDUCE_BETWEEN)
    code, out, _ = check(capsys, "--json", str(tmp_path / "step.hlo.txt"))
    (module,) = json.loads(out)["modules"]
    assert (code, module["counts"]["blocked"]) == (0, 0)
    found = {tuple(site["between"]): (site["verdict"], site["blocked"]) for site in module["sites"]}
    assert found == {("all-reduce",): ("kept", False), (): ("kept", False)}
    reduced = next(site for site in module["sites"] if site["between"])
    assert "all-reduce" in reduced["no_fold"]


def write(tmp_path: Path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return str(path)


def cut_mid_line(text: str) -> str:
    """``text`` cut in the middle of its first dot's operand list."""
    return text[: text.index(" dot(") + 8]


def cut_after_line(text: str) -> str:
    """``text`` cut after the line of its first dot."""
    return text[: text.index("\n", text.index(" dot(")) + 1]


NO_TUPLE_INDEX = """HloModule m

ENTRY %main (a: f32[2,4], b: f32[4,8]) -> f32[8,2] {
  %a = f32[2,4]{1,0} parameter(0)
  %b = f32[4,8]{1,0} parameter(1)
  %tup = (f32[2,4]{1,0}, f32[4,8]{1,0}) tuple(f32[2,4]{1,0} %a, f32[4,8]{1,0} %b)
  %g = f32[2,4]{1,0} get-tuple-element((f32[2,4]{1,0}, f32[4,8]{1,0}) %tup)
  %d = f32[2,8]{1,0} dot(f32[2,4]{1,0} %g, f32[4,8]{1,0} %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = f32[8,2]{1,0} transpose(f32[2,8]{1,0} %d), dimensions={1,0}
}
"""
"""A module whose get-tuple-element lost its ``index=``: an edited file, not one XLA writes."""

BAD_INPUT = {
    "missing path": (lambda files, tmp: str(tmp / "nothing.txt"), ["no such file"]),
    "directory without a module": (
        lambda files, tmp: str(tmp),
        ["no *.before_optimizations.txt module in it", "--xla_dump_to=DIR"],
    ),
    "after_optimizations file": (
        lambda files, tmp: str(files["explicit"]["after"]),
        ["already optimised", "pass ", ".before_optimizations.txt"],
    ),
    "compiled module's text": (
        lambda files, tmp: write(tmp, "compiled.txt", files["explicit"]["after"].read_text()),
        ["a compiled (scheduled) module", "before_optimizations.txt"],
    ),
    "empty file": (
        lambda files, tmp: write(tmp, "empty.txt", ""),
        ["the file is empty", "HLO text"],
    ),
    "binary proto dump": (
        lambda files, tmp: str(files["explicit"]["proto"]),
        ["binary", ".pb", "--xla_dump_hlo_as_text"],
    ),
    "StableHLO text": (
        lambda files, tmp: str(files["explicit"]["mlir"]),
        ["StableHLO/MLIR text", "xla_dump_to", 'as_text(dialect="hlo")'],
    ),
    "cut off mid-instruction": (
        lambda files, tmp: write(
            tmp, "cut.txt", cut_mid_line(files["explicit"]["dump"].read_text())
        ),
        ["not a whole instruction", "cut off"],
    ),
    "cut off after a line": (
        lambda files, tmp: write(
            tmp, "cut.txt", cut_after_line(files["explicit"]["dump"].read_text())
        ),
        ["cut off", "ends inside a computation"],
    ),
    "no ENTRY": (
        lambda files, tmp: write(
            tmp, "no_entry.txt", files["explicit"]["dump"].read_text().replace("ENTRY ", "")
        ),
        ["no ENTRY computation"],
    ),
    "a tuple read without its index": (
        lambda files, tmp: write(tmp, "no_index.txt", NO_TUPLE_INDEX),
        ["get-tuple-element g", "no index="],
    ),
    "not HLO at all": (
        lambda files, tmp: write(tmp, "notes.txt", "dot then transpose\n"),
        ["no HLO instruction"],
    ),
}


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_is_one_error_line_and_exit_2(files, one_error_line, tmp_path, case):
    make, words = BAD_INPUT[case]
    good = str(files["explicit"]["dump"])  # a good file first: no output
    line = one_error_line(barrier_check.main, [good, str(make(files, tmp_path))])
    for word in words:
        assert word in line


def test_a_module_without_a_dot_is_valid(capsys, tmp_path):
    text = jax.jit(jnp.sin).lower(jnp.ones(3)).as_text(dialect="hlo")
    assert check(capsys, write(tmp_path, "sin.txt", text)) == (
        0,
        f"{tmp_path / 'sin.txt'}: 0 transpose-of-dot sites: 0 blocked, 0 foldable, 0 kept\n",
        "",
    )


def console_script() -> list[str]:
    """The ``find-barriers`` that ``pyproject.toml`` declares, as a command for this Python."""
    target = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = target["find-barriers"].split(":")
    return [
        sys.executable,
        "-c",
        f"import sys; from {module} import {function}; sys.exit({function}())",
    ]


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_the_console_script_and_python_dash_m_give_the_same_output_and_status(files, mode):
    dump = str(files[mode]["dump"])
    commands = {
        "console script": [*console_script(), dump],
        "python -m snippets find-barriers": [
            sys.executable,
            "-m",
            "snippets",
            "find-barriers",
            dump,
        ],
    }
    installed = Path(sys.executable).parent / "find-barriers"
    if installed.exists():  # after `uv sync` has installed the project's scripts
        commands["installed find-barriers"] = [str(installed), dump]
    results = {
        name: subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
        for name, command in commands.items()
    }
    answers = {(r.returncode, r.stdout, r.stderr) for r in results.values()}
    assert len(answers) == 1, results
    assert answers.pop()[0] == (1 if mode == "explicit" else 0)


def test_bad_input_from_the_command_line_has_no_traceback(tmp_path):
    result = subprocess.run(
        [*console_script(), str(tmp_path / "missing.txt")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error: {tmp_path / 'missing.txt'}: no such file\n"
