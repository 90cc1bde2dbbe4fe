"""The command line's contract, as ruff's: exit status 0 (nothing new), 1 (new blocked sites) or
2 (any error, one ``error:`` line), and its options."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from hlo_texts import NO_TUPLE_INDEX

import find_barriers
from conftest import MODEL, PROJECTION_LINES, SHARED_DOT_LINE, THREE_LAYER_LINES
from find_barriers import __main__ as entry
from find_barriers._cli import main
from find_barriers._rules import RULES


def dump_directory(data, tmp_path, *names: str):
    """A directory laid out as XLA's dump: each fixture as module ``jit_train_step``."""
    for number, name in enumerate(names):
        target = tmp_path / f"module_{number:04}.jit_train_step.before_optimizations.txt"
        shutil.copy(data / name, target)
    shutil.copy(
        data / names[0], tmp_path / "module_0000.jit_train_step.cpu_after_optimizations.txt"
    )
    return tmp_path


def test_the_version_is_the_distributions(run):
    assert run("--version") == (0, f"find-barriers {find_barriers.__version__}\n", "")


def test_help_gives_the_exit_codes_the_rules_and_an_example(run):
    status, out, _ = run("--help")
    assert status == 0
    for words in (
        "exit status:",
        "0    no new blocked site",
        "1    new blocked sites",
        "2    an error",
    ):
        assert words in out
    assert all(f"  {code}  {rule.name}: " in out for code, rule in RULES.items())
    assert "example:\n  XLA_FLAGS=" in out
    assert "find-barriers dump --module jit_train_step" in out


def test_a_blocked_fold_exits_1_and_exit_zero_keeps_the_report(data, run):
    status, out, err = run(data / "three_layers.hlo.txt")
    assert (status, err) == (1, "")
    assert (out.count("FB001 blocked"), "3 blocked (3 new), 0 foldable, 0 kept" in out) == (3, True)
    assert run(data / "three_layers.hlo.txt", "--exit-zero") == (0, out, "")


def test_success_is_one_line_and_verbose_lists_every_site(data, run):
    status, out, _ = run(data / "scanned_fixed.hlo.txt")
    assert (status, out) == (
        0,
        "1 module: 3 transpose-of-dot sites: 0 blocked, 3 foldable, 0 kept\n",
    )
    status, out, _ = run(data / "scanned_fixed.hlo.txt", "--verbose")
    assert (status, out.count("foldable  "), out.splitlines()[-1]) == (
        0,
        3,
        "1 module: 3 transpose-of-dot sites: 0 blocked, 3 foldable, 0 kept",
    )


def test_quiet_prints_the_findings_one_a_line_as_ruff_does(data, run):
    status, out, _ = run(data / "three_layers.hlo.txt", "--quiet")
    lines = out.splitlines()
    assert (status, len(lines)) == (1, 3)
    assert lines[0].startswith(f"{MODEL}:{THREE_LAYER_LINES[0]}: FB001 ")
    assert lines[0].endswith(f"(via {MODEL}:{SHARED_DOT_LINE})")
    assert run(data / "scanned_fixed.hlo.txt", "--quiet") == (0, "", "")
    assert run(data / "three_layers.hlo.txt", "-q") == (status, out, "")


def test_ignored_rules_are_not_findings(data, run):
    assert run(data / "constrained.hlo.txt")[0] == 1
    status, out, _ = run(data / "constrained.hlo.txt", "--ignore", "fb002,FB003", "-v")
    assert (status, out.count("ignored   ")) == (0, 2)
    assert run(data / "three_layers.hlo.txt", "--ignore", "FB002", "--ignore", "FB003")[0] == 1


def test_sites_are_listed_by_estimated_cost_with_a_total(data, run):
    """nnx's tied table costs nothing (§4.6: FB005, below the default --min-bytes 1); each MLP
    kernel, adam's in and out, 6 copies. The total counts every site not ignored."""
    _, out, _ = run(data / "nnx_tied_tree.hlo.txt", "--verbose")
    costs = [line.strip().split(";")[0] for line in out.splitlines() if line.startswith(" " * 16)]
    assert costs == [
        "estimated 64.5 kB a step: 6 relayout copies (§4.3)",
        "estimated 64.5 kB a step: 6 relayout copies (§4.3)",
        "no cost by the estimate: its gradient is summed with another gradient first (§4.6)",
    ]  # the costliest first
    assert out.splitlines()[-1].endswith(
        "3 blocked (2 new, 1 below), 0 foldable, 0 kept; estimated cost 129.0 kB a step"
    )


def test_min_bytes_decides_which_costs_fail(data, run):
    assert run(data / "scanned.hlo.txt")[0] == 0  # by default (1) no cost passes: in a loop
    assert run(data / "scanned.hlo.txt", "--min-bytes", "1")[0] == 0
    assert run(data / "scanned.hlo.txt", "--min-bytes", "0")[0] == 1  # 0: every one fails
    assert run(data / "three_layers.hlo.txt")[0] == 1  # any cost fails by default
    assert run(data / "three_layers.hlo.txt", "--min-bytes", "16384")[0] == 1  # 16,384 each
    assert run(data / "three_layers.hlo.txt", "--min-bytes", "16385")[0] == 0
    _, out, _ = run(data / "scanned.hlo.txt")
    assert "3 blocked (3 below)" in out.splitlines()[-1]
    _, out, _ = run(data / "scanned.hlo.txt", "--min-bytes", "0")
    assert "3 blocked (3 new)" in out.splitlines()[-1]


def test_a_module_whose_only_blocked_sites_cost_nothing_exits_0_unless_min_bytes_is_0(data, run):
    """The scan's three weight gradients are stacked in its loop: FB005, listed as below, and
    the run passes; under ``--min-bytes 0`` they are new and fail it."""
    path = data / "scanned.hlo.txt"
    status, out, err = run(path)
    assert (status, err) == (0, "")
    assert out.startswith(f"{path}: blocked sites: 0 new, 3 below\n")
    assert (out.count("  FB005 below   "), out.count("FB001")) == (3, 0)
    assert "FB005 fix: " in out
    assert "3 transpose-of-dot sites: 3 blocked (3 below), 0 foldable" in out.splitlines()[-1]
    assert run(path, "--quiet") == (0, "", "")
    status, out, _ = run(path, "--min-bytes", "0")
    assert (status, out.count("  FB005 blocked ")) == (1, 3)
    assert out.startswith(f"{path}: blocked sites: 3 new, 0 below\n")


def test_ignoring_fb005_hides_the_sites_of_no_cost_and_no_others(data, run):
    """``--ignore FB005``: the scan's sites are ignored, failing not even at ``--min-bytes 0``
    and listed only under ``--verbose``; the tied table's projections (FB001) still fail."""
    scanned = data / "scanned.hlo.txt"
    assert run(scanned, "--ignore", "FB005", "--min-bytes", "0") == (
        0,
        "1 module: 3 transpose-of-dot sites: 3 blocked (3 ignored), 0 foldable, 0 kept\n",
        "",
    )
    status, out, _ = run(scanned, "--ignore", "fb005", "--min-bytes", "0", "--verbose")
    assert (status, out.count("  FB005 ignored ")) == (0, 3)
    status, out, _ = run(data / "nnx_tied.hlo.txt", "--ignore", "FB005", "--min-bytes", "0", "-q")
    assert (status, [line.split(": ")[1].split()[0] for line in out.splitlines()]) == (
        1,
        ["FB001", "FB001"],
    )


def test_a_constraint_names_its_own_line(data, run):
    _, out, _ = run(data / "constrained.hlo.txt")
    assert f"FB002 blocked   {MODEL}:{PROJECTION_LINES[0]}  forward" in out
    assert f"from your with_sharding_constraint at {MODEL}:{PROJECTION_LINES[0]}" in out
    assert "fix: move the constraint after the transpose" in out


def test_module_matches_xlas_module_name(data, run, tmp_path):
    directory = dump_directory(data, tmp_path, "three_layers.hlo.txt", "scanned_fixed.hlo.txt")
    status, out, _ = run(directory, "--module", "jit_train_step$")
    assert (status, out.count("before_optimizations.txt: ")) == (1, 1)  # one has findings
    assert out.splitlines()[-1].startswith("2 modules: 6 transpose-of-dot sites")
    assert run(data / "constrained.hlo.txt", "--module", "jit_train_step$")[0] == 1  # a file too


def write(tmp_path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def cut_off(path) -> str:
    """A module's text cut off inside its entry computation, mid-line."""
    text = path.read_text()
    return text[: text.rindex("ROOT") + 12]


BAD = {
    "no such file": (lambda d, t: [t / "nowhere.txt"], "nowhere.txt: no such file"),
    "an empty file": (lambda d, t: [write(t, "e.txt", "")], "the file is empty"),
    "a binary file": (lambda d, t: [write(t, "b.pb", b"\x08\x00\x12")], "a binary file"),
    "a file not UTF-8": (lambda d, t: [write(t, "l.txt", b"HloModule \xff\n")], "a binary file"),
    "StableHLO text": (
        lambda d, t: [write(t, "m.mlir", "module @jit_f {\n  func.func public @main() {\n")],
        "StableHLO/MLIR text, not HLO",
    ),
    "a compiled module": (
        lambda d, t: [write(t, "c.txt", "HloModule m, is_scheduled=true\nENTRY e {\n}\n")],
        "a compiled (scheduled) module",
    ),
    "a parameter with no number": (
        lambda d, t: [
            write(t, "p.txt", "HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter()\n}\n")
        ],
        "line 3: a parameter with no number",
    ),
    "a cut-off module": (
        lambda d, t: [write(t, "cut.txt", cut_off(d / "constrained.hlo.txt"))],
        "cut off",
    ),
    "a later dump": (
        lambda d, t: [
            dump_directory(d, t, "constrained.hlo.txt")
            / "module_0000.jit_train_step.cpu_after_optimizations.txt"
        ],
        "already optimised; pass",
    ),
    "--module matching nothing": (
        lambda d, t: [dump_directory(d, t, "constrained.hlo.txt"), "--module", "eval_step"],
        "whose name matches 'eval_step'",
    ),
    "--module not a regular expression": (
        lambda d, t: [dump_directory(d, t, "constrained.hlo.txt"), "--module", "("],
        "--module '(' is not a regular expression",
    ),
    "a directory without a module": (
        lambda d, t: [t],
        "no *.before_optimizations.txt module in it",
    ),
    "a directory without a module, with --module": (
        lambda d, t: [t, "--module", "jit_train_step"],
        "no *.before_optimizations.txt module in it",  # not: none whose name matches
    ),
    "a module cut off after a line": (
        lambda d, t: [write(t, "cut.txt", cut_off(d / "constrained.hlo.txt").rpartition("\n")[0])],
        "cut off, it ends inside a computation",
    ),
    "no ENTRY computation": (
        lambda d, t: [
            write(t, "e.txt", (d / "constrained.hlo.txt").read_text().replace("ENTRY ", ""))
        ],
        "no ENTRY computation",
    ),
    "a tuple read without its index": (
        lambda d, t: [write(t, "i.txt", NO_TUPLE_INDEX)],
        "names no index=: is the file edited?",
    ),
    "not HLO at all": (
        lambda d, t: [write(t, "notes.txt", "dot then transpose\n")],
        "no HLO instruction",
    ),
    "an unknown rule": (
        lambda d, t: [d / "constrained.hlo.txt", "--ignore", "FB009"],
        "FB009: no such rule",
    ),
    "--min-bytes not a number": (
        lambda d, t: [d / "constrained.hlo.txt", "--min-bytes", "1MB"],
        "argument --min-bytes: '1MB' is not a whole number of bytes",
    ),
    "an unknown format": (
        lambda d, t: [d / "constrained.hlo.txt", "--format", "xml"],
        "argument --format",
    ),
    "a missing baseline": (
        lambda d, t: [d / "constrained.hlo.txt", "--baseline", t / "b.json"],
        "no such baseline file; write one with --write-baseline",
    ),
    "a baseline that is not JSON": (
        lambda d, t: [d / "constrained.hlo.txt", "--baseline", write(t, "b.json", "{")],
        "not a baseline (not JSON",
    ),
    "a baseline of the first format": (
        lambda d, t: [
            d / "constrained.hlo.txt",
            "--baseline",
            write(t, "b.json", '{"format": "find-barriers-baseline/1", "sites": []}'),
        ],
        "(it is find-barriers-baseline/1: write it again)",
    ),
    "a baseline of the second format": (
        lambda d, t: [
            d / "constrained.hlo.txt",
            "--baseline",
            write(t, "b.json", '{"format": "find-barriers-baseline/2", "sites": []}'),
        ],
        "(it is find-barriers-baseline/2: write it again); use --write-baseline",
    ),
    "a baseline whose sites are not entries": (
        lambda d, t: [
            d / "constrained.hlo.txt",
            "--baseline",
            write(t, "b.json", '{"format": "find-barriers-baseline/3", "sites": [1]}'),
        ],
        "its sites are not a list of entries",
    ),
    "--module matching no file's module": (
        lambda d, t: [d / "constrained.hlo.txt", "--module", "eval_step"],
        "--module 'eval_step' matches no module's name (the modules: jit_train_step)",
    ),
    "a --path-map without =": (
        lambda d, t: [d / "constrained.hlo.txt", "--path-map", "/home/user"],
        "argument --path-map: '/home/user' is not RECORDED=LOCAL",
    ),
    "a baseline in a missing folder": (
        lambda d, t: [d / "constrained.hlo.txt", "--write-baseline", t / "no" / "b.json"],
        "cannot write the baseline there",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_error_line_and_exit_2(data, run, tmp_path, case):
    arguments, words = BAD[case]
    status, out, err = run(*arguments(data, tmp_path))
    assert (status, out) == (2, "")
    assert (err[:7], err.count("\n")) == ("error: ", 1), err
    assert words in err


def test_a_crash_of_its_own_is_exit_2_and_says_to_report_it(data, run, monkeypatch):
    def broken(program, dims=None):
        raise KeyError("no such instruction")

    monkeypatch.setattr("find_barriers._check.find_sites", broken)
    status, out, err = run(data / "constrained.hlo.txt")
    assert (status, out) == (2, "")
    assert err == (
        f"error: find-barriers {find_barriers.__version__} failed (KeyError: 'no such instruction'); "
        "rerun with --debug for the traceback, and report it\n"
    )
    status, _, err = run(data / "constrained.hlo.txt", "--debug")
    assert (status, "Traceback" in err, "KeyError" in err) == (2, True, True)


def test_an_old_python_is_one_error_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(sys, "version_info", (3, 9, 18, "final", 0))
    with pytest.raises(SystemExit) as exit_info:
        entry.main(["--version"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.startswith(
        "error: find-barriers needs Python 3.10 or newer, and this is Python 3.9.18"
    )
    assert f"Python 3.9.18 ({sys.executable})" in err  # major, minor and micro: no more
    assert err.count("\n") == 1


def test_a_closed_pipe_ends_quietly_and_not_with_1(data):
    """The reader goes away before the first line: no traceback, and not the status of a finding."""
    command = [sys.executable, "-m", "find_barriers", str(data / "three_layers.hlo.txt")]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()
    with child.stderr:
        stderr = child.stderr.read()
    assert (child.wait(), stderr) == (141, b"")


class ClosedPipe:
    """Standard output whose reader went away, on a file's descriptor."""

    def __init__(self, file):
        self.file = file

    def write(self, _text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass

    def fileno(self):
        return self.file.fileno()


def test_a_reader_gone_in_process_is_status_141_and_what_is_written_later_goes_nowhere(
    data, tmp_path, monkeypatch
):
    """Standard output's descriptor is pointed at the null device, so exiting writes nothing."""
    with (tmp_path / "out").open("wb") as file:
        monkeypatch.setattr(sys, "stdout", ClosedPipe(file))
        with pytest.raises(SystemExit) as exit_info:
            main([str(data / "three_layers.hlo.txt")])
        os.write(file.fileno(), b"at exit")
    assert (exit_info.value.code, (tmp_path / "out").read_bytes()) == (141, b"")


def test_an_interrupt_is_status_130_as_a_shell_gives_it(data, run, monkeypatch):
    def interrupted(program, dims=None):
        raise KeyboardInterrupt

    monkeypatch.setattr("find_barriers._check.find_sites", interrupted)
    assert run(data / "constrained.hlo.txt")[:2] == (130, "")


def test_usage_names_the_command_as_installed_under_python_dash_m_too(run, monkeypatch):
    monkeypatch.setattr(
        sys, "argv", ["/venv/lib/python3.12/site-packages/find_barriers/__main__.py"]
    )
    status, out, _ = run("--help")
    assert (status, out.split()[:2]) == (0, ["usage:", "find-barriers"])


def test_verbose_lists_the_sites_of_each_module_a_directory_holds(data, run, tmp_path):
    """Not only modules named as files: the fixed dump's foldable sites, from its directory."""
    directory = dump_directory(data, tmp_path, "scanned_fixed.hlo.txt")
    status, out, _ = run(directory, "--verbose")
    assert (status, out.count("foldable  ")) == (0, 3)


def test_writing_a_baseline_reports_it_as_the_runs_baseline_with_every_site_accepted(
    data, run, tmp_path
):
    baseline = tmp_path / "baseline.json"
    status, out, _ = run(
        data / "three_layers.hlo.txt", "--write-baseline", baseline, "--format", "json"
    )
    document = json.loads(out)
    statuses = [site["status"] for module in document["modules"] for site in module["sites"]]
    assert (status, document["baseline"], statuses) == (0, str(baseline), ["accepted"] * 3)


def test_python_dash_m_is_the_console_script(data):
    command = [sys.executable, "-m", "find_barriers", str(data / "scanned_fixed.hlo.txt")]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert (result.returncode, result.stderr) == (0, "")
    assert "3 transpose-of-dot sites: 0 blocked, 3 foldable, 0 kept" in result.stdout


@pytest.mark.parametrize("where", ["file", "directory"])
def test_an_unreadable_input_says_permission_denied(data, run, tmp_path, monkeypatch, where):
    """As ``chmod 000`` makes it for a user who is not root (root reads it anyway)."""
    directory = dump_directory(data, tmp_path, "constrained.hlo.txt")
    method = "read_bytes" if where == "file" else "iterdir"

    def denied(self, *args):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(f"pathlib.Path.{method}", denied)
    status, out, err = run(directory)
    assert (status, out, err.count("\n"), err[:7]) == (2, "", 1, "error: ")
    assert ": permission denied; make " in err


def test_path_map_reads_a_dump_made_elsewhere_as_this_checkouts(data, run, tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.chdir(checkout)
    _, out, _ = run(data / "three_layers.hlo.txt", "--quiet")
    assert out.startswith(f"{MODEL}:")  # as recorded: outside this checkout
    mapped = run(
        data / "three_layers.hlo.txt", "--quiet", "--path-map", f"/home/user/project={checkout}"
    )
    lines = mapped[1].splitlines()
    assert [line.split(": ")[0] for line in lines] == [f"model.py:{n}" for n in THREE_LAYER_LINES]
    assert lines[0].endswith(f"(via model.py:{SHARED_DOT_LINE})")


def test_verbose_lists_a_module_without_sites_only_when_named_as_a_file_or_asked(run, tmp_path):
    """Named on the command line, a module of no sites is listed under ``--verbose``; found in a
    directory, only with ``--all-modules``."""
    text = "HloModule m\n\nENTRY main {\n  ROOT p = f32[2]{0} parameter(0)\n}\n"
    path = write(tmp_path, "module_0000.jit_m.before_optimizations.txt", text)

    def listed(*argv) -> bool:
        status, out, _ = run(*argv, "--verbose")
        assert status == 0
        return any(line.startswith(f"{path}: 0 ") for line in out.splitlines())

    assert (listed(path), listed(tmp_path), listed(tmp_path, "--all-modules")) == (
        True,
        False,
        True,
    )
