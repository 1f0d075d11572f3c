"""calbench's console for Snakemake runs (``--logger calbench``, which ``profiles/default`` sets): one line per
finished job with the elapsed time and an estimate of the time left, instead of each job's header (whose input list
names every calbench file the job's code imports); a failed job as one line, its error message (the last line of
the traceback in its log) and the log's path; at the end of a complete run, where the tables are, the next commands
and the run's warnings (``results/tables/warnings.csv``). Dry runs, ``--verbose`` and ``--debug-dag`` get
Snakemake's own output unchanged; other errors are printed in full; any other line longer than :data:`MAX_LINE`
characters is cut.

Snakemake finds the plugin by its package name (``snakemake_logger_plugin_*``, docs/operations.md).
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

#: The longest console line printed outside errors and ``--verbose`` (a terminal's width wrapped ten times).
MAX_LINE = 1000
ERRORS = {LogEvent.JOB_ERROR, LogEvent.GROUP_ERROR, LogEvent.ERROR}
SILENT = {LogEvent.JOB_INFO, LogEvent.JOB_STARTED, LogEvent.SHELLCMD, LogEvent.JOB_FINISHED, LogEvent.RULEGRAPH,
          LogEvent.WORKFLOW_STARTED}
#: Snakemake's scheduling chatter, printed before each batch of jobs.
CHATTER = ("Select jobs to execute...",)
#: Where a complete run's tables and warnings are (``calbench.jobs.paths``; the plugin imports no calbench module).
TABLES, WARNINGS = Path("results/tables"), Path("results/tables/warnings.csv")
#: Distinct warnings repeated at the end of a run at the most (the rest: in :data:`WARNINGS`).
MAX_WARNINGS = 10


def error_message(log_files) -> str:
    """The error of a failed job from its log: the exception line that ends its last traceback, else the log's last
    line; empty without a readable log."""
    for name in log_files or ():
        try:
            lines = Path(name).read_text(errors="replace").splitlines()
        except OSError:
            continue
        starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
        after = lines[starts[-1] + 1:] if starts else []
        ends = [line for line in after if line.strip() and not line[0].isspace()]
        if ends:
            return ends[0]
        if [line for line in lines if line.strip()]:
            return [line for line in lines if line.strip()][-1]
    return ""


def configfile(argv) -> str:
    """The config file of the Snakemake command line ``argv`` (``--configfile(s) PATH``; the default run's without)."""
    for i, word in enumerate(argv):
        if word in ("--configfile", "--configfiles") and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(("--configfile=", "--configfiles=")):
            return word.split("=", 1)[1]
    return "config/config.yaml"


def closing_lines(argv) -> list[str]:
    """What a complete run prints last: where the tables are, the next commands, the run's warnings."""
    lines = [f"tables: {TABLES}/ (summary.md first; metrics_long.csv holds every value)",
             f"next: calbench recommend results/   ·   calbench report {configfile(argv)}"]
    if WARNINGS.is_file():
        with WARNINGS.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        distinct: dict[str, set] = {}
        for row in rows:
            distinct.setdefault(row.get("message", ""), set()).add(f"{row.get('source')}/{row.get('method')}")
        if distinct:
            lines.append(f"warnings ({len(rows)} in the jobs' logs, {len(distinct)} distinct; {WARNINGS}):")
        for message, where in list(distinct.items())[:MAX_WARNINGS]:
            jobs = ", ".join(sorted(where)[:3]) + (f" +{len(where) - 3}" if len(where) > 3 else "")
            lines.append(f"  {message} ({jobs})")
        if len(distinct) > MAX_WARNINGS:
            lines.append(f"  … {len(distinct) - MAX_WARNINGS} more in {WARNINGS}")
    return lines


def job_failed(record, label: str) -> str:
    """One line for a failed job: its label, its error message and its log."""
    logs = list(getattr(record, "log", None) or [])
    message = error_message(logs) or "(no error message in its log)"
    where = f"; log: {', '.join(logs)}" if logs else ""
    return cut(f"error: {label} failed: {message}{where}")


def is_job_exit(record) -> bool:
    """Snakemake's own report of a job script's non-zero exit (a ``RuleException`` around ``CalledProcessError``),
    which :func:`job_failed`'s line replaces."""
    text = record.getMessage() or ""
    return getattr(record, "exception", None) == "RuleException" and "returned non-zero exit status" in text


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def cut(text: str) -> str:
    """Each line of ``text`` at most :data:`MAX_LINE` characters, saying how much was left out."""
    lines = [line if len(line) <= MAX_LINE else
             f"{line[:MAX_LINE - 60]} … (+{len(line) - MAX_LINE + 60} characters; --verbose prints all)"
             for line in text.split("\n")]
    return "\n".join(lines)


class ProgressLine:
    """The line of a finished job: ``[12/132] calibrate tiny/ts/0 done in 1.2 s; 0 min 45 s elapsed, ~1 min 10 s
    left`` (the time left at the mean pace so far)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.start = clock()
        self.jobs: dict[int, tuple[str, float]] = {}
        self.finished: list[tuple[str, float]] = []

    def job_info(self, jobid: int, rule: str, wildcards) -> None:
        values = "/".join(str(v) for v in dict(wildcards or {}).values())
        self.jobs[jobid] = (f"{rule} {values}".strip(), self.clock())

    def label(self, jobid: int, rule: str = "") -> str:
        """``calibrate tiny/ts/0``: the rule and wildcards of a job seen started."""
        return self.jobs.get(jobid, (f"{rule} (job {jobid})".strip(), 0.0))[0]

    def job_finished(self, jobid: int) -> None:
        label, started = self.jobs.pop(jobid, (f"job {jobid}", self.clock()))
        self.finished.append((label, self.clock() - started))

    def progress(self, done: int, total: int) -> str:
        elapsed = self.clock() - self.start
        label, took = self.finished.pop(0) if self.finished else ("a job", 0.0)
        line = f"[{done}/{total}] {label} done in {took:.1f} s; {duration(elapsed)} elapsed"
        if 0 < done < total:
            line += f", ~{duration(elapsed / done * (total - done))} left"
        return line


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        from snakemake.logging import DefaultFilter, DefaultFormatter  # Snakemake's own, for everything else

        s = self.common_settings
        self.passthrough = bool(s.verbose or s.dryrun or s.debug_dag)
        self.default_filter = DefaultFilter(s.quiet, s.debug_dag, s.verbose, s.dryrun, s.printshellcmds)
        self.default_format = DefaultFormatter(s.quiet, s.show_failed_logs)
        self.stream = sys.stdout if s.stdout else sys.stderr
        self.line = ProgressLine()

    def emit(self, record) -> None:
        try:
            event = getattr(record, "event", None)
            if not self.passthrough and event == LogEvent.JOB_ERROR:
                self._write(job_failed(record, self.line.label(record.jobid, getattr(record, "rule_name", ""))))
            elif not self.passthrough and event == LogEvent.ERROR and is_job_exit(record):
                pass
            elif self.passthrough or event not in SILENT | {LogEvent.PROGRESS}:
                if self.default_filter.filter(record) and (self.passthrough or record.getMessage() not in CHATTER):
                    text = self.default_format.format(record)
                    self._write(text if self.passthrough or event in ERRORS else cut(text))
            elif event == LogEvent.JOB_INFO:
                self.line.job_info(record.jobid, record.rule_name, getattr(record, "wildcards", None))
            elif event == LogEvent.JOB_FINISHED:
                self.line.job_finished(record.job_id)
            elif event == LogEvent.PROGRESS:
                self._write(self.line.progress(record.done, record.total))
                if record.done == record.total and (TABLES / "summary.md").is_file():
                    self._write("\n".join(cut(line) for line in closing_lines(sys.argv)))
        except Exception:  # a broken console line must not stop the workflow
            self.handleError(record)

    def _write(self, text: str) -> None:
        if text:
            self.stream.write(text + "\n")
            self.stream.flush()

    # What Snakemake asks of a handler: it writes to the console, filters and formats itself, needs no rule graph.
    writes_to_stream, writes_to_file, has_filter, has_formatter, needs_rulegraph = True, False, True, True, False
