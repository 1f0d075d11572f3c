"""The job's side of calbench's local job runner (calbench.jobs.runner): hand the job to the runner, which runs this
same script in a child forked from a process that has already imported calbench. Standard library only, so that
a job that the runner runs imports nothing else."""

import os
import pickle
import socket
import struct
import sys

ADDRESS_ENV = "CALBENCH_RUNNER"  # calbench.jobs.runner.ADDRESS_ENV
HEADER = struct.Struct("!Q")  # calbench.jobs.runner.HEADER
REPLY = struct.Struct("!idddd")  # calbench.jobs.runner.REPLY


def ran_by_runner(smk, script: str) -> bool:
    """Run ``script`` (the calling rule script's own path) in the run's job runner, and exit with its status where
    that is not 0; False where there is no runner (the caller then runs the job itself)."""
    address = os.environ.get(ADDRESS_ENV)
    if not address:
        return False
    request = pickle.dumps({"script": os.path.realpath(script), "snakemake": smk, "cwd": os.getcwd(),
                            "environ": dict(os.environ), "python": sys.executable,
                            "job": "/".join(str(v) for v in smk.wildcards)}, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(address)
        sys.stdout.flush()
        sys.stderr.flush()
        socket.send_fds(connection, [HEADER.pack(len(request))], [0, 1, 2])
        connection.sendall(request)
        reply = b""
        while len(reply) < REPLY.size:
            chunk = connection.recv(REPLY.size - len(reply))
            if not chunk:
                break
            reply += chunk
    except OSError:
        return False  # no runner (gone, or not reachable from here): run the job in this process
    if len(reply) < REPLY.size:
        sys.exit("calbench job runner: the runner ended before the job did")
    code = REPLY.unpack(reply)[0]
    if code == -1:
        return False  # a job the runner declined (another Python): run it here
    if code != 0:
        sys.exit(code)
    return True
