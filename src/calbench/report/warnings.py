"""The warnings the workflow's jobs raised (rounded probabilities, separable classes, a grid's edge, a fit that did
not converge, a missing class…), gathered from the metrics JSONs into ``results/tables/warnings.csv`` and listed
under the tables whose cells they concern, so that no result is read without them.

Every job records its own warnings with its outputs (:class:`calbench.caught.Recorder`): a model source's train
job in its weights file, the dump job in the dump's attributes (with the train job's), the calibrate job in the
calibrated file's (with the dump's), the evaluate job in the metrics JSON (with the calibrated file's), each as
``{stage, category, message}``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from calbench.atomic import write_text_atomic

#: ``calbench.jobs.paths.WARNINGS`` below the results directory (``tests/unit/test_warnings_travel.py`` checks
#: they agree; the paths module, which every job imports, imports nothing of report/).
FILE = "tables/warnings.csv"
COLUMNS = ("source", "method", "seed", "stage", "category", "message")


def collect(records) -> list[dict]:
    """One row per distinct warning per job (``COLUMNS``), from the ``warnings`` of the metrics JSONs' records."""
    rows = []
    for record in records:
        ids = {"source": record["source"], "method": record["method"], "seed": int(record["seed"])}
        found = [{**ids, **{k: w[k] for k in ("stage", "category", "message")}} for w in record.get("warnings", [])]
        rows += [row for i, row in enumerate(found) if row not in found[:i]]
    return rows


def write_warnings(path, rows: list[dict]) -> None:
    """``rows`` as CSV with :data:`COLUMNS` (the header alone where no job warned)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, out.getvalue())


def read_warnings(results_dir) -> list[dict]:
    """The rows of ``warnings.csv`` in the results directory ``results_dir`` (``seed`` an int); none where the
    file is absent (a run of an earlier version)."""
    path = Path(results_dir) / FILE
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return [{**row, "seed": int(row["seed"])} for row in csv.DictReader(f)]


def warning_lines(rows: list[dict], sources=None, methods=None) -> list[str]:
    """Markdown lines listing the warnings of the cells of ``sources`` × ``methods`` (all where None), one line
    per (source, stage, warning) naming the methods and seeds it concerns; none where there are none."""
    chosen = [r for r in rows if (sources is None or r["source"] in sources)
              and (methods is None or r["method"] in methods)]
    grouped: dict[tuple, dict] = {}
    for r in chosen:
        entry = grouped.setdefault((r["source"], r["stage"], r["category"], r["message"]),
                                   {"methods": {}, "seeds": {}})
        entry["methods"][r["method"]] = None
        entry["seeds"][int(r["seed"])] = None
    lines = []
    for (source, stage, category, message), entry in grouped.items():
        every = stage in ("train", "dump") and methods is not None and len(entry["methods"]) == len(set(methods))
        who = "every method" if every else ", ".join(entry["methods"])
        seeds = ", ".join(map(str, sorted(entry["seeds"])))
        lines.append(f"- {source} ({who}; seed{'s' * (len(entry['seeds']) > 1)} {seeds}), {stage} job: "
                     f"{category}: {message}")
    return ["", "**Warnings raised by the jobs of these cells** (results/tables/warnings.csv):", *lines] if lines \
        else []
