"""The local job runner: one process per local Snakemake run that imports what the calibrate and evaluate jobs
import, once, and runs each of their jobs in a child forked from it (docs/operations.md, "The local job runner").

A workflow job is otherwise a fresh Python process, and at the default run's size most of its time is start-up:
the imports of numpy, h5py, scipy and calbench (~0.3 CPU-s) and numba's set-up before the first compiled kernel
runs (~0.4 CPU-s), against a few hundredths of a second of fitting or scoring (docs/runtime.md). Snakemake still
schedules every job on its own, with the same inputs, outputs, code inputs and benchmark, so what an edit reruns is
unchanged; the rule's shell command (``workflow/scripts/job_runner/client.py``, a Python without its site packages)
hands the job over, and the forked child executes the rule's own script (``workflow/scripts/{calibrate,evaluate}.py``,
:mod:`calbench.jobs.script_job`) with the job's working directory, environment and standard streams; its exit
status becomes the job's.

The Snakefile starts the runner (:func:`start`) on a local run's start (Linux only: ``fork`` after numpy and numba
are loaded is not safe on macOS) unless ``CALBENCH_JOB_RUNNER=off``, and stops it when the run ends (:func:`stop`);
the runner also ends when the Snakemake process does. A job started without a runner (a cluster job, another
Python environment through ``--use-conda``, the runner gone) runs its script in a process of its own. Each job's
resource use (wall, user and system CPU seconds, peak resident memory of the child) is one line of
``logs/job_runner.tsv``.
"""

from __future__ import annotations

import atexit
import os
import pickle
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The environment variable through which jobs find the runner's socket.
ADDRESS_ENV = "CALBENCH_RUNNER"
#: ``CALBENCH_JOB_RUNNER=off`` runs every job in its own process.
SWITCH_ENV = "CALBENCH_JOB_RUNNER"
#: The per-job record, one line per job the runner ran.
RECORD = Path("logs") / "job_runner.tsv"
RECORD_HEADER = "script\tjob\texit\twall_s\tuser_s\tsys_s\tmax_rss_mb\n"
#: What the calibrate and evaluate jobs import (their modules and the libraries their functions import lazily).
PRELOAD = ("calbench.jobs.calibrate", "calbench.jobs.evaluate", "calbench.jobs.logs", "calbench.jobs.script_job",
           "calbench.parallel", "calbench.persist", "calbench.metrics.definitions", "scipy.optimize", "scipy.special",
           "scipy.linalg", "threadpoolctl")
#: The header of a request and of a reply (lengths and numbers, network byte order).
HEADER = struct.Struct("!Q")
REPLY = struct.Struct("!idddd")

_server: subprocess.Popen | None = None


def enabled(local_exec: bool) -> bool:
    """Whether a run starts the runner: a local run on Linux, unless ``CALBENCH_JOB_RUNNER=off``."""
    return local_exec and sys.platform.startswith("linux") and os.environ.get(SWITCH_ENV, "on") != "off"


def start(record: Path | None = RECORD) -> None:
    """Start the runner for this process's run and point its jobs at it (environment variable
    :data:`ADDRESS_ENV`); the runner is stopped at :func:`stop` or at this process's exit."""
    global _server
    if _server is not None:
        return
    folder = tempfile.mkdtemp(prefix="calbench-runner-")  # private (0700): only this user's jobs can connect
    address = os.path.join(folder, "socket")
    command = [sys.executable, "-m", "calbench.jobs.runner", address, str(os.getpid())]
    if record is not None:
        record = Path(record).resolve()
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(RECORD_HEADER)  # this run's jobs
        command.append(str(record))
    _server = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30.0
    while not os.path.exists(address) and _server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the socket is bound before the imports: a job that connects early waits for them
    if not os.path.exists(address):
        stop()
        return
    os.environ[ADDRESS_ENV] = address
    atexit.register(stop)


def stop() -> None:
    """Stop the runner (its running children with it) and unset :data:`ADDRESS_ENV`."""
    global _server
    address = os.environ.pop(ADDRESS_ENV, None)
    if _server is None:
        return
    if _server.poll() is None:
        _server.terminate()
        try:
            _server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _server.kill()
    _server = None
    if address and Path(address).parent.is_dir():
        Path(address).unlink(missing_ok=True)
        Path(address).parent.rmdir()


def serve(address: str, parent: int, record: str | None = None) -> None:
    """Accept jobs on the Unix socket ``address`` until process ``parent`` (Snakemake) ends or SIGTERM."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    _preload()
    children: dict[int, tuple] = {}  # pid → (connection, pidfd, start time, job name)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")

    def end(*_):
        for pid in children:
            _kill(pid)
        if os.getppid() != parent:  # Snakemake was killed: nobody else removes the socket and its folder
            Path(address).unlink(missing_ok=True)
            os.rmdir(os.path.dirname(address))
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, end)
    while True:
        if os.getppid() != parent:
            end()
        for key, _ in selector.select(timeout=1.0):
            if key.data == "accept":
                connection, _ = listener.accept()
                child = _fork_job(connection, listener, children)
                if child is not None:
                    pid, pidfd, name = child
                    children[pid] = (connection, pidfd, time.perf_counter(), name)
                    selector.register(pidfd, selectors.EVENT_READ, ("exit", pid))
                    selector.register(connection, selectors.EVENT_READ, ("client", pid))
            elif key.data[1] in children:
                pid = key.data[1]
                connection, pidfd, started, name = children.pop(pid)
                selector.unregister(pidfd)
                selector.unregister(connection)
                if key.data[0] == "client":  # the job was cancelled (its process ended): so is its child
                    _kill(pid)
                status, usage = os.wait4(pid, 0)[1:]
                os.close(pidfd)
                code = os.waitstatus_to_exitcode(status)
                wall = time.perf_counter() - started
                rss = usage.ru_maxrss / 1024  # KiB on Linux
                try:
                    connection.sendall(REPLY.pack(code, wall, usage.ru_utime, usage.ru_stime, rss))
                except OSError:
                    pass
                connection.close()
                if record is not None:
                    _record(record, name, code, wall, usage.ru_utime, usage.ru_stime, rss)


def _preload() -> None:
    """Import :data:`PRELOAD` and load every compiled kernel (numba's set-up and the cached machine code)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from calbench import kernels

    for module in kernels.modules():
        module.warm_up()


def _receive(connection: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = connection.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the job closed its connection before sending its request")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _fork_job(connection: socket.socket, listener: socket.socket, children: dict):
    """Read one request (the job's standard streams, then its pickled job as the rule's shell command describes it,
    working directory and environment) and fork its child: ``(pid, pidfd, job name)``, or None where the request was not
    one the runner can run (answered with exit status -1: the job then runs in its own process)."""
    try:
        connection.settimeout(30.0)
        header, fds, _, _ = socket.recv_fds(connection, HEADER.size, 3)
        request = pickle.loads(_receive(connection, HEADER.unpack(header)[0]))
        connection.settimeout(None)
    except (OSError, ValueError, struct.error, pickle.UnpicklingError, EOFError):
        connection.close()
        return None
    if len(fds) != 3 or request.get("python") != sys.executable or not isinstance(request.get("job"), dict):
        for fd in fds:
            os.close(fd)
        connection.sendall(REPLY.pack(-1, 0.0, 0.0, 0.0, 0.0))
        connection.close()
        return None
    pid = os.fork()
    if pid == 0:  # the child: never returns
        for other in [listener] + [child[0] for child in children.values()]:
            other.close()
        for child in children.values():
            os.close(child[1])
        connection.close()
        _run_child(request, fds)
    for fd in fds:
        os.close(fd)
    name = f"{Path(request['job']['script']).stem}\t{request.get('name', '')}"
    return pid, os.pidfd_open(pid), name


def _run_child(request: dict, fds: list[int]) -> None:
    """Run the job's script (:func:`calbench.jobs.script_job.run`) with the job's streams, directory and
    environment; exit with its status."""
    import traceback

    from calbench.jobs import script_job

    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin, sys.stdout, sys.stderr = (open(0, closefd=False), open(1, "w", closefd=False),  # noqa: SIM115
                                             open(2, "w", closefd=False))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({k: v for k, v in request["environ"].items() if k != ADDRESS_ENV})
        script_job.run(request["job"])
        code = 0
    except SystemExit as stop_:
        code = stop_.code if isinstance(stop_.code, int) else (0 if stop_.code is None else 1)
    except BaseException:  # noqa: BLE001 (the job's failure, reported on its stderr as Python would)
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _record(path: str, name: str, code: int, wall: float, user: float, system: float, rss: float) -> None:
    with open(path, "a") as out:
        out.write(f"{name}\t{code}\t{wall:.3f}\t{user:.3f}\t{system:.3f}\t{rss:.1f}\n")


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
