"""The LM-head step on a two-process local JAX cluster, and the cluster's process handling."""

import os
import signal
import subprocess
import sys
import time

import pytest

from snippets.cache.results import FOLDER
from snippets.measure import multihost
from snippets.measure.multihost import ROOT, Workers, compare, coordinator_port
from snippets.support.cli import SetupError

CLUSTER = [(0, 2, 2), (1, 2, 2)]
"""The jobs of a two-process cluster with two devices each."""


def gone(pid: int) -> bool:
    """Whether no process with ``pid`` exists any more."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_workers_start_in_the_repository_root():
    """Where ``python -m snippets multihost`` finds the package without an installed copy."""
    assert (ROOT / "snippets" / "__init__.py").is_file()


@pytest.fixture(scope="module")
def comparison() -> dict:
    """``compare(processes=2, local_devices=2)``, as the multihost guide runs it, computed once
    for both (:mod:`snippets.cache.results`)."""
    return compare(processes=2, local_devices=2)


def test_two_processes_see_four_global_devices(comparison):
    assert comparison["processes"] == 2
    assert comparison["global_devices"] == 4
    assert comparison["local_devices"] == 2
    assert comparison["workers_agree"]


def test_each_process_supplies_only_its_own_rows(comparison):
    assert comparison["process_rows"] == [[0, 4], [4, 8]]
    assert comparison["global_batch"] == [8, 3]
    assert comparison["batch_sums_match"]


def test_the_cluster_compiles_the_same_step_as_one_process(comparison):
    assert comparison["same_compiled_hlo"]
    assert comparison["barrier_sites"] == comparison["barrier_sites_single"]
    assert comparison["barrier_sites"] == {"explicit": 1, "auto": 0}
    assert comparison["sharding_calls"] == comparison["sharding_calls_single"]
    assert comparison["collectives"] == comparison["collectives_single"]


def test_the_cluster_computes_the_same_loss(comparison):
    for mode, loss in comparison["loss_single"].items():
        assert comparison["loss_multi"][mode] == pytest.approx(loss, rel=1e-6)


def worker_result(rows, local_devices=2, hlo="HLO", loss=1.5, sums_match=True):
    """What one worker returns (:func:`~snippets.measure.multihost.run_worker`), made up."""
    record = {"sharding_calls": 3, "collectives": ["all-reduce"], "compiled_hlo": hlo, "loss": loss}
    return {
        "global_devices": 4,
        "local_devices": local_devices,
        "local_batch": {"rows": rows, "global_shape": [8, 3], "sums_match": sums_match},
        "records": {
            "explicit": record | {"barrier_sites": 1},
            "auto": record | {"barrier_sites": 0},
        },
    }


class Finished:
    """Workers that have run: ``run`` gives back the results they were made with."""

    def __init__(self, results):
        self.results = results

    def run(self, timeout):
        return self.results


@pytest.mark.parametrize("agree", [True, False])
def test_compare_tells_a_cluster_that_agrees_from_one_that_does_not(monkeypatch, agree):
    """The comparison's verdicts, both ways, on made-up worker results (no processes)."""
    second = (
        worker_result([4, 8]) if agree else worker_result([4, 8], hlo="other", sums_match=False)
    )
    single = worker_result([0, 8], 4) if agree else worker_result([0, 8], 4, hlo="else", loss=2.5)
    results = [worker_result([0, 4]), second, single]
    monkeypatch.setattr(multihost, "Workers", lambda *args: Finished(results))
    monkeypatch.delenv(FOLDER, raising=False)  # computed from these workers, not a shared result
    comparison = compare()
    assert comparison["workers_agree"] is agree
    assert comparison["batch_sums_match"] is agree
    assert comparison["same_compiled_hlo"] is agree
    assert comparison["process_rows"] == [[0, 4], [4, 8]]
    assert comparison["loss_multi"] == {"explicit": 1.5, "auto": 1.5}
    assert comparison["loss_single"] == {
        "explicit": 1.5 if agree else 2.5,
        "auto": 1.5 if agree else 2.5,
    }
    assert (
        comparison["barrier_sites"]
        == comparison["barrier_sites_single"]
        == {"explicit": 1, "auto": 0}
    )


def test_a_killed_worker_stops_the_cluster_and_is_named(tmp_path):
    workers = Workers(CLUSTER, coordinator_port(), timeout=60, workdir=tmp_path)
    os.kill(workers.processes[1].pid, signal.SIGKILL)
    with pytest.raises(SetupError, match=r"^worker 1 \(pid \d+\) was killed by signal 9"):
        workers.run(timeout=60)
    assert all(gone(worker.pid) for worker in workers.processes)


def test_every_wait_has_a_deadline(tmp_path):
    workers = Workers(CLUSTER, coordinator_port(), timeout=60, workdir=tmp_path)
    with pytest.raises(SetupError, match=r"timed out after 0.1 s waiting for worker\(s\) \[0, 1\]"):
        workers.run(timeout=0.1)
    assert all(gone(worker.pid) for worker in workers.processes)


def workers_on_port(port: int) -> list[int]:
    """Pids of the worker processes started for coordinator ``port`` (read from /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    argv = file.read().split(b"\0")
            except OSError:
                continue
            if b"--worker" in argv and str(port).encode() in argv:
                pids.append(int(entry))
    return pids


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads worker pids from /proc")
def test_workers_exit_when_the_process_that_started_them_is_killed():
    port = coordinator_port()
    command = [sys.executable, "-m", "snippets", "multihost", "--port", str(port)]
    parent = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(workers_on_port(port)) < 3:  # the two of the cluster, and the one-process run
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.2)
        workers = workers_on_port(port)
        parent.kill()
        parent.wait()
        # A worker still importing JAX exits once its watcher thread starts.
        deadline = time.monotonic() + 120
        while not all(gone(pid) for pid in workers):
            assert time.monotonic() < deadline, f"orphaned workers {workers_on_port(port)}"
            time.sleep(0.2)
    finally:
        parent.kill()
        parent.wait()
        for pid in workers_on_port(port):
            os.kill(pid, signal.SIGKILL)
