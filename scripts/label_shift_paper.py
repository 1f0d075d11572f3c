"""The paper-protocol tables of docs/label_shift.md, from a run of config/label_shift_paper.yaml (or a slice of it).

Alexandari, Kundaje & Shrikumar (ICML 2020) report, per dataset, shift and n, the median over trials of Δacc (the
adapted accuracy minus the uncalibrated model's, Tables 1-2 and the appendix) and of the weights' MSE, for EM,
BBSE-soft and RLLS-soft on each calibrator and BBSE-hard and RLLS-hard on the uncalibrated model. ``summarise``
reads a finished run (``results/tables/metrics_long.csv`` and the metrics JSONs' resamples) into
scripts/label_shift_paper_summary.json: the same medians over the sets (draws × seeds), beside Δacc against each
calibrator's own unadapted outputs with the paired bootstrap's interval and the adapt-or-not verdict
(``calbench.report.label_shift_adapt``), and which sources, seeds and draws ran. ``render`` writes the generated
block of docs/label_shift.md from that summary and the paper's own medians (scripts/label_shift_paper_numbers.json,
taken from the authors' published per-trial results; its ``source`` says how). The tests check that the committed
page is what ``render`` writes; they never run the workflow.

    python scripts/label_shift_paper.py summarise --results results --config config/label_shift_paper.yaml
    python scripts/label_shift_paper.py render [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
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


def _dataset_and_n(source: str) -> tuple[str, str, int]:
    """``cifar100_resnet-20_n10000`` → ("cifar100", "resnet-20", 10000)."""
    head, _, n = source.rpartition("_n")
    dataset, _, net = head.partition("_")
    return dataset, net, int(n)


def summarise(results: Path, config_path: Path) -> dict:
    """The summary of a finished run (module docstring)."""
    import pandas as pd
    import yaml

    from calbench.data.label_shift import parse_name
    from calbench.report.label_shift import read_resamples
    from calbench.report.label_shift_adapt import adaptations

    config = yaml.safe_load(config_path.read_text())
    long = pd.read_csv(results / "tables" / "metrics_long.csv")
    long = long[long["test_set"].str.startswith("prior/")]
    resamples = read_resamples(sorted((results / "metrics").rglob("seed*.json")))
    adapted = {(a.source, a.method, a.estimator, a.kind, a.strength): a for a in adaptations(long, resamples)}
    wide = long.pivot_table(index=["source", "method", "seed", "test_set"], columns="metric", values="value")
    uncal_acc = wide["acc"].xs("uncal", level="method")
    ran = {}
    for source, _, seed, test_set in wide.index:
        ran.setdefault(source, {"seeds": set(), "sets": set()})
        ran[source]["seeds"].add(int(seed))
        ran[source]["sets"].add(test_set)
    records = []
    for source in sorted(ran):
        for kind, strength in sorted({parse_name(t)[:2] for t in ran[source]["sets"]}):
            sets = [t for t in ran[source]["sets"] if parse_name(t)[:2] == (kind, strength)]
            for estimator, method in PAIRS:
                if f"acc.{estimator}" not in wide.columns or (source, method) not in {k[:2] for k in wide.index}:
                    continue
                part = wide.loc[(source, method)]
                part = part[part.index.get_level_values("test_set").isin(sets)]
                gain = part[f"acc.{estimator}"] - uncal_acc.loc[source].reindex(part.index)
                a = adapted.get((source, method, estimator, kind, strength))
                records.append({
                    "source": source, "kind": kind, "strength": strength, "estimator": estimator, "method": method,
                    "sets": int(part.shape[0]), "delta_acc": round(float(np.median(gain)), 5),
                    "weight_mse": round(float(np.median(part[f"weight_mse.{estimator}"])), 5),
                    "own": None if a is None else [None if np.isnan(x) else round(float(x), 5) for x in a.delta_acc],
                    "verdict": None if a is None else a.verdict,
                    "collapsed": None if a is None or np.isnan(a.collapsed) else round(a.collapsed, 4)})
    draws = {s: e["label_shift"]["draws"] for s, e in config["sources"].items()}
    return {"config": "config/label_shift_paper.yaml", "ran": {s: {"seeds": sorted(r["seeds"]), "draws": draws.get(s),
                                                    "sets": len(r["sets"])} for s, r in ran.items()},
            "records": records}


def _paper(numbers, dataset, kind, strength, n, estimator, method):
    for r in numbers:
        if (r["dataset"], r["kind"], r["strength"], r["n"], r["estimator"], r["method"]) == \
                (dataset, kind, strength, n, estimator, method):
            return r
    return None


def _points(value) -> str:
    return "–" if value is None else f"{100 * value:+.2f}"


def _own(triple) -> str:
    if triple is None or triple[0] is None:
        return "–"
    if triple[1] is None:
        return _points(triple[0])
    return f"{_points(triple[0])} [{_points(triple[1])}, {_points(triple[2])}]"


def block(summary: dict, paper: dict) -> str:
    """The generated block: what ran, then one table per source and shift, ours beside the paper's."""
    lines = ["What ran (`" + summary["config"] + "` reduced to these sources; each set of n rows; the first four "
             "columns medians over the sets, as the paper's tables):", ""]
    lines += [f"* `{s}`: seeds {', '.join(map(str, r['seeds']))}, {r['draws']} draws per strength, {r['sets']} sets "
              "per seed and calibrator" for s, r in summary["ran"].items()]
    lines.append("")
    by_table = {}
    for r in summary["records"]:
        by_table.setdefault((r["source"], r["kind"], r["strength"]), []).append(r)
    for (source, kind, strength), records in by_table.items():
        dataset, net, n = _dataset_and_n(source)
        shift = f"Dirichlet α = {strength:g}" if kind == "dirichlet" else f"tweak-one ρ = {strength:g}"
        lines += [f"**{dataset} {net}, {shift}, n = {n:,}** ({records[0]['sets']} sets)", "",
                  "| estimator | calibrator | Δacc vs uncal, ours | paper | weight MSE, ours | paper | Δacc vs own "
                  "unadapted, mean [95 % interval] | verdict |", "|---|---|---|---|---|---|---|---|"]
        for r in records:
            theirs = _paper(paper["numbers"], dataset, kind, strength, n, r["estimator"], r["method"])
            verdict = r["verdict"] or "–"
            if r["collapsed"]:
                verdict += f" (collapsed {r['collapsed']:.0%})"
            lines.append(f"| {NAMES[r['estimator']]} | {r['method']} | {_points(r['delta_acc'])} | "
                         f"{_points(theirs and theirs['delta_acc'])} | {r['weight_mse']:.4f} | "
                         f"{'–' if theirs is None else format(theirs['weight_mse'], '.4f')} | {_own(r['own'])} | "
                         f"{verdict} |")
        lines += ["", *_findings(records), ""]
    return "\n".join(lines)


def _findings(records) -> list[str]:
    """Where the paper's two findings hold on this table (medians of Δacc vs uncal, and of the weights' MSE)."""
    get = {(r["estimator"], r["method"]): r for r in records}
    calibrated = [m for m in ("bcts", "vs") if ("em", m) in get]
    others = [get[e, m] for e in ("bbse_soft", "rlls") for m in ("ts", "nbvs", "bcts", "vs") if (e, m) in get]
    out = []
    if calibrated and others:
        em_best = max((get["em", m] for m in calibrated), key=lambda r: r["delta_acc"])
        rival = max(others, key=lambda r: r["delta_acc"])
        holds = em_best["delta_acc"] >= rival["delta_acc"]
        out.append(f"EM on BCTS/VS (best: {em_best['method']}, {_points(em_best['delta_acc'])}) "
                   f"{'≥' if holds else '<'} the best BBSE-soft/RLLS ({NAMES[rival['estimator']]} on "
                   f"{rival['method']}, {_points(rival['delta_acc'])}) in median Δacc: the finding "
                   f"{'holds' if holds else 'does not hold'} here.")
    if ("em", "ts") in get and calibrated:
        ts = get["em", "ts"]
        better = [m for m in calibrated if get["em", m]["weight_mse"] < ts["weight_mse"]]
        out.append(f"EM's weight MSE on BCTS/VS below TS's ({ts['weight_mse']:.4f}): "
                   f"{', '.join(better) if better else 'neither'}.")
    return out


def main() -> int:
    from calbench.perf.docs_blocks import replace_blocks, write_or_check

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    again = sub.add_parser("summarise", help="record the summary of a finished run, then render")
    again.add_argument("--results", type=Path, required=True, help="the run's results folder")
    again.add_argument("--config", type=Path, required=True,
                       help="the config the run used (config/label_shift_paper.yaml or a slice of it: its draws)")
    render = sub.add_parser("render", help="write docs/label_shift.md's generated block from the summary")
    render.add_argument("--check", action="store_true", help="exit 1 when docs/label_shift.md is out of date")
    args = parser.parse_args()
    if args.action == "summarise":
        SUMMARY.write_text(json.dumps(summarise(args.results, args.config), indent=1) + "\n")
    text = replace_blocks(PAGE, PAGE.read_text(), {BLOCK: block(json.loads(SUMMARY.read_text()),
                                                                json.loads(PAPER.read_text()))})
    return write_or_check(PAGE, text, getattr(args, "check", False), "python scripts/label_shift_paper.py render")


if __name__ == "__main__":
    sys.exit(main())
