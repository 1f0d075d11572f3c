"""Where a job's log goes (the Snakemake rule's log file, or stderr outside Snakemake), and its peak memory."""

from __future__ import annotations

import contextlib
import logging
import sys

log = logging.getLogger("calbench")


@contextlib.contextmanager
def job_logging(log_file=None):
    """Send calbench's log (and warnings) to the job's log file, or to stderr outside Snakemake. A job that fails
    under Snakemake writes its traceback to its log and exits with status 1 without printing it on the console."""
    handler = logging.FileHandler(log_file, mode="w") if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    try:
        yield
    except Exception:
        log.exception("job failed")
        if log_file:  # the traceback stays in the job's log; the console prints its last line (the logger plugin)
            raise SystemExit(1) from None
        raise
    finally:
        root.removeHandler(handler)
        handler.close()


def snakemake_log(smk) -> str | None:
    return smk.log[0] if smk is not None and len(smk.log) else None


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (MB), which a job records itself: an evaluate job ends within
    Snakemake's first benchmark sample (whose ``max_rss`` then shows the freshly started process, 0-2 MB), and a job
    that the local job runner runs (:mod:`calbench.jobs.runner`) is not the process that Snakemake benchmarks. In a
    child of the runner it counts the pages of the runner's imports that the child touches, as a job's own process
    counts its imports."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB on Linux
