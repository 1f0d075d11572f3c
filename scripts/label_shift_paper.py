"""The paper-protocol tables of docs/label_shift.md: Alexandari, Kundaje & Shrikumar (ICML 2020) on the shared CIFAR
networks, as config/label_shift_paper.yaml declares it.

The paper reports, per dataset, shift and n, the median over trials of Δacc (the adapted accuracy minus the
uncalibrated model's, Tables 1-2 and the appendix) and of the weights' MSE, for EM, BBSE-soft and RLLS-soft on each
calibrator and BBSE-hard and RLLS-hard on the uncalibrated model; its unit of variation is the trial (a drawn set),
not a redraw of a set's rows.

* ``run`` computes every set of the config with the workflow's own pieces (the source's dump groups, its seeded
  split, ``build_method``, ``draw_rows``, ``evaluate`` with the set's adaptation inputs), without the tables' 1,000
  redraws of every set that the workflow's evaluate jobs add for their paired bootstrap and that cost about 150
  times the set itself (32 CPU-s a CIFAR-100 set): each source's per-set values, in the long table's form (source,
  method, seed, test_set, metric, value), go to ``results/label_shift_paper/{source}.csv``; a source already there
  is not recomputed (``--force``). Then ``summarise`` and ``render``.
* ``summarise`` reads those per-set tables (or a workflow run's ``results/tables/metrics_long.csv``) into
  scripts/label_shift_paper_summary.json: per source, shift and (estimator, calibrator), the medians over the sets
  (draws × seeds) as the paper's tables, Δacc against the calibrator's own unadapted outputs (mean over the sets,
  95 % percentile interval of a bootstrap over the sets within each seed) with
  :func:`calbench.report.label_shift_adapt.verdict`'s adapt-or-not, the share of sets EM collapsed, and what ran.
* ``render`` writes the generated block of docs/label_shift.md from that summary and the paper's own medians
  (scripts/label_shift_paper_numbers.json, taken from the authors' published per-trial results; its ``source`` says
  how). The tests check that the committed page is what ``render`` writes; they never run the protocol.

    python scripts/label_shift_paper.py run --config config/label_shift_paper.yaml      # all three steps
    python scripts/label_shift_paper.py summarise --long results/tables/metrics_long.csv --config ...
    python scripts/label_shift_paper.py render [--check]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SUMMARY = REPO / "scripts" / "label_shift_paper_summary.json"
PAPER = REPO / "scripts" / "label_shift_paper_numbers.json"
PAGE = REPO / "docs" / "label_shift.md"
BLOCK = "label_shift_paper"
#: The paper's pairs (estimator, calibrator): EM, BBSE-soft and RLLS-soft on every calibrator, the hard estimators
#: on the uncalibrated model.
PAIRS = [(e, m) for e in ("em", "bbse_soft", "rlls") for m in ("uncal", "ts", "nbvs", "bcts", "vs")] + \
    [("bbse", "uncal"), ("rlls_hard", "uncal")]
NAMES = {"em": "EM", "bbse_soft": "BBSE-soft", "rlls": "RLLS-soft", "bbse": "BBSE-hard", "rlls_hard": "RLLS-hard"}
#: Resamples of the bootstrap over the sets (Δacc against the own unadapted outputs).
SET_RESAMPLES = 1000


def _dataset_and_n(source: str) -> tuple[str, str, int]:
    """``cifar100_resnet-20_n10000`` → ("cifar100", "resnet-20", 10000)."""
    head, _, n = source.rpartition("_n")
    dataset, _, net = head.partition("_")
    return dataset, net, int(n)


def run_source(config: dict, source: str, cache_dir) -> tuple[list[tuple], float]:
    """(the long rows of every label-shifted set of ``source`` for every seed and method, the CPU seconds taken)."""
    from dataclasses import replace

    from threadpoolctl import threadpool_limits

    from calbench.data.label_shift import draw_rows, set_names
    from calbench.data.sources import build_groups
    from calbench.data.splits import split_pool
    from calbench.methods.registry import build_method, chain_settings
    from calbench.metrics.evaluation import evaluate
    from calbench.metrics.label_shift import LabelShiftInputs
    from calbench.scores import Scores

    start = time.process_time()
    entry = config["sources"][source]
    spec = entry["label_shift"]
    pool = build_groups(source, entry, config["seeds"], cache_dir)["all"]
    logits, labels = pool["logits"], pool["labels"]
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):  # as the evaluate job: small products, idle threads spin
        for seed in config["seeds"]:
            cal, test = split_pool(labels, seed, **entry["split"], logits=logits)
            for method in config["methods"]:
                model = build_method(method, chain_settings(method, config["method_settings"]), seed)
                model.fit(Scores(logits[cal]), labels[cal])
                probs, cal_probs = model.predict_proba(Scores(logits[test])), model.predict_proba(Scores(logits[cal]))
                base = LabelShiftInputs.from_calibration(cal_probs, labels[cal], None)
                for name in set_names(spec):
                    drawn, true_priors = draw_rows(name, labels[test], probs.shape[1], seed, spec.get("size"),
                                                   spec.get("tweak_class"))
                    values = evaluate(probs[drawn], labels[test][drawn], spec["metrics"], seed=seed,
                                      label_shift=replace(base, true_priors=true_priors),
                                      method=f"{method}, {source} seed {seed} ({name})")
                    rows += [(source, method, seed, name, m, v) for m, v in values.items()]
    return rows, time.process_time() - start


def run(config_path: Path, out: Path, patterns, force: bool) -> dict[str, float]:
    """Every source of the config matching ``patterns`` to ``out/{source}.csv`` (module docstring); the CPU seconds
    of each source computed."""
    import pandas as pd

    from calbench.config import load

    config = load(config_path)
    out.mkdir(parents=True, exist_ok=True)
    seconds = {}
    for source in config["sources"]:
        target = out / f"{source}.csv"
        if not any(fnmatch.fnmatch(source, p) for p in patterns) or (target.exists() and not force):
            continue
        rows, seconds[source] = run_source(config, source, config["downloads_dir"])
        frame = pd.DataFrame(rows, columns=["source", "method", "seed", "test_set", "metric", "value"])
        tmp = target.with_suffix(".tmp")
        frame.to_csv(tmp, index=False)
        tmp.replace(target)
        print(f"{source}: {len(rows)} values, {seconds[source]:.0f} CPU-s", flush=True)
    return seconds


def _own_interval(gain: np.ndarray, seeds: np.ndarray) -> tuple[float, float, float]:
    """(mean, 2.5 %, 97.5 %) of the per-set changes ``gain``: a bootstrap of the sets within each seed (a seed's
    calibrator is fitted once, its sets drawn independently), :data:`SET_RESAMPLES` resamples, fixed seed."""
    rng = np.random.default_rng(0)
    picks = [rng.choice(np.flatnonzero(seeds == s), size=(SET_RESAMPLES, int((seeds == s).sum())))
             for s in np.unique(seeds)]
    means = gain[np.concatenate(picks, axis=1)].mean(axis=1)
    return float(gain.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def summarise(long, config: dict, seconds: dict | None = None) -> dict:
    """The summary of the per-set values ``long`` (module docstring)."""
    from calbench.data.label_shift import parse_name
    from calbench.report.label_shift_adapt import verdict

    long = long[long["test_set"].str.startswith("prior/")]
    wide = long.pivot_table(index=["source", "method", "seed", "test_set"], columns="metric", values="value")
    uncal_acc = wide["acc"].xs("uncal", level="method")
    records, ran = [], {}
    for source, part in wide.groupby(level="source"):
        part = part.droplevel("source")
        sets = part.index.get_level_values("test_set")
        ran[source] = {"seeds": sorted(map(int, set(part.index.get_level_values("seed")))),
                       "draws": config["sources"][source]["label_shift"]["draws"], "sets": len(set(sets)),
                       "cpu_s": None if not seconds or source not in seconds else round(seconds[source])}
        kinds = np.array([parse_name(t)[:2] for t in sets], dtype=object)
        for kind, strength in sorted({tuple(k) for k in kinds}):
            mine = part[[tuple(k) == (kind, strength) for k in kinds]]
            for estimator, method in PAIRS:
                if f"acc.{estimator}" not in wide.columns or method not in set(mine.index.get_level_values("method")):
                    continue
                cell = mine.xs(method, level="method")
                adapted = cell[f"acc.{estimator}"]
                if adapted.isna().all():
                    continue
                gain = adapted - uncal_acc.loc[source].reindex(cell.index)
                own = _own_interval((adapted - cell["acc"]).to_numpy(), cell.index.get_level_values("seed").to_numpy())
                nll = (np.nan,) * 3
                if f"delta.nll.{estimator}" in cell:
                    nll = _own_interval(cell[f"delta.nll.{estimator}"].to_numpy(),
                                        cell.index.get_level_values("seed").to_numpy())
                collapsed = float(cell[f"collapse.{estimator}"].mean()) if f"collapse.{estimator}" in cell else 0.0
                records.append({
                    "source": source, "kind": kind, "strength": strength, "estimator": estimator, "method": method,
                    "sets": int(cell.shape[0]), "delta_acc": round(float(np.median(gain)), 5),
                    "weight_mse": round(float(np.median(cell[f"weight_mse.{estimator}"])), 5),
                    "own": [round(x, 5) for x in own], "verdict": verdict(own, nll, collapsed),
                    "collapsed": round(collapsed, 4)})
    return {"config": "config/label_shift_paper.yaml", "planned": list(config["sources"]), "ran": ran,
            "records": records}


def _paper(numbers, dataset, kind, strength, n, estimator, method):
    for r in numbers:
        if (r["dataset"], r["kind"], r["strength"], r["n"], r["estimator"], r["method"]) == \
                (dataset, kind, strength, n, estimator, method):
            return r
    return None


def _points(value) -> str:
    return "–" if value is None else f"{100 * value:+.2f}"


#: The columns of the generated tables: (title, the pairs whose best median is shown).
COLUMNS = [("EM · TS", [("em", "ts")]), ("EM · BCTS", [("em", "bcts")]), ("EM · VS", [("em", "vs")]),
           ("best BBSE-soft / RLLS-soft on a calibrator", [(e, m) for e in ("bbse_soft", "rlls")
                                                           for m in ("ts", "nbvs", "bcts", "vs")]),
           ("BBSE-hard · uncal", [("bbse", "uncal")])]


def _settings(summary: dict) -> dict:
    """(dataset, kind, strength, n) → network → (estimator, method) → record."""
    out = {}
    for r in summary["records"]:
        dataset, net, n = _dataset_and_n(r["source"])
        out.setdefault((dataset, r["kind"], r["strength"], n), {}).setdefault(net, {})[r["estimator"], r["method"]] = r
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[0][2], kv[0][3])))


def _findings(get: dict, value: str) -> tuple[bool, bool] | None:
    """(EM on BCTS/VS ≥ the best BBSE-soft/RLLS-soft on a calibrator, BCTS/VS ≥ TS under EM) in median ``value``
    (``delta_acc``: higher is better; ``weight_mse``: lower), ``get``: (estimator, method) → its value."""
    sign = 1 if value == "delta_acc" else -1
    ours = [sign * get[p] for p in (("em", "bcts"), ("em", "vs")) if p in get]
    rivals = [sign * get[p] for p in COLUMNS[3][1] if p in get]
    if not ours or not rivals or ("em", "ts") not in get:
        return None
    return max(ours) >= max(rivals), max(ours) >= sign * get["em", "ts"]


def _yes(flag) -> str:
    return "–" if flag is None else ("yes" if flag else "no")


def _table(settings: dict, nets: list, paper: dict, value: str, title: str) -> list[str]:
    fmt = _points if value == "delta_acc" else (lambda v: "–" if v is None else f"{v:.4f}")
    head = "| setting | " + " | ".join(c for c, _ in COLUMNS) + " | finding 1 | finding 2 |"
    lines = [title, "", head, "|---" * (len(COLUMNS) + 3) + "|"]
    counts = {}
    for (dataset, kind, strength, n), by_net in settings.items():
        shift = f"Dirichlet α = {strength:g}" if kind == "dirichlet" else f"tweak-one ρ = {strength:g}"
        theirs = {(r["estimator"], r["method"]): r[value] for r in paper["numbers"]
                  if (r["dataset"], r["kind"], r["strength"], r["n"]) == (dataset, kind, strength, n)}
        cells = []
        for _, pairs in COLUMNS:
            parts = []
            for net in nets:
                got = {p: by_net[net][p][value] for p in pairs if net in by_net and p in by_net[net]}
                best = (max if value == "delta_acc" else min)(got.values()) if got else None
                parts.append(fmt(best))
            known = [theirs[p] for p in pairs if p in theirs]
            paper_best = fmt((max if value == "delta_acc" else min)(known)) if known else "–"
            cells.append(" / ".join(parts) + f" ({paper_best})")
        found = []
        for k in (0, 1):
            flags = [_findings({p: r[value] for p, r in by_net[net].items()}, value) if net in by_net else None
                     for net in nets] + [_findings(theirs, value)]
            for who, f in zip([*nets, "paper"], flags):
                if f is not None:
                    counts.setdefault((k, who), []).append(f[k])
            found.append(" / ".join(_yes(f and f[k]) if f is not None else "–" for f in flags))
        lines.append(f"| {dataset} {shift}, n = {n:,} | " + " | ".join(cells) + " | " + " | ".join(found) + " |")
    lines.append("")
    for k, name in ((0, "finding 1"), (1, "finding 2")):
        lines.append(f"{name.capitalize()} holds in " + ", ".join(
            f"{sum(counts.get((k, who), []))} of {len(counts.get((k, who), []))} settings on {who}"
            for who in [*nets, "paper"]) + ".")
    return lines + [""]


def _verdicts(summary: dict) -> list[str]:
    """Per (estimator, calibrator): how many (source, shift) cells adaptation helped, left unclear, hurt, collapsed."""
    tally = {}
    for r in summary["records"]:
        t = tally.setdefault((r["estimator"], r["method"]), {"adapt": 0, "no clear change": 0, "do not adapt": 0,
                                                             "collapsed": 0})
        t[r["verdict"]] += 1
        t["collapsed"] += bool(r["collapsed"])
    lines = ["| estimator · calibrator | adapt | no clear change | do not adapt | a set collapsed |",
             "|---|---|---|---|---|"]
    lines += [f"| {NAMES[e]} · {m} | {t['adapt']} | {t['no clear change']} | {t['do not adapt']} | {t['collapsed']} |"
              for (e, m), t in sorted(tally.items(), key=lambda kv: PAIRS.index(kv[0]))]
    return lines + [""]


def block(summary: dict, paper: dict) -> str:
    """The generated block: what ran, the medians of Δacc and of the weights' MSE beside the paper's, where the two
    findings hold, and the adapt-or-not verdicts."""
    ran = summary["ran"]
    settings = _settings(summary)
    nets = sorted({_dataset_and_n(s)[1] for s in ran})
    missing = [s for s in summary.get("planned", []) if s not in ran]
    seconds = [r["cpu_s"] for r in ran.values() if r.get("cpu_s") is not None]
    lines = [f"What ran: {len(ran)} sources of `{summary['config']}` ("
             + "; ".join(f"`{s}` seeds {','.join(map(str, r['seeds']))}, {r['draws']} draws, {r['sets']} sets"
                         for s, r in ran.items())
             + ")" + (f"; not run: {', '.join(f'`{s}`' for s in missing)}" if missing else "")
             + (f". Computing the sets took {sum(seconds):,} CPU-s in all." if seconds else "."), "",
             f"Each cell: the median over a source's sets (draws × seeds) on {' / '.join(nets)}, the paper's median "
             "over its 100 trials in brackets; the estimator columns other than EM · TS/BCTS/VS show the best of "
             "the pairs they cover (for the paper as well). Finding 1: EM on BCTS or VS at least as good as the best "
             "BBSE-soft/RLLS-soft on a calibrator; finding 2: BCTS or VS at least as good as TS under EM (per "
             f"network, then the paper's).", ""]
    lines += _table(settings, nets, paper, "delta_acc", "**Δacc against the uncalibrated model** (points)")
    lines += _table(settings, nets, paper, "weight_mse", "**MSE of the estimated weights**")
    lines += ["**Adapt or not** (each calibrator against its own unadapted outputs: Δacc's 95 % interval over the "
              "sets, bootstrap within each seed; cells are (source, shift) pairs):", ""]
    return "\n".join(lines + _verdicts(summary)).rstrip("\n")


def _read_long(paths):
    import pandas as pd

    return pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)


def main() -> int:
    from calbench.perf.docs_blocks import replace_blocks, write_or_check

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    go = sub.add_parser("run", help="compute the config's sets, then summarise and render")
    go.add_argument("--config", type=Path, default=REPO / "config" / "label_shift_paper.yaml")
    go.add_argument("--out", type=Path, default=Path("results") / "label_shift_paper",
                    help="where the per-set tables go (default: results/label_shift_paper)")
    go.add_argument("--sources", nargs="+", default=["*"], help="only the sources matching these patterns")
    go.add_argument("--force", action="store_true", help="recompute sources whose table exists")
    again = sub.add_parser("summarise", help="record the summary of per-set tables, then render")
    again.add_argument("--long", type=Path, nargs="+", required=True,
                       help="per-set tables: results/label_shift_paper/*.csv or a run's tables/metrics_long.csv")
    again.add_argument("--config", type=Path, default=REPO / "config" / "label_shift_paper.yaml",
                       help="the config the sets were computed with (its draws)")
    render = sub.add_parser("render", help="write docs/label_shift.md's generated block from the summary")
    render.add_argument("--check", action="store_true", help="exit 1 when docs/label_shift.md is out of date")
    args = parser.parse_args()
    if args.action in ("run", "summarise"):
        from calbench.config import load

        config = load(args.config)
        cpu_file = (args.out if args.action == "run" else args.long[0].parent) / "cpu_seconds.json"
        if args.action == "run":
            computed = run(args.config, args.out, args.sources, args.force)
            # read after the run: two runs of disjoint --sources may share the folder
            seconds = {**(json.loads(cpu_file.read_text()) if cpu_file.exists() else {}), **computed}
            cpu_file.write_text(json.dumps(seconds, indent=1) + "\n")
            tables = sorted(p for p in args.out.glob("*.csv") if p.stem in config["sources"])
        else:
            seconds = json.loads(cpu_file.read_text()) if cpu_file.exists() else {}
            tables = args.long
        SUMMARY.write_text(json.dumps(summarise(_read_long(tables), config, seconds), indent=1) + "\n")
    text = replace_blocks(PAGE, PAGE.read_text(), {BLOCK: block(json.loads(SUMMARY.read_text()),
                                                                json.loads(PAPER.read_text()))})
    return write_or_check(PAGE, text, getattr(args, "check", False), "python scripts/label_shift_paper.py render")


if __name__ == "__main__":
    sys.exit(main())
