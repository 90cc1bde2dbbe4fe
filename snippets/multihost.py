"""Past one host: the LM-head step on a multi-process JAX cluster, compared with one process.

On a TPU pod slice every host runs the same script as one process of a JAX
cluster, and ``jax.distributed.initialize()`` joins them into one global set
of devices. The same multi-controller runtime runs on CPU processes, so this
module starts ``processes`` worker processes on 127.0.0.1, each with
``local_devices`` simulated CPU devices, lets each build a global batch from
the rows it holds and the 4-device mesh the single-process guides use, and
lowers, compiles and runs the LM-head step in both shard modes. A one-process
run with all the devices is the reference.

``python -m snippets.multihost [--processes N] [--local-devices D] [--timeout S] [--json]``

Every wait has a deadline; when a worker dies the others are stopped and the
error names it; no worker outlives the call that started it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from snippets.cli import Parser, SetupError, positive_int, reported, run_module

HOST = "127.0.0.1"
MODES = ("explicit", "auto")
DEVICES = 4
"""The global device count of the single-process guides' mesh."""
READY = "worker ready"
"""The line a worker logs once it has joined the cluster."""


class ClusterError(SetupError):
    """The local cluster could not start, a worker died, or a deadline passed."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def check_port(port: int) -> None:
    """Refuse a coordinator port that another program already holds."""
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError as error:
            raise ClusterError(
                f"coordinator port {port} on {HOST} is in use ({error.strerror}); "
                "pass another --port, or none to pick a free one"
            ) from None


# --- What each worker does -------------------------------------------------------------------


def step_records(devices: int) -> list[dict]:
    """Lower, compile and run the step in each shard mode on the global ``devices``-device mesh."""
    from snippets.barrier import run_report
    from snippets.lowering import StepConfig, build_step, lower_built

    records = []
    for mode in MODES:
        step = build_step(StepConfig(mode=mode, devices=devices))
        lowered = lower_built(step)
        report = run_report(lowered)
        loss, _ = step()
        records.append(
            {
                "mode": mode,
                "sharding_calls": report["sharding_calls"],
                "barrier_sites": report["barrier_sites"],
                "collectives": sorted(c["kind"] for c in report["collectives"]),
                "compiled_hlo": lowered.compiled,
                "loss": float(loss),
            }
        )
    return records


def process_local_batch(rows_per_device: int = 2, cols: int = 3) -> dict:
    """Build a global batch from the rows this process holds, as a multi-host input pipeline does.

    Each process reads only the rows its own devices hold;
    ``jax.make_array_from_process_local_data`` makes one global array of them,
    and a jitted column sum over all of it is checked against the full batch.
    """
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from snippets.devices import make_mesh

    mesh = make_mesh((jax.device_count(),), ("data",), "explicit")
    sharding = NamedSharding(mesh, P("data"))
    shape = (rows_per_device * jax.device_count(), cols)
    full = np.arange(shape[0] * cols, dtype=np.float32).reshape(shape)  # the dataset, for the check
    held = [index[0] for index in sharding.addressable_devices_indices_map(shape).values()]
    start, stop = min(rows.start for rows in held), max(rows.stop for rows in held)
    batch = jax.make_array_from_process_local_data(sharding, full[start:stop], shape)
    column_sums = jax.jit(lambda b: b.sum(axis=0))(batch)
    return {
        "rows": [start, stop],
        "global_shape": list(batch.shape),
        "sums_match": bool(np.array_equal(np.asarray(column_sums), full.sum(axis=0))),
    }


def _exit_with_parent(parent: int) -> None:
    """End this worker once process ``parent``, which started it, is gone: no orphans, ever."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def run_worker(
    process_id: int, processes: int, local_devices: int, coordinator: str, timeout: int, out: Path
) -> None:
    """Join the cluster (unless alone), run the step records and write them to ``out`` as JSON."""
    _exit_with_parent(int(os.environ["MULTIHOST_PARENT"]))
    import jax

    jax.config.update("jax_num_cpu_devices", local_devices)
    if processes > 1:
        jax.distributed.initialize(
            coordinator_address=coordinator,
            num_processes=processes,
            process_id=process_id,
            initialization_timeout=timeout,
        )
    print(f"{READY}: process {process_id} of {processes}", file=sys.stderr, flush=True)
    result = {
        "process_id": process_id,
        "global_devices": jax.device_count(),
        "local_devices": jax.local_device_count(),
        "local_batch": process_local_batch(),
        "records": step_records(jax.device_count()),
    }
    out.write_text(json.dumps(result))


# --- Starting and watching the workers -------------------------------------------------------


@dataclasses.dataclass
class Cluster:
    """Worker processes on this machine, started together and stopped together."""

    processes: int
    local_devices: int
    workdir: Path
    workers: list[subprocess.Popen] = dataclasses.field(default_factory=list)

    def log(self, process_id: int) -> str:
        """What worker ``process_id`` has written to its log so far."""
        path = self.workdir / f"worker{process_id}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, port: int, timeout: int) -> None:
        """Start every worker, pointed at a coordinator on ``port``."""
        for process_id in range(self.processes):
            command = [
                *(sys.executable, "-m", "snippets.multihost", "--worker", str(process_id)),
                *("--processes", str(self.processes), "--local-devices", str(self.local_devices)),
                *("--port", str(port), "--timeout", str(timeout)),
            ]
            with open(self.workdir / f"worker{process_id}.log", "w") as log:
                self.workers.append(
                    subprocess.Popen(
                        command,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=Path(__file__).resolve().parent.parent,
                        env={
                            **os.environ,
                            "MULTIHOST_OUT": str(self.workdir),
                            "MULTIHOST_PARENT": str(os.getpid()),
                        },
                        start_new_session=True,
                    )
                )

    def wait_until_ready(self, timeout: float) -> None:
        """Return once every worker has joined the cluster; a failure or the deadline stops them."""
        deadline = time.monotonic() + timeout
        while not all(READY in self.log(i) for i in range(self.processes)):
            for process_id, worker in enumerate(self.workers):
                if worker.poll() is not None:
                    self.stop()
                    raise ClusterError(self._death(process_id, worker.returncode))
            if time.monotonic() > deadline:
                self.stop()
                raise ClusterError(f"workers did not join the cluster within {timeout:.0f} s")
            time.sleep(0.2)

    def wait(self, timeout: float) -> list[dict]:
        """Every worker's result; a worker that fails, or a deadline that passes, stops them all."""
        deadline = time.monotonic() + timeout
        try:
            while any(worker.poll() is None for worker in self.workers):
                for process_id, worker in enumerate(self.workers):
                    if worker.poll() not in (None, 0):
                        raise ClusterError(self._death(process_id, worker.returncode))
                if time.monotonic() > deadline:
                    running = [i for i, w in enumerate(self.workers) if w.poll() is None]
                    raise ClusterError(
                        f"timed out after {timeout:.0f} s waiting for worker(s) {running}"
                    )
                time.sleep(0.2)
            for process_id, worker in enumerate(self.workers):
                if worker.returncode != 0:
                    raise ClusterError(self._death(process_id, worker.returncode))
            return [
                json.loads((self.workdir / f"result{i}.json").read_text())
                for i in range(self.processes)
            ]
        finally:
            self.stop()

    def _death(self, process_id: int, status: int) -> str:
        """One line naming the worker that failed, how, and the last thing it logged."""
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        lines = [line for line in self.log(process_id).splitlines() if line.strip()]
        last = f"; its last log line: {lines[-1].strip()}" if lines else ""
        return f"worker {process_id} (pid {self.workers[process_id].pid}) {how}{last}"

    def stop(self) -> None:
        """Stop every worker still running: SIGTERM, then SIGKILL after a grace period."""
        for worker in self.workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()


def run_cluster(
    processes: int, local_devices: int, timeout: int = 300, port: int | None = None
) -> list[dict]:
    """Start ``processes`` workers (``local_devices`` each), wait for them, return their results."""
    if port is None:
        port = free_port()
    else:
        check_port(port)
    with tempfile.TemporaryDirectory(prefix="multihost-") as directory:
        cluster = Cluster(processes, local_devices, Path(directory))
        cluster.start(port, timeout)
        return cluster.wait(timeout)


# --- The comparison --------------------------------------------------------------------------


def compare(
    processes: int = 2, local_devices: int = 2, timeout: int = 300, port: int | None = None
) -> dict:
    """The step on a ``processes``-process cluster against one process with every device."""
    if processes * local_devices != DEVICES:
        raise ValueError(
            f"the guides' mesh has {DEVICES} devices, but {processes} processes x "
            f"{local_devices} local devices = {processes * local_devices}; choose counts whose "
            f"product is {DEVICES}"
        )
    multi = run_cluster(processes, local_devices, timeout, port)
    (single,) = run_cluster(1, processes * local_devices, timeout)
    first = multi[0]
    same_everywhere = all(result["records"] == first["records"] for result in multi)
    pairs = list(zip(single["records"], first["records"], strict=True))
    return {
        "processes": processes,
        "global_devices": first["global_devices"],
        "local_devices": first["local_devices"],
        "workers_agree": same_everywhere,
        "process_rows": [result["local_batch"]["rows"] for result in multi],
        "global_batch": first["local_batch"]["global_shape"],
        "batch_sums_match": all(result["local_batch"]["sums_match"] for result in multi),
        "same_compiled_hlo": all(s["compiled_hlo"] == m["compiled_hlo"] for s, m in pairs),
        "loss_single": {s["mode"]: s["loss"] for s, _ in pairs},
        "loss_multi": {m["mode"]: m["loss"] for _, m in pairs},
        "barrier_sites": {m["mode"]: m["barrier_sites"] for _, m in pairs},
        "barrier_sites_single": {s["mode"]: s["barrier_sites"] for s, _ in pairs},
        "sharding_calls": {m["mode"]: m["sharding_calls"] for _, m in pairs},
        "sharding_calls_single": {s["mode"]: s["sharding_calls"] for s, _ in pairs},
        "collectives": {m["mode"]: m["collectives"] for _, m in pairs},
        "collectives_single": {s["mode"]: s["collectives"] for s, _ in pairs},
    }


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535."""
    port = positive_int(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port from 1 to 65535, got {text!r}")
    return port


def main(argv: Sequence[str] | None = None) -> None:
    """Run the comparison (or, with ``--worker``, be one process of the cluster)."""
    parser = Parser(__doc__)
    parser.add_argument("--processes", type=positive_int, default=2, help="worker processes")
    parser.add_argument("--local-devices", type=positive_int, default=2, help="devices per process")
    parser.add_argument("--timeout", type=positive_int, default=300, help="seconds a wait may take")
    parser.add_argument("--port", type=port_number, help="coordinator port (default: a free one)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        out = Path(os.environ["MULTIHOST_OUT"]) / f"result{args.worker}.json"
        coordinator = f"{HOST}:{args.port}"
        run_worker(args.worker, args.processes, args.local_devices, coordinator, args.timeout, out)
        return
    with reported(args.debug):
        report = compare(args.processes, args.local_devices, args.timeout, args.port)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['processes']} processes x {report['local_devices']} devices = "
        f"{report['global_devices']} global devices; compiled HLO identical to one process: "
        f"{report['same_compiled_hlo']}"
    )
    for mode in MODES:
        print(
            f"{mode}: loss {report['loss_multi'][mode]!r} (one process "
            f"{report['loss_single'][mode]!r}), barrier sites {report['barrier_sites'][mode]}, "
            f"Sharding calls {report['sharding_calls'][mode]}"
        )


if __name__ == "__main__":
    run_module(main)
