"""Past one host: the LM-head step on a multi-process JAX cluster, compared with one process.

Every wait has a deadline, and no worker outlives the process that started it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from subprocess import PIPE, Popen

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.cache.results import shared
from snippets.devices import MESH_DEVICES, SHARD_MODES, ShardMode
from snippets.hlo.barrier import run_report
from snippets.hlo.programs import lower_built
from snippets.lowering import StepConfig, build_step
from snippets.support.cli import Parser, SetupError, positive_int, reported
from snippets.support.tables import print_report

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[2]


def coordinator_port(port: int | None = None) -> int:
    """``port`` on 127.0.0.1 if nothing holds it; without one, a port that is free right now."""
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port or 0))
        except OSError as error:
            raise SetupError(
                f"coordinator port {port} on {HOST} is in use ({error.strerror}); "
                "pass another --port, or none to pick a free one"
            ) from None
        return probe.getsockname()[1]


def run_worker(
    process_id: int, processes: int, local_devices: int, coordinator: str, timeout: int
) -> dict:
    """Join the cluster (unless alone), then build the batch and run the step on the global mesh."""
    jax.config.update("jax_num_cpu_devices", local_devices)
    if processes > 1:
        jax.distributed.initialize(
            coordinator_address=coordinator,
            num_processes=processes,
            process_id=process_id,
            initialization_timeout=timeout,
        )
    return {
        "global_devices": jax.device_count(),
        "local_devices": jax.local_device_count(),
        "local_batch": process_local_batch(),
        "records": step_records(jax.device_count()),
    }


def process_local_batch(rows_per_device: int = 2, cols: int = 3) -> dict:
    """One global batch from each process's rows, as a multi-host input pipeline builds it."""
    mesh = jax.make_mesh((jax.device_count(),), ("data",), axis_types=(AxisType.Explicit,))
    sharding = NamedSharding(mesh, P("data"))
    shape = (rows_per_device * jax.device_count(), cols)
    full = np.arange(shape[0] * cols, dtype=np.float32).reshape(shape)  # the dataset, for the check
    held = [index[0] for index in sharding.addressable_devices_indices_map(shape).values() if index]
    start, stop = min(rows.start for rows in held), max(rows.stop for rows in held)
    batch = jax.make_array_from_process_local_data(sharding, full[start:stop], shape)
    column_sums = jax.jit(lambda b: b.sum(axis=0))(batch)
    return {
        "rows": [start, stop],
        "global_shape": list(batch.shape),
        "sums_match": bool(np.array_equal(np.asarray(column_sums), full.sum(axis=0))),
    }


def step_records(devices: int) -> dict[ShardMode, dict]:
    """Lower, compile and run the step in each shard mode on the global ``devices``-device mesh."""
    records = {}
    for mode in SHARD_MODES:
        step = build_step(StepConfig(mode=mode, devices=devices))
        lowered = lower_built(step)
        report = run_report(lowered)
        loss, _ = step()
        records[mode] = {
            "sharding_calls": report["sharding_calls"],
            "barrier_sites": report["barrier_sites"],
            "collectives": sorted(c["kind"] for c in report["collectives"]),
            "compiled_hlo": lowered.compiled,
            "loss": float(loss),
        }
    return records


def exit_with_parent() -> None:
    """End this worker once the process that started it is gone, which closes the worker's stdin."""
    sys.stdin.read()
    os._exit(3)


class Workers:
    """Worker processes, started and stopped together; worker ``i`` runs ``jobs[i]``."""

    def __init__(
        self, jobs: Sequence[tuple[int, int, int]], port: int, timeout: int, workdir: Path
    ):
        self.workdir, self.processes = workdir, []
        for i, (process_id, processes, local_devices) in enumerate(jobs):
            command = [
                *(sys.executable, "-m", "snippets", "multihost", "--worker", str(process_id)),
                *("--processes", str(processes), "--local-devices", str(local_devices)),
                *("--port", str(port), "--timeout", str(timeout)),
            ]
            # stdin stays open until this process ends: see exit_with_parent
            with open(workdir / f"{i}.out", "w") as out, open(workdir / f"{i}.log", "w") as log:
                self.processes.append(Popen(command, stdin=PIPE, stdout=out, stderr=log, cwd=ROOT))

    def run(self, timeout: float) -> list[dict]:
        """Every worker's result; a worker that fails, or the deadline, stops them all and raises."""
        deadline = time.monotonic() + timeout
        try:
            while (codes := [worker.poll() for worker in self.processes]) != [0] * len(codes):
                if failed := [i for i, code in enumerate(codes) if code not in (None, 0)]:
                    raise SetupError(self.failure(failed[0]))
                if time.monotonic() > deadline:
                    running = [i for i, code in enumerate(codes) if code is None]
                    raise SetupError(
                        f"timed out after {timeout:g} s waiting for worker(s) {running}"
                    )
                time.sleep(0.2)
        finally:
            self.stop()
        return [
            json.loads((self.workdir / f"{i}.out").read_text().splitlines()[-1])
            for i in range(len(self.processes))
        ]

    def failure(self, i: int) -> str:
        """One line naming worker ``i``, how it ended, and the last line it logged."""
        status = self.processes[i].returncode
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        lines = (self.workdir / f"{i}.log").read_text(errors="replace").strip().splitlines()
        last = f"; its last log line: {lines[-1].strip()}" if lines else ""
        return f"worker {i} (pid {self.processes[i].pid}) {how}{last}"

    def stop(self) -> None:
        """Kill every worker still running, and reap it."""
        for worker in self.processes:
            worker.kill()  # does nothing to a worker that has already ended
            worker.wait()
            if worker.stdin:  # a pipe: every worker is started with stdin=PIPE
                worker.stdin.close()


@shared
def compare(
    processes: int = 2, local_devices: int = 2, timeout: int = 300, port: int | None = None
) -> dict:
    """The step on a ``processes``-process cluster against one process with every device."""
    if processes * local_devices != MESH_DEVICES:
        raise ValueError(
            f"the guides' mesh has {MESH_DEVICES} devices, but {processes} processes x "
            f"{local_devices} local devices = {processes * local_devices}; choose counts whose "
            f"product is {MESH_DEVICES}"
        )
    jobs = [(i, processes, local_devices) for i in range(processes)] + [(0, 1, MESH_DEVICES)]
    with tempfile.TemporaryDirectory(prefix="multihost-") as workdir:
        *multi, single = Workers(jobs, coordinator_port(port), timeout, Path(workdir)).run(timeout)
    first = multi[0]

    def by_mode(result: dict, key: str) -> dict:
        return {mode: record[key] for mode, record in result["records"].items()}

    return {
        "processes": processes,
        "global_devices": first["global_devices"],
        "local_devices": first["local_devices"],
        "workers_agree": all(result["records"] == first["records"] for result in multi),
        "process_rows": [result["local_batch"]["rows"] for result in multi],
        "global_batch": first["local_batch"]["global_shape"],
        "batch_sums_match": all(result["local_batch"]["sums_match"] for result in multi),
        "same_compiled_hlo": by_mode(single, "compiled_hlo") == by_mode(first, "compiled_hlo"),
        "loss_single": by_mode(single, "loss"),
        "loss_multi": by_mode(first, "loss"),
        **{
            f"{key}{suffix}": by_mode(result, key)
            for key in ("barrier_sites", "sharding_calls", "collectives")
            for suffix, result in (("", first), ("_single", single))
        },
    }


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535."""
    if (port := positive_int(text)) > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port from 1 to 65535, got {text!r}")
    return port


def main(argv: Sequence[str] | None = None) -> None:
    """Run the comparison (or, with ``--worker``, be one process of the cluster)."""
    parser = Parser(__doc__)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=positive_int, default=2, help="worker processes")
    parser.add_argument("--local-devices", type=positive_int, default=2, help="devices per process")
    parser.add_argument("--timeout", type=positive_int, default=300, help="seconds a wait may take")
    parser.add_argument("--port", type=port_number, help="coordinator port (default: a free one)")
    args = parser.parse_args(argv)
    if args.worker is not None:
        threading.Thread(target=exit_with_parent, daemon=True).start()
        job = (args.worker, args.processes, args.local_devices)
        print(json.dumps(run_worker(*job, f"{HOST}:{args.port}", args.timeout)))
        return
    with reported(args.debug):
        report = compare(args.processes, args.local_devices, args.timeout, args.port)
    print_report(report, args.json)
