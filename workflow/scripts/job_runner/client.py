"""The shell command of the calibrate and evaluate rules: hand the job to the run's local job runner
(calbench.jobs.runner), which runs the rule's script in a child forked from a process that has already imported
calbench; where there is none (a cluster job, CALBENCH_JOB_RUNNER=off, another Python, not Linux), run the script in
a Python of its own (calbench.jobs.script_job). Standard library only and started with ``python -S``, so that a job
the runner runs costs ~0.01 CPU-s here instead of a Python that imports Snakemake to unpickle a ``snakemake``
object (~0.1 CPU-s, the cost of a ``script:`` rule)::

    python -S client.py RULE SCRIPT CONFIG_JSON THREADS LOG [WILDCARD=VALUE ...]
"""

import json
import os
import pickle
import socket
import struct
import sys

ADDRESS_ENV = "CALBENCH_RUNNER"  # calbench.jobs.runner.ADDRESS_ENV
HEADER = struct.Struct("!Q")  # calbench.jobs.runner.HEADER
REPLY = struct.Struct("!idddd")  # calbench.jobs.runner.REPLY


def job_of(argv: list) -> dict:
    """The job of the command line: the rule, its script, the resolved config's snapshot, threads, log, wildcards."""
    rule, script, config, threads, log, *pairs = argv
    wildcards = dict(pair.split("=", 1) for pair in pairs)
    return {"rule": rule, "script": os.path.realpath(script), "config": os.path.realpath(config),
            "threads": int(threads), "log": log, "wildcards": wildcards}


def ran_by_runner(job: dict) -> bool:
    """Run ``job`` in the run's job runner, and exit with its status where that is not 0; False where there is no
    runner, or it declined the job (the caller then runs it itself)."""
    address = os.environ.get(ADDRESS_ENV)
    if not address:
        return False
    request = pickle.dumps({"job": job, "cwd": os.getcwd(), "environ": dict(os.environ), "python": sys.executable,
                            "name": "/".join(job["wildcards"].values())}, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(address)
        socket.send_fds(connection, [HEADER.pack(len(request))], [0, 1, 2])
        connection.sendall(request)
        reply = b""
        while len(reply) < REPLY.size:
            chunk = connection.recv(REPLY.size - len(reply))
            if not chunk:
                break
            reply += chunk
    except OSError:
        return False  # no runner (gone, or not reachable from here): run the job in a process of its own
    if len(reply) < REPLY.size:
        sys.exit("calbench job runner: the runner ended before the job did")
    code = REPLY.unpack(reply)[0]
    if code == -1:
        return False  # a job the runner declined (another Python): run it here
    if code != 0:
        sys.exit(code)
    return True


def main(argv: list) -> None:
    job = job_of(argv)
    if not ran_by_runner(job):  # this Python without -S, which imports calbench
        os.execv(sys.executable, [sys.executable, "-m", "calbench.jobs.script_job", json.dumps(job)])


if __name__ == "__main__":
    main(sys.argv[1:])
