"""Where a job's log goes: the Snakemake rule's log file, or stderr outside Snakemake."""

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
