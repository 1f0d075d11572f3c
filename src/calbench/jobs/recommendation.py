"""The recommendation of a finished run: per source and metric, the best method with its interval, the methods tied
with it and those worse, with the caveats the tables carry (:func:`recommend`). ``calbench recommend`` prints it
(:func:`render`) and ``calbench report`` puts it on the report's first page; both call :func:`recommend`.

The statistics are the tables' (:mod:`calbench.stats`: the same engine, unit and resample count, so that a number
has one interval everywhere). Each record says what the tables say beside the number: its scale (``scale``: the
tables show value × scale), whether ``uncal`` is in the best group (then no calibrator beats the uncalibrated model
on that metric, and none is offered as the winner), whether an ECE-type winner reads within the estimator's noise
floor (what a perfectly calibrated model reads at this test size, :mod:`calbench.stats.noise_floor`), and the
warnings its jobs raised (:mod:`calbench.report.warnings`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from calbench.jobs import paths
from calbench.stats.resampling import RESAMPLES

REFERENCE = "uncal"


@dataclass(frozen=True)
class Request:
    """What to recommend: the metrics (``None``: every metric of the run) and the statistics' settings."""

    metrics: tuple[str, ...] | None = ("nll",)
    level: float = 0.95
    alpha: float = 0.05
    resamples: int = RESAMPLES
    recompute: bool = False
    under_shift: bool = False
    under_label_shift: bool = False


@dataclass
class Recommendation:
    """The records of every source × metric × method, best first per source and metric (``recommend --json``);
    ``metrics`` in the order ranked, ``signed`` the metrics not ranked (0 is best)."""

    records: list[dict]
    metrics: list[str]
    signed: list[str] = field(default_factory=list)
    resamples: int = RESAMPLES


#: The fields of every record (``recommend --json``), in order, and what each holds: first those of
#: :class:`calbench.stats.paired.Verdict`, then those :meth:`_SourceRanker.records` adds. README.md's list and
#: ``recommend --json``'s help are written from these (scripts/code_blocks.py), and a test checks the records
#: against them, so that a field added to the records without a line here fails.
FIELDS = {
    "source": "the source",
    "metric": "the metric id ranked by",
    "method": "the method",
    "estimate": "its value, the mean over seeds (unscaled)",
    "low": "the interval's lower end (null without an interval)",
    "high": "the interval's upper end (null without an interval)",
    "best": "the best method of this source and metric",
    "tied_with_best": "a paired test against the best cannot tell them apart (Holm); null where untested",
    "p_value": "the Holm-adjusted bootstrap p-value against the best (null for the best and where untested)",
    "note": "why the interval is missing (empty where there is one)",
    "resamples": "the paired bootstrap resamples the interval and p-value rest on (0: none)",
    "unit": "what a resample draws: test rows, or pool rows where seeds re-split one pool",
    "scale": "the tables show value × scale (100 for an ECE)",
    "acc_change": "its accuracy minus uncal's (null where the run has no acc)",
    "calibrator": "the path of its saved calibrator (the first seed's)",
    "warnings": "the warnings its jobs raised: {seed, stage, category, message} each",
}
#: The fields only the best method's record has (the noise floor's three only for an ECE-type metric on the clean
#: test split).
BEST_FIELDS = {
    "acc_flag": '"raises" or "lowers" where its accuracy lies outside the interval of uncal\'s, else null',
    "uncal_in_best_group": "uncal is the best or tied with it: no calibrator beats the uncalibrated model here",
    "noise_floor": "what a perfectly calibrated model reads at this test size (the mean over label draws)",
    "noise_floor_high": "the upper end of that reading's central 95 % range",
    "within_noise_floor": "the best reads at or below noise_floor_high",
}


def metric_order(metric_id: str) -> tuple[int, str]:
    """The order docs/choosing.md advises: the proper scores (NLL, Brier) first, then the calibration-error
    estimators, then accuracy and the rest."""
    from calbench.metrics import lookup
    from calbench.stats.noise_floor import is_calibration_error

    family, _ = lookup(metric_id)
    if metric_id.split(".")[0] in ("nll", "brier"):
        return (0 if metric_id.startswith("nll") else 1, metric_id)
    if is_calibration_error(metric_id):
        return (2, metric_id)
    return (3 if metric_id.split(".")[0] == "acc" else 4, metric_id)


def adapted_metric(metric: str) -> str:
    """``metric`` itself where it is an adaptation metric (``nll.bbse``, ``prior_mse.em``), else ``metric.em``: the
    metric ``--under-label-shift`` ranks by (docs/label_shift.md)."""
    from calbench.metrics import lookup

    return metric if lookup(metric)[0].needs_label_shift else f"{metric}.em"


def under(results: Path, template: str, **fields) -> Path:
    """The workflow's output path ``template`` (:mod:`calbench.jobs.paths`) in the results directory ``results``."""
    return Path(results) / template.removeprefix("results/").format(**fields)


def recommend(results, request: Request, progress: Callable[[str], None] | None = None) -> Recommendation:
    """The recommendation records of the finished run in ``results`` (module docstring); ``progress`` receives one
    line per source and metric as it is ranked."""
    import pandas as pd

    from calbench.metrics import lookup
    from calbench.report.label_shift import label_shift_rows
    from calbench.report.shift import ranking_rows

    results = Path(results)
    table = under(results, paths.METRICS_LONG)
    if not table.is_file():
        raise FileNotFoundError(f"{table}: not found; run the workflow first (snakemake --cores N), or pass the "
                                "results directory of a finished run")
    everything = pd.read_csv(table)
    long = label_shift_rows(everything) if request.under_label_shift else ranking_rows(everything, request.under_shift)
    available = sorted(m for m in long["metric"].unique() if not m.endswith((".ci_low", ".ci_high")))
    wanted = available if request.metrics is None else [
        adapted_metric(m) if request.under_label_shift else m for m in request.metrics]
    for metric in wanted:
        if metric not in available:
            raise ValueError(f"metric {metric!r} is not in {table}; it holds {', '.join(available)} "
                             "(`calbench metrics` explains each id)")
    wanted = sorted(wanted, key=metric_order)
    signed = [m for m in wanted if lookup(m)[0].signed]
    if signed and request.metrics is not None and len(signed) == len(wanted):
        raise ValueError(f"{signed[0]} is signed (0 is best): recommend ranks methods in one direction; use its "
                         "unsigned parts (e.g. sce.conf.em15.over and .under) or an ECE")
    wanted = [m for m in wanted if m not in signed]
    from calbench.report.warnings import read_warnings

    warned = read_warnings(results)
    records = []
    sources = sorted(long["source"].unique())
    for k, source in enumerate(sources):
        rows = long[long["source"] == source]
        ranker = _SourceRanker(source, rows, everything, results, request, wanted)
        for metric in wanted:
            if progress:
                progress(f"recommend: {metric} on {source} (source {k + 1}/{len(sources)})")
            records += ranker.records(metric, warned)
    return Recommendation(records, wanted, signed, RESAMPLES if request.under_label_shift else request.resamples)


class _SourceRanker:
    """The records of one source, metric by metric, from the engine's draws (its outputs read once). On the clean
    test outputs, the ``wanted`` metrics (and ``acc``, for the accuracy flag) are resampled in one engine call, as
    the aggregate job resamples a source's metrics: their per-row and per-bin work and the row counts are shared,
    and the budget of recomputing estimators without a row-weighted form is the source's, so that the intervals
    are those of ``intervals.csv``."""

    def __init__(self, source: str, rows, everything, results: Path, request: Request, wanted=()):
        self.source, self.rows, self.everything, self.results, self.request = source, rows, everything, results, \
            request
        self.methods = list(dict.fromkeys(rows["method"]))
        self.seeds = sorted(int(s) for s in rows["seed"].unique())
        self._cache: dict = {}
        has_acc = "acc" in set(rows["metric"])
        self._batch = list(dict.fromkeys([*wanted, *(["acc"] if has_acc else [])]))
        self._drawn = None
        self._floors: dict = {}
        self.accuracy = self._verdicts("acc") if has_acc else {}

    def load(self, method: str, seed: int):
        from calbench.data.store import read_calibrated

        if (method, seed) not in self._cache:
            path = under(self.results, paths.CALIBRATED, source=self.source, method=method, seed=seed)
            self._cache[method, seed] = read_calibrated(path, "test") if path.is_file() else None
        return self._cache[method, seed]

    def draws(self, metric: str):
        """The engine's draws of ``metric`` on this source (clean, under shift or under label shift)."""
        from calbench.report.label_shift import label_shift_draws, read_resamples
        from calbench.stats.draws import estimates_only, source_draws

        request, rows = self.request, self.rows
        if request.under_label_shift:  # the evaluate jobs' resamples of the label-shifted sets
            files = [under(self.results, paths.METRICS, source=self.source, method=m, seed=s)
                     for m in self.methods for s in self.seeds]
            return label_shift_draws(self.source, rows, [metric], read_resamples([f for f in files if f.is_file()]))
        if request.under_shift:
            found = _shifted_draws(self.source, self.everything, [metric], self.results, request)
            return found or estimates_only(self.source, rows, [metric], "the saved calibrators, calibrated test "
                                           "outputs or shifted sets are missing (rerun the workflow)")
        if not all(self.load(m, s) is not None for m in self.methods for s in self.seeds):
            return estimates_only(self.source, rows, [metric], "the calibrated test outputs are missing (rerun the "
                                                               "workflow)")
        if self._drawn is None or metric not in self._drawn.estimates:
            values = rows.set_index(["method", "seed", "metric"])["value"].to_dict()
            batch = self._batch if metric in self._batch else [metric]
            self._drawn = source_draws(self.source, self.seeds, self.methods, batch, self.load, request.resamples,
                                       recompute=request.recompute,
                                       known=lambda m, s, metric: values.get((m, s, metric)))
        return self._drawn

    def _verdicts(self, metric: str) -> dict:
        from calbench.stats.paired import compare

        return {v.method: v for v in compare(self.draws(metric), metric, self.request.level, self.request.alpha)}

    def records(self, metric: str, warned: list[dict]) -> list[dict]:
        """Every method's record of ``metric``, best first, with the caveats (module docstring)."""
        from calbench.metrics import lookup
        from calbench.stats.paired import compare

        family, _ = lookup(metric)
        verdicts = compare(self.draws(metric), metric, self.request.level, self.request.alpha)
        reference = self.accuracy.get(REFERENCE)
        best_group = [v.method for v in verdicts if v.tied_with_best]
        out = []
        for rank, verdict in enumerate(verdicts):
            record = {k: _plain(v) for k, v in verdict.record().items()}
            own = self.accuracy.get(verdict.method)
            record["scale"] = family.scale
            record["acc_change"] = _plain(own.estimate - reference.estimate) if own and reference else None
            record["calibrator"] = str(under(self.results, paths.CALIBRATOR, source=verdict.source,
                                             method=verdict.method, seed=self.seeds[0]))
            record["warnings"] = [{k: w[k] for k in ("seed", "stage", "category", "message")}
                                  for w in warned if w["source"] == self.source and w["method"] == verdict.method]
            if rank == 0:
                record["acc_flag"] = accuracy_flag(own, reference)
                record["uncal_in_best_group"] = REFERENCE in best_group
                record.update(self._floor(metric, verdict.estimate))
            out.append(record)
        return out

    def _floor(self, metric: str, estimate: float) -> dict:
        """``noise_floor``, ``noise_floor_high`` and ``within_noise_floor`` of an ECE-type winner (clean test
        outputs only); empty otherwise."""
        from calbench.stats.noise_floor import floor_interval, is_calibration_error, noise_floors, reference_probs

        if not is_calibration_error(metric) or self.request.under_shift or self.request.under_label_shift:
            return {}
        if metric not in self._floors:  # the floors of the source's metrics at once (shared intermediates)
            probs = reference_probs(self.methods, self.seeds, self.load)
            if not probs:
                return {}
            batch = [m for m in self._batch if is_calibration_error(m)] if metric in self._batch else [metric]
            self._floors.update(noise_floors(batch, probs))
        mean, std = self._floors[metric]
        high = floor_interval(mean, std)[1]
        return {"noise_floor": mean, "noise_floor_high": high, "within_noise_floor": bool(estimate <= high)}


def _shifted_draws(source: str, everything, metrics, results: Path, request: Request):
    """The paired bootstrap of the mean over ``source``'s shifted test sets (the shift tables' ``under shift``
    column, :func:`calbench.report.shift.column_draws`): each saved calibrator applied to each shifted set; None
    where a calibrated output, saved calibrator or the shifted sets' file is missing."""
    from calbench.jobs.shift import shifted_outputs
    from calbench.report.shift import UNDER_SHIFT, column_draws, with_severity

    rows = with_severity(everything[everything["source"] == source])
    rows = rows[rows["metric"].isin(metrics)]
    keys = [(m, int(s)) for m, s in rows[["method", "seed"]].drop_duplicates().itertuples(index=False)]
    outputs = {(source, m, s): tuple(under(results, template, source=source, method=m, seed=s)
                                     for template in (paths.METRICS, paths.CALIBRATED, paths.CALIBRATOR))
               for m, s in keys}
    shifts = under(results, paths.SHIFTS, source=source)
    if not shifts.is_file() or not all(path.is_file() for files in outputs.values() for path in files):
        return None
    load = shifted_outputs({key: files[1:] for key, files in outputs.items()}, {source: str(shifts)})
    return column_draws(source, rows, metrics, load, request.resamples, [UNDER_SHIFT],
                        request.recompute)[UNDER_SHIFT]


def accuracy_flag(own, reference) -> str | None:
    """``"raises"`` or ``"lowers"`` where the method's accuracy lies outside uncal's accuracy interval, else
    None (also when either has no interval)."""
    if own is None or reference is None or not np.isfinite(reference.low):
        return None
    if own.estimate > reference.high:
        return "raises"
    if own.estimate < reference.low:
        return "lowers"
    return None


def _plain(value):
    """JSON-ready: NaN → None, numpy scalars → Python."""
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value.item() if isinstance(value, np.generic) else value


def _header(result: Recommendation, request: Request) -> list[str]:
    """What the numbers are: the interval, the tests, the unit, the ranking's test sets."""
    units = sorted({r["unit"] for r in result.records if r.get("unit")}) or ["test rows"]
    lines = [f"best method per source; [interval]: {request.level:.0%} percentile interval from {result.resamples} "
             f"paired bootstrap resamples (resampling unit: {', '.join(units)}; the same for every method; seeds "
             "pooled; shifted by the bootstrap's estimate of bias, never below 0 for an ECE); 'tied with the best': a "
             f"paired bootstrap test against the best cannot reject 'no difference' at family-wise α = "
             f"{request.alpha:g} (Holm-adjusted p shown; p < {1 / result.resamples:.2g} is below what "
             f"{result.resamples} resamples resolve), 'worse': it can"]
    if request.under_shift:
        lines.append("ranked by the mean over the shifted test sets (docs/shift.md), the shift tables' 'under shift' "
                     "column: each saved calibrator applied to each shifted set, a shifted copy of a test row "
                     "resampled with the row")
    if request.under_label_shift:
        lines.append(f"ranked by the mean over the label-shifted test sets of each seed (docs/label_shift.md), a "
                     f"metric given without an adaptation suffix taken after EM (nll → nll.em); the {RESAMPLES} "
                     "resamples of every set's rows (drawn within classes, the priors re-estimated on each) are the "
                     "evaluate jobs', so --resamples and --recompute do not apply")
    return lines


def render(result: Recommendation, request: Request) -> str:
    """The recommendation as ``calbench recommend`` prints it: per metric (in :func:`metric_order`) and source,
    the best method, the methods tied with it and those worse, and the caveats (module docstring)."""
    from calbench.metrics import lookup

    lines = _header(result, request)
    for metric in result.metrics:
        family, _ = lookup(metric)
        direction = "higher" if family.higher_is_better else "lower"
        lines += ["", f"{metric}{scale_note(family)}, {direction} is better, values as in the tables"]
        for source in dict.fromkeys(r["source"] for r in result.records if r["metric"] == metric):
            lines += _source_lines([r for r in result.records if r["metric"] == metric and r["source"] == source],
                                   family, result.resamples)
    if result.signed:
        lines.append(f"\nnot ranked, signed (0 is best; docs/metrics.md): {', '.join(result.signed)}")
    return "\n".join(lines) + "\n"


def _source_lines(records: list[dict], family, resamples: int) -> list[str]:
    """The best method with its interval; the methods tied with it and those worse (with adjusted p-values);
    the caveats; its saved calibrator where it beats the uncalibrated model."""
    from calbench.stats.paired import format_p

    best = records[0]
    line = f"{best['source']}: {best['method']} {shown(family, best['estimate'])}{_interval(family, best)}"
    if best["low"] is None:
        line += f" (no interval: {best['note']})"
    lines = [line + ("; the only method" if len(records) == 1 else "")]
    others = records[1:]
    tested = [r for r in others if r["tied_with_best"] is not None]
    untested = [r for r in others if r["tied_with_best"] is None]
    listed = lambda group: ", ".join(f"{r['method']} {shown(family, r['estimate'])}{_interval(family, r)} "  # noqa: E731
                                     f"({format_p(r['p_value'], resamples)})" for r in group) or "none"
    if tested:
        lines.append(f"    tied with the best: {listed([r for r in tested if r['tied_with_best']])}")
        lines.append(f"    worse than {best['method']}: {listed([r for r in tested if not r['tied_with_best']])}")
    if untested:
        lines.append("    untested: " + ", ".join(f"{r['method']} {shown(family, r['estimate'])}"
                                                  f"{_interval(family, r)}" for r in untested)
                     + "".join(f" ({note})" for note in dict.fromkeys(r.get("note") for r in untested) if note))
    if best.get("within_noise_floor"):
        lines.append(f"    note: {best['method']} reads {shown(family, best['estimate'])}, within the noise floor "
                     f"(a perfectly calibrated model reads {shown(family, best['noise_floor'])}, up to "
                     f"{shown(family, best['noise_floor_high'])}): indistinguishable from a perfectly calibrated "
                     "model at this test size")
    if best.get("acc_flag"):
        lines.append(f"    note: {best['method']} {best['acc_flag']} accuracy by {100 * abs(best['acc_change']):.1f} "
                     "points, beyond the interval of uncal's accuracy: it changes the classifier's decisions, not "
                     "only its probabilities (check that this is wanted before deploying it)")
    grouped: dict[tuple, dict] = {}  # the winner's and its ties' warnings, each once with its methods and seeds
    for r in [best] + [r for r in tested if r["tied_with_best"]]:
        for w in r.get("warnings", []):
            entry = grouped.setdefault((w["stage"], w["category"], w["message"]), {"methods": {}, "seeds": {}})
            entry["methods"][r["method"]], entry["seeds"][w["seed"]] = None, None
    lines += [f"    warning ({', '.join(e['methods'])}; seed{'s' * (len(e['seeds']) > 1)} "
              f"{', '.join(map(str, sorted(e['seeds'])))}), {stage} job: {category}: {message}"
              for (stage, category, message), e in grouped.items()]
    if best.get("uncal_in_best_group"):
        lines.append(f"    no method beats the uncalibrated model on {best['metric']} here: uncal is in the best "
                     "group, so no calibrator is recommended by this metric")
        return lines
    saved = Path(best["calibrator"])
    lines.append(f"    saved calibrator: {saved}" + ("" if saved.is_file() else " (missing: rerun the workflow)"))
    return lines


def shown(family, value) -> str:
    """``value`` as the tables show the metric (e.g. ECE ×100, the table's decimals)."""
    return f"{value * family.scale:.{family.decimals}f}" if value is not None and np.isfinite(value) else "n/a"


def _interval(family, record) -> str:
    """`` [low, high]`` of ``record`` as the tables show the metric; empty without one."""
    if record["low"] is None:
        return ""
    return f" [{shown(family, record['low'])}, {shown(family, record['high'])}]"


def scale_note(family) -> str:
    """`` (×100)`` where the tables show the metric scaled, else empty."""
    return "" if family.scale == 1 else f" (×{family.scale:g})"
