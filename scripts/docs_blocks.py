"""The measured tables of the docs, written from the measurement records of docs/measurements/.

Each record is the JSON file that ``python -m calbench.perf --only … --out docs/measurements/NAME.json`` writes:
the command (and where it needs words, its ``setting``), commit, machine, date and load average of the run, and
one entry per benchmark. A record that
holds figures measured before records existed says so in its ``note``. Each block of :data:`BLOCKS` is a table of
some records' entries in a page's ``<!-- begin generated: NAME -->`` block (:mod:`calbench.perf.docs_blocks`),
followed by the provenance of every record it shows, so that the prose around it never holds a measured figure:

    python scripts/docs_blocks.py            # rewrite the blocks from the records
    python scripts/docs_blocks.py --check    # exit 1 when a committed block is not what the records give
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, NamedTuple

from calbench.perf.docs_blocks import replace_blocks, write_or_check

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "docs" / "measurements"


def load(name: str) -> dict:
    """The record ``docs/measurements/{name}.json``, its entries keyed by benchmark name; an error naming the file
    and the missing field where it is not one."""
    path = RECORDS / f"{name}.json"
    record = json.loads(path.read_text())
    for field in ("command", "commit", "machine", "date", "benchmarks"):
        if field not in record:
            raise ValueError(f"{path}: no field {field!r}; a record is what `python -m calbench.perf --out` writes")
    entries = {e["name"]: e for e in record["benchmarks"]}
    return {**record, "file": path.relative_to(REPO).as_posix(), "entries": entries}


def merged(names: list[str]) -> tuple[dict[str, dict], list[dict]]:
    """The entries of the records ``names`` merged by benchmark name (a later record's fields added to or replacing
    an earlier one's), and the records."""
    records = [load(name) for name in names]
    entries: dict[str, dict] = {}
    for record in records:
        for key, entry in record["entries"].items():
            entries.setdefault(key, {}).update(entry)
    return entries, records


def provenance(records: list[dict]) -> str:
    """One line naming each record: what was run, where, when, at which commit."""
    lines = []
    for r in records:
        load_avg = f", load average {r['load_average']}" if "load_average" in r else ""
        note = f"; {r['note']}" if r.get("note") else ""
        setting = f" ({r['setting']})" if r.get("setting") else ""
        lines.append(f"`{r['command']}`{setting} at commit {r['commit']}, {r['date']}, on {r['machine']}"
                     f"{load_avg}{note} ({r['file']})")
    return "Measured: " + "; ".join(lines) + "."


def number(value, digits: int = 1) -> str:
    """``value`` with at most ``digits`` decimals (fewer where the record holds fewer: no digits are invented) and
    thousands separators; text unchanged; empty where absent."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    recorded = len(repr(float(value)).partition(".")[2].rstrip("0")) if isinstance(value, float) else 0
    return f"{value:,.{min(digits, recorded)}f}"


def gigabytes(entry: dict, prefix: str = "") -> str:
    """The entry's peak above its inputs as recorded: GB, or MiB for records that hold MiB."""
    if f"{prefix}peak_above_inputs_gb" in entry:
        return f"{entry[f'{prefix}peak_above_inputs_gb']} GB"
    if f"{prefix}peak_above_inputs_mib" in entry:
        return f"{entry[f'{prefix}peak_above_inputs_mib'] / 1024:.2f} GB"
    return ""


def table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                      *("| " + " | ".join(row) + " |" for row in rows)])


def scale_metrics(entries: dict[str, dict], records: list[dict]) -> str:
    """Every default metric at 1,000 × 25,000, three metrics a row."""
    cells = [[f"`{name.removeprefix('scale_metric.')}`", number(e["cpu_seconds"], 2), gigabytes(e)]
             for name, e in entries.items()]
    per_row = 3
    height = -(-len(cells) // per_row)
    rows = [sum(([*cells[i + height * c], ""] if i + height * c < len(cells) else ["", "", "", ""]
                 for c in range(per_row)), [])[:-1] for i in range(height)]
    return table((["metric", "CPU-s", "peak above inputs", ""] * per_row)[:-1], rows)


def scale_methods(entries: dict[str, dict], records: list[dict]) -> str:
    """Fit + predict of the non-parametric methods and KCal at 1,000 × 25,000: the latest run, and the figures of
    the runs on the idle machine (two threads, and one core) beside them."""
    def idle(e: dict) -> str:
        if "idle_cpu_seconds" not in e:
            return ""
        wall = f" / {number(e['idle_seconds'])}" if "idle_seconds" in e else ""
        one_peak = gigabytes(e, "one_core_")
        one = (f" (one core {number(e['one_core_cpu_seconds'])} / {number(e['one_core_seconds'])}"
               f"{', ' + one_peak if one_peak else ''})" if "one_core_cpu_seconds" in e else "")
        return f"{number(e['idle_cpu_seconds'])}{wall}{one}, {gigabytes(e, 'idle_')}"

    rows = [[f"`{name.removeprefix('scale_method.')}`", number(e.get("cpu_seconds"), 1), number(e.get("seconds"), 1),
             gigabytes(e), idle(e)] for name, e in entries.items()]
    return table(["method", "CPU-s", "wall s", "peak above inputs", "idle machine: CPU-s / wall s, peak above inputs"],
                 rows)


def binning_scale(entries: dict[str, dict], records: list[dict]) -> str:
    """The binning and ensemble methods at 1,000 × 25,000: a column per method."""
    names = [f"`{name.removeprefix('scale_method.')}`" for name in entries]
    return table(["", *names], [["CPU s", *(number(e["cpu_seconds"], 2) for e in entries.values())],
                                ["peak above inputs (GB)", *(str(e["peak_above_inputs_gb"]) for e in entries.values())],
                                ["peak with inputs (GB)", *(str(e["peak_gb"]) for e in entries.values())]])


def scale_param(entries: dict[str, dict], records: list[dict]) -> str:
    """Fit + predict of the parametric methods at 1,000 × 25,000."""
    rows = [[f"`{e['method']}`", number(e["cpu_seconds"], 2), number(e["seconds"], 2), f"{e['peak_mb']:,} MB",
             number(e["test_nll"], 5)] for e in entries.values()]
    return table(["method", "CPU-s", "wall s", "traced peak beyond inputs", "test NLL"], rows)


def cifar_param(entries: dict[str, dict], records: list[dict]) -> str:
    """The default grids of the Dirichlet family and PL3 on the real CIFAR logits (one core): a row per network,
    a column per method; then single `dir_odir` fits."""
    fits = {name: e for name, e in entries.items() if "settings" in e}
    grids = {name: e for name, e in entries.items() if name not in fits}
    methods = list(dict.fromkeys(name.split(".")[2] for name in grids))
    networks = list(dict.fromkeys(name.split(".")[1] for name in grids))

    def cell(e: dict | None) -> str:
        if e is None:
            return ""
        nll = f", NLL {number(e['mean_test_nll'], 5)}" if "mean_test_nll" in e else ""
        note = f" ({e['note']})" if "note" in e else ""
        return number(e["largest_cpu_seconds_of_seeds_0_to_2"], 2) + note + nll

    rows = [[network, *(cell(grids.get(f"defaults.{network}.{m}")) for m in methods)] for network in networks]
    fit_rows = []
    for name, e in fits.items():
        nll = (f"{e['test_nll']} (uncal {e['uncal_test_nll']})" if "test_nll" in e
               else f"{e['last_iterate_test_nll']} (last iterate; {e['warning']})")
        cpu = number(e["cpu_seconds"], 2) + (f" ({e['iterations']:,} iterations)" if "iterations" in e else "")
        fit_rows.append([f"`{e['settings']}`", name.split(".")[0], cpu, nll])
    return (table(["CPU-s (largest of seeds 0–2), mean test NLL", *(f"`{m}`" for m in methods)], rows) + "\n\n" +
            table(["one `dir_odir` fit", "network", "CPU-s", "test NLL"], fit_rows))


def scale_jobs(entries: dict[str, dict], records: list[dict]) -> str:
    """Whole calibrate jobs of the full-matrix maps at 1,000 classes, alone on the machine."""
    rows = [[f"`{name}`", f"**{e['seconds']} s**", f"{e['user_cpu_seconds']:,} + {e['system_cpu_seconds']}",
             f"{e['peak_rss_gb']} GB"] for name, e in entries.items()]
    return table(["job", "wall", "CPU-s (user + system)", "peak RSS with inputs"], rows)


def each_metric(entries: dict[str, dict], records: list[dict]) -> str:
    """CPU seconds of ``evaluate`` for each id of ``metrics.each_25k_1000`` alone, as a sentence."""
    cpu = entries["metrics.each_25k_1000"]["cpu_seconds"]
    return ", ".join(f"`{metric}` {number(seconds, 2)}" for metric, seconds in cpu.items()) + " CPU-s."


def recommend_all(entries: dict[str, dict], records: list[dict]) -> str:
    """``calbench recommend --all-metrics`` on the three real sources: the command's cost, and each metric's
    resampling alone (without the work a source's metrics share)."""
    e = entries["intervals.recommend_all_metrics"]
    alone = ", ".join(f"`{m}` {number(s, 2)}" for m, s in e["per_metric_cpu_seconds"].items())
    return (f"**{number(e['cpu_seconds'], 1)} CPU-s**, {number(e['seconds'], 1)} s wall ({e['sources']} sources of "
            f"{e['rows']:,} rows, {e['methods']} methods, {e['seeds']} seeds, {e['metrics']} metrics; goal "
            f"{e['budget_wall_seconds']} s wall). Each metric resampled alone, CPU-s over the sources: {alone}.")


def scale_run(entries: dict[str, dict], records: list[dict]) -> str:
    """The whole config/scale.yaml run and its jobs (two at a time)."""
    run = records[0]["run"]
    head = (f"{run['jobs']} jobs, **{run['wall']} wall**, {run['user_cpu_seconds']:,} CPU-s user + "
            f"{run['system_cpu_seconds']} system, Snakemake's own peak {run['snakemake_peak_gb']} GB; disk "
            f"**{run['disk_gb']} GB** (dump {run['dump_gb']} GB, calibrated outputs {run['calibrated_gb']} GB, "
            f"calibrators {run['calibrators_gb']} GB).")
    rows = [[name if " " in name else f"`{name}`", e.get("seconds", ""), e.get("cpu_seconds", ""),
             e.get("peak_rss", ""), e.get("test_nll", "")] for name, e in entries.items()]
    return head + "\n\n" + table(["job", "wall s (two jobs at a time)", "CPU-s", "peak RSS", "test NLL, seeds 0 and 1"],
                                  rows)


def default_run(entries: dict[str, dict], records: list[dict]) -> str:
    """The default run's time per benchmarks/ folder (calbench.perf.run_breakdown), the longest first, beside the
    same run before the job runner (the second record); then one label-shift evaluate job of the run
    (calbench.perf.label_shift): now, before EM and the adapted metrics ran in compiled passes per redraw, and before
    its redraws were batched (the third to fifth records)."""
    now, before = records[0]["entries"], records[1]["entries"]
    job, job_batched, job_before = (r["entries"]["label_shift.evaluate_job"] for r in records[2:5])

    def total(record: dict) -> str:
        run = record["run"]
        jobs = sum(e["jobs"] for e in record["entries"].values())
        own = (f", of which Snakemake's own process {number(run['snakemake_cpu_seconds'], 1)}"
               if "snakemake_cpu_seconds" in run else "")
        return (f"{jobs} jobs with benchmark files, **{run['wall']} wall**, "
                f"{number(run['cpu_seconds'], 0)} CPU-s (user + system, every process of the run{own}), load average "
                f"{record['load_average']}")

    def cpu(e: dict | None) -> str:
        return "" if e is None else number(e["cpu_seconds"], 1) + ("" if e["cpu_source"] == "runner" else " *")

    def wall(e: dict | None) -> str:
        return "" if e is None else number(e["wall_seconds"], 1)

    rows = [[f"`{name}`", str((now.get(name) or before[name])["jobs"]), cpu(now.get(name)), wall(now.get(name)),
             cpu(before.get(name)), wall(before.get(name))] for name in [*now, *(n for n in before if n not in now)]]
    return (f"With the job runner: {total(records[0])}. Before it (commit {records[1]['commit']}): "
            f"{total(records[1])}.\n\n" +
            table(["benchmarks/ folder (rules)", "jobs", "CPU-s", "wall s (sum over jobs)", "before: CPU-s",
                   "before: wall s"], rows) +
            "\n\n\\* Snakemake's sampled `cpu_time`, which under-reads short jobs; the others: the job runner's exact "
            "figures for its forked children (without each job's own start-up, ~0.1 CPU-s).\n\n"
            f"One label-shift evaluate job (`{records[2]['command']}`, {job['sets']} sets × {job['redraws']:,} redraws "
            f"of {job['test_rows']:,} × {job['classes']}): **{number(job['cpu_seconds'], 2)} CPU-s** "
            f"({number(job['seconds'], 2)} s wall) at commit {records[2]['commit']}; "
            f"{number(job_batched['cpu_seconds'], 2)} CPU-s ({number(job_batched['seconds'], 2)} s) at "
            f"{records[3]['commit']}, before EM and the adapted metrics ran in compiled passes per redraw; "
            f"{number(job_before['cpu_seconds'], 2)} CPU-s ({number(job_before['seconds'], 2)} s) at "
            f"{records[4]['commit']}, before its redraws were batched.")


def peers(entries: dict[str, dict], records: list[dict]) -> str:
    """calbench beside probmetrics: CPU and wall seconds (best of the record's alternating runs), their ratios and
    the test NLL of both, one row per method and size."""
    rows = [[f"`{name.split('.')[1]}`", f"{e['classes']:,} × {e['n_cal']:,} / {e['n_test']:,}",
             f"{number(e['cpu'], 3)} / {number(e['seconds'], 3)}",
             f"{number(e['probmetrics_cpu'], 3)} / {number(e['probmetrics_seconds'], 3)}",
             f"**{e['probmetrics_cpu'] / e['cpu']:.1f}×** / {e['probmetrics_seconds'] / e['seconds']:.1f}×",
             f"{e['nll']} / {e['probmetrics_nll']}"]
            for name, e in entries.items() if "probmetrics_cpu" in e]
    return table(["method", "classes × cal / test rows", "calbench CPU-s / wall s", "probmetrics CPU-s / wall s",
                  "ratio CPU / wall", "test NLL calbench / probmetrics"], rows)


def conformal_metrics(entries: dict[str, dict], records: list[dict]) -> str:
    """Every conformal id of one test split, and the same ids on the tables' bootstrap resamples."""
    e = entries["conformal_metrics"]
    return table(["test split", "ids", "divisions", "CPU-s", "wall s",
                  f"CPU-s on {e['resamples']} resamples (all but `lac_cc`; `lac_cc`'s 14 ids)"],
                 [[f"{e['rows']:,} × {e['classes']}", str(e["ids"]), str(e["divisions"]),
                   f"**{number(e['cpu_seconds'], 2)}**", number(e["seconds"], 1),
                   f"{number(e['resampled_cpu_seconds'], 1)}; {number(e['resampled_lac_cc_cpu_seconds'], 1)}"]])


def load_ratios(entries: dict[str, dict], records: list[dict]) -> str:
    """The fits idle, beside two CPU-bound neighbour processes, and pinned to one core beside them
    (calbench.perf.load): seconds, the ratios, and the other work each run saw."""
    rows = []
    for e in entries.values():
        if "skipped" in e:
            continue
        runs = [e[phase] for phase in ("idle", "loaded", "pinned")]
        wall = "fit_seconds" if "fit_seconds" in runs[0] else "seconds"
        rows.append([e["path"], f"`{e['method']}`, {e['grid']}", *(number(r[wall], 1) for r in runs),
                     f"**{number(e['loaded_over_idle'], 2)}**", f"**{number(e['loaded_over_pinned'], 2)}**",
                     number(e["cpu_over_idle"], 2), " / ".join(number(r["other_cores"], 1) for r in runs)])
    return table(["path", "fit", "idle s", "loaded s", "pinned s", "loaded / idle", "loaded / pinned",
                  "CPU-s loaded / idle", "other work: cores busy (idle / loaded / pinned)"], rows)


class Block(NamedTuple):
    page: str
    #: The records shown (docs/measurements/NAME.json), merged by benchmark name in this order.
    records: tuple[str, ...]
    #: The table (and any text) from the merged entries and the records; their provenance is added below it.
    render: Callable[[dict[str, dict], list[dict]], str]

    def text(self) -> str:
        entries, records = merged(list(self.records))
        return self.render(entries, records) + "\n\n" + provenance(records)


#: Every generated block of measured figures: its name in the page → the page, its records and what renders it.
BLOCKS = {
    "scale-methods": Block("docs/runtime.md", ("scale_method", "scale_method_idle", "scale_method_one_core"),
                           scale_methods),
    "binning-scale": Block("docs/methods_newer.md", ("scale_method_binning",), binning_scale),
    "scale-param": Block("docs/runtime.md", ("scale_param_1000",), scale_param),
    "cifar-param": Block("docs/runtime.md", ("defaults_one_core", "dir_odir_fits"), cifar_param),
    "scale-jobs": Block("docs/runtime.md", ("scale_jobs",), scale_jobs),
    "scale-metrics": Block("docs/runtime.md", ("scale_metric",), scale_metrics),
    "each-metric": Block("docs/runtime.md", ("metrics_each",), each_metric),
    "scale-run": Block("docs/runtime.md", ("scale_run",), scale_run),
    "default-run": Block("docs/runtime.md", ("default_run", "default_run_before", "label_shift_job",
                                             "label_shift_job_batched", "label_shift_job_before"), default_run),
    "peers": Block("docs/runtime.md", ("peers",), peers),
    "conformal-metrics": Block("docs/metrics.md", ("conformal_metrics",), conformal_metrics),
    "load": Block("docs/runtime.md", ("load",), load_ratios),
    "recommend-all-metrics": Block("README.md", ("recommend_all_metrics",), recommend_all),
}


def pages() -> dict[Path, str]:
    """Every page with blocks of :data:`BLOCKS`, as it would be written."""
    out = {}
    for page in sorted({b.page for b in BLOCKS.values()}):
        path = REPO / page
        out[path] = replace_blocks(path, path.read_text(),
                                   {name: b.text() for name, b in BLOCKS.items() if b.page == page})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page's blocks are out of date")
    args = parser.parse_args()
    return max(write_or_check(path, text, args.check, "python scripts/docs_blocks.py")
               for path, text in pages().items())


if __name__ == "__main__":
    sys.exit(main())
