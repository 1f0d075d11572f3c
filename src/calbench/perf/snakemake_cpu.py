"""Run Snakemake in this process and print, when it ends, its own process's CPU seconds apart from those of its jobs
(docs/runtime.md, "The default run"): the cost of choosing, starting and recording ~300 jobs, which neither the
benchmark files nor the job runner's record hold::

    /usr/bin/time -v python -m calbench.perf.snakemake_cpu --cores 2 --configfile config/config.yaml

Its arguments are Snakemake's. The line goes to standard error: wall seconds, the CPU seconds of this process
(Snakemake's scheduler, its benchmark sampling and its records) and of its ended children (the jobs, the job runner).
"""

from __future__ import annotations

import atexit
import resource
import sys
import time


def _report(start: float) -> None:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"calbench.perf.snakemake_cpu: wall {time.perf_counter() - start:.1f} s; Snakemake's own process "
          f"{own.ru_utime + own.ru_stime:.1f} CPU-s; its jobs and the job runner "
          f"{children.ru_utime + children.ru_stime:.1f} CPU-s", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    atexit.register(_report, time.perf_counter())  # Snakemake ends with sys.exit
    from snakemake.cli import main as snakemake

    sys.argv = ["snakemake", *(sys.argv[1:] if argv is None else argv)]
    snakemake()


if __name__ == "__main__":
    main()
