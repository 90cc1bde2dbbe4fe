"""Every CLI answers bad input with one ``error:`` line on stderr and exit status 2."""

import json
import socket
import subprocess
import sys

import pytest
from pydantic import ValidationError

from snippets.__main__ import COMMANDS
from snippets.lm_head import LMHeadConfig
from snippets.measure import (
    barrier,
    bench,
    device_report,
    head_orientation,
    modes,
    multihost,
    reduce_scatter,
    step_lowering,
    training_step_run,
    version_check,
)
from snippets.support import cli
from snippets.support.cli import check_memory, one_line

HUGE = "1000000000"


@pytest.mark.parametrize(
    ("main", "argv", "words"),
    [
        (device_report.main, ["--devices", "0"], ["argument --devices", "at least 1", "'0'"]),
        (device_report.main, ["--devices", "-2"], ["argument --devices", "at least 1", "'-2'"]),
        (
            device_report.main,
            ["--devices", "four"],
            ["argument --devices", "whole number", "'four'"],
        ),
        (
            device_report.main,
            ["--devices", HUGE],
            [f"{HUGE} simulated CPU devices", "ask for at most"],
        ),
        (reduce_scatter.main, ["--ranks", "0"], ["argument --ranks", "at least 1"]),
        (reduce_scatter.main, ["--ranks", "-2"], ["argument --ranks", "at least 1", "'-2'"]),
        (reduce_scatter.main, ["--ranks", HUGE], [f"--ranks {HUGE} needs about", "use at most"]),
        (barrier.main, ["--batch", "0"], ["argument --batch", "at least 1", "'0'"]),
        (barrier.main, ["--seq", "0"], ["argument --seq", "at least 1", "'0'"]),
        (barrier.main, ["--emb", "0"], ["argument --emb", "at least 1", "'0'"]),
        (barrier.main, ["--devices", "0"], ["argument --devices", "at least 1"]),
        (barrier.main, ["--devices", "3"], ["batch 8 does not divide over the 3 devices"]),
        (
            barrier.main,
            ["--mesh", "dp_fsdp", "--devices", "3", "--batch", "9"],
            ["mesh 'dp_fsdp'", "needs an even device count, got 3"],
        ),
        (
            barrier.main,
            ["--mesh", "dp_fsdp", "--emb", "63"],
            ["emb 63 does not divide over the fsdp axis of size 2"],
        ),
        (barrier.main, ["--mesh", "tp"], ["argument --mesh", "invalid choice: 'tp'"]),
        (barrier.main, ["--vocab", HUGE], [f"--vocab {HUGE}", "GiB of memory is available"]),
        (training_step_run.main, ["--layers", "0"], ["argument --layers", "at least 1", "'0'"]),
        (training_step_run.main, ["--layers", "x"], ["argument --layers", "whole number", "'x'"]),
        (head_orientation.main, ["--emb", "0"], ["argument --emb", "at least 1", "'0'"]),
        (head_orientation.main, ["--vocab", "-4"], ["argument --vocab", "at least 1", "'-4'"]),
        (head_orientation.main, ["--tokens", "0"], ["argument --tokens", "at least 1", "'0'"]),
        (
            head_orientation.main,
            ["--emb", HUGE, "--vocab", HUGE],
            ["needs about", "choose smaller sizes"],
        ),
        (step_lowering.main, ["--dtype", "int8"], ["argument --dtype", "invalid choice: 'int8'"]),
        (step_lowering.main, ["--variant", "EVV"], ["argument --variant", "invalid choice: 'EVV'"]),
        (step_lowering.main, ["--batch", "6"], ["batch 6 does not divide over the 4 devices"]),
        (step_lowering.main, ["--show", "hlo", "--json"], ["--show prints", "drop --json"]),
        (
            step_lowering.main,
            ["--variant", "vocab-parallel"],
            ["variant 'vocab-parallel' shards the head on the fsdp axis", "mesh 'dp' has none"],
        ),
        (
            step_lowering.main,
            ["--variant", "vocab-parallel", "--mesh", "fsdp", "--vocab", "258"],
            ["vocab 258 does not divide over the fsdp axis of size 4"],
        ),
        (
            barrier.main,
            ["--mesh", "fsdp", "--emb", "66"],
            ["emb 66 does not divide over the fsdp axis of size 4"],
        ),
        (bench.main, ["--devices", "3"], ["batch 8 does not divide over the 3 devices"]),
        (bench.main, ["--devices", "0"], ["argument --devices", "at least 1"]),
        (multihost.main, ["--processes", "0"], ["argument --processes", "at least 1", "'0'"]),
        (multihost.main, ["--processes", "3"], ["3 processes x 2 local devices = 6"]),
        (multihost.main, ["--local-devices", "x"], ["argument --local-devices", "whole number"]),
        (multihost.main, ["--timeout", "0"], ["argument --timeout", "at least 1"]),
        (multihost.main, ["--port", "70000"], ["argument --port", "from 1 to 65535", "'70000'"]),
        (version_check.main, ["--jsn"], ["unrecognized arguments: --jsn"]),
        (modes.main, ["--jsn"], ["unrecognized arguments: --jsn"]),
        (modes.main, ["--check", "nope"], ["argument --check", "invalid choice: 'nope'"]),
        (modes.main, ["--check"], ["argument --check: expected one argument"]),
    ],
    ids=lambda value: value.__module__ if callable(value) else " ".join(value),
)
def test_bad_input_is_one_error_line(main, argv, words, one_error_line):
    line = one_error_line(main, argv)
    for word in words:
        assert word in line


def test_too_few_devices_is_one_error_line(device_count, one_error_line):
    line = one_error_line(device_report.main, ["--devices", str(device_count + 1)])
    assert f"{device_count + 1} devices are needed" in line


def test_a_busy_coordinator_port_is_one_error_line(one_error_line):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        line = one_error_line(multihost.main, ["--port", str(port)])
    assert line.startswith(f"error: coordinator port {port} on 127.0.0.1 is in use")


def test_debug_shows_the_error_itself():
    with pytest.raises(ValueError, match="batch 8 does not divide over the 3 devices"):
        barrier.main(["--devices", "3", "--debug"])


def test_one_rank_has_nothing_to_exchange(capsys):
    reduce_scatter.main(["--ranks", "1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["transfers"] == []
    assert report["bytes_total"] == 0
    assert report["bytes_per_rank"] == {"reduce_scatter": 0, "all_gather": 0}
    assert report["hlo_bytes_per_rank"] == {"reduce_scatter": 0, "all_gather": 0, "all_reduce": 0}
    assert report["reference_equal"]


def test_lowering_has_a_help_and_a_report(capsys):
    with pytest.raises(SystemExit) as exit_info:
        step_lowering.main(["--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith("usage:")
    assert "--show {stablehlo,hlo,compiled}" in help_text
    step_lowering.main(["--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["config"]["devices"] == 4
    assert report["mesh_shape"] == [4]
    assert all(lines > 0 for lines in report["program_lines"].values())


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["snippets", "device_report", "--devices", HUGE],
            ["simulated CPU devices", "ask for at most"],
        ),
        (["snippets", "version_check", "--jsn"], ["unrecognized arguments: --jsn"]),
        (["snippets", "modes", "--check", "nope"], ["argument --check", "invalid choice: 'nope'"]),
        (["snippets", "barriers"], ["no command 'barriers'", "choose one of device_report,"]),
    ],
    ids=lambda argv: " ".join(argv[:2]) if isinstance(argv, list) else None,
)
def test_python_dash_m_prints_one_line_and_no_traceback(argv, words):
    """The in-process tests above, through a real ``python -m`` (a usage error and a reported one)."""
    result = subprocess.run(
        [sys.executable, "-m", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ")
    for word in words:
        assert word in line


def test_a_pydantic_error_becomes_one_line_per_field():
    with pytest.raises(ValidationError) as error:
        LMHeadConfig(emb_dim=True, vocab_size=-1)
    assert one_line(error.value) == (
        "emb_dim: Input should be a valid integer (got True); "
        "vocab_size: Input should be greater than or equal to 1 (got -1)"
    )


def test_a_module_without_a_command_line_does_nothing_when_run():
    """Python's convention: no ``__main__`` block, so ``python -m`` runs nothing and prints nothing."""
    result = subprocess.run(
        [sys.executable, "-m", "snippets.hlo.counts"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_python_dash_m_snippets_alone_lists_every_command():
    result = subprocess.run(
        [sys.executable, "-m", "snippets"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stderr) == (0, "")
    listed = [line.split()[0] for line in result.stdout.splitlines()[2:]]
    assert listed == list(COMMANDS)


def test_a_closed_pipe_ends_the_run_quietly():
    """As ``python -m snippets device_report --json | head -c 0``: the reader is gone before the output.

    ``python -m snippets`` runs every command through :func:`~snippets.support.cli.run_module`;
    this command is the quickest to print."""
    with subprocess.Popen(
        [sys.executable, "-m", "snippets", "device_report", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        process.stdout.close()
        stderr = process.stderr.read()
    assert stderr == ""
    assert process.returncode == 1


def test_memory_is_refused_from_one_byte_more_than_is_free(monkeypatch):
    monkeypatch.setattr(cli, "available_memory", lambda: 1000)
    check_memory(1000, "a step")  # fits exactly
    with pytest.raises(
        ValueError, match=r"^a step needs about .* GiB but .* GiB .*; choose smaller"
    ):
        check_memory(1001, "a step")
