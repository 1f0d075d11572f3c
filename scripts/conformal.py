"""docs/conformal.md ("Calibration under conformal prediction"), generated from a measured run.

``run`` fits each calibrator of :data:`METHODS` on the four CIFAR networks of ../shared/data (5,000 calibration rows
per seed, the rest test, as config/cifar.yaml splits them; seeds 0 and 1), computes the conformal metrics of
:data:`METRICS` on the test rows (random divisions into conformal-calibration and evaluation halves,
calbench.metrics.conformal_eval), sweeps the temperature of the raw logits as Dabah & Tirer (ICML 2025) do, and
records everything with the command, machine and time in ``scripts/conformal_summary.json``, and the sweep's figure
in ``docs/figures/conformal_sweep.png``. ``render`` writes the page and draws the figure from the summary alone;
``--check`` exits 1 when the committed page is not what it would write (``tests/docs/test_conformal_page.py``):

    python scripts/conformal.py run       # the fits, metrics and sweep (about 5 CPU-min), then the page
    python scripts/conformal.py render    # the page from the recorded summary
    python scripts/conformal.py render --check
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from calbench.perf import provenance
from calbench.perf.docs_blocks import write_or_check

REPO = Path(__file__).resolve().parents[1]
SUMMARY = REPO / "scripts" / "conformal_summary.json"
PAGE = REPO / "docs" / "conformal.md"
FIGURE = REPO / "docs" / "figures" / "conformal_sweep.png"
SHARED = REPO.parent / "shared" / "data" / "logits"
NETWORKS = ("cifar10_resnet-20", "cifar10_vgg19_bn", "cifar100_resnet-20", "cifar100_vgg19_bn")
METHODS = ("uncal", "ts", "conf_ts", "ets", "vs", "dir_l2", "lece", "ts+lece", "irm", "spline_conf")
METRICS = ("set_size.aps.a10", "cc_gap.aps.a10", "set_size.raps.a10", "cc_gap.raps.a10", "coverage.aps.a10",
           "set_size.lac.a10", "nll")
SEEDS = (0, 1)
#: The sweep's temperatures (log-spaced), as Dabah & Tirer's Figure 1 spans them.
SWEEP = tuple(float(t) for t in np.round(np.geomspace(0.25, 8.0, 16), 4))


def _network(name):
    logits = np.load(SHARED / name / "scores.npy").astype(np.float64)
    labels = np.load(SHARED / name / "targets.npy").astype(np.int64)
    return logits, labels


def run() -> dict:
    """Fit, evaluate and sweep (module docstring); returns the summary."""
    from calbench.data.splits import split_pool
    from calbench.methods.registry import build_method
    from calbench.metrics import evaluate
    from calbench.scores import Scores
    from calbench.solvers.temperature_fit import softmax_scaled

    records, sweep = [], {}
    for name in NETWORKS:
        logits, labels = _network(name)
        for seed in SEEDS:
            cal, test = split_pool(labels, seed, cal_size=5000)
            for method in METHODS:
                start = time.process_time()
                settings = {part: {} for part in method.split("+")}
                estimator = build_method(method, settings, seed).fit(Scores(logits[cal]), labels[cal])
                probs = estimator.predict_proba(Scores(logits[test]))
                values = evaluate(probs, labels[test], METRICS, seed=seed)
                records += [{"network": name, "seed": seed, "method": method, "metric": m, "value": v}
                            for m, v in values.items()]
                print(f"{name} seed {seed} {method}: {time.process_time() - start:.1f} CPU-s", file=sys.stderr)
                if method == "ts" and seed == SEEDS[0]:
                    sweep[name] = {"ts_temperature": float(estimator.temperature_), "points": []}
        cal, test = split_pool(labels, SEEDS[0], cal_size=5000)
        for t in SWEEP:  # the raw logits at temperature t, no calibrator: Dabah & Tirer's Figure 1
            values = evaluate(softmax_scaled(logits[test], 1.0 / t), labels[test], METRICS[:4], seed=SEEDS[0])
            sweep[name]["points"].append({"temperature": t, **values})
    return {**provenance("python scripts/conformal.py run"), "seeds": list(SEEDS),
            "methods": list(METHODS), "metrics": list(METRICS), "records": records, "sweep": sweep}


def figure(summary: dict, path: Path) -> None:
    """Set size and class-conditional coverage gap of APS and RAPS against T, TS's temperature marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(NETWORKS), figsize=(4 * len(NETWORKS), 6), sharex=True)
    for column, name in enumerate(NETWORKS):
        points = summary["sweep"][name]["points"]
        t = [p["temperature"] for p in points]
        for row, kind in enumerate(("set_size", "cc_gap")):
            ax = axes[row, column]
            for construction in ("aps", "raps"):
                ax.plot(t, [p[f"{kind}.{construction}.a10"] for p in points], marker="o", ms=3,
                        label=construction.upper())
            ax.axvline(summary["sweep"][name]["ts_temperature"], color="red", ls="--", label="TS's T")
            ax.set_xscale("log")
            ax.set_xticks([0.25, 0.5, 1, 2, 4, 8], ["0.25", "0.5", "1", "2", "4", "8"])
            ax.minorticks_off()
            ax.grid(alpha=0.3)
            ax.set_title(name if row == 0 else "")
            ax.set_ylabel("mean set size" if kind == "set_size" else "class-cond. coverage gap (AvgCovGap)")
            if row == 1:
                ax.set_xlabel("temperature T")
    axes[0, 0].legend()
    fig.suptitle("α = 0.1: raw logits at temperature T (test halves calibrate, 20 divisions)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)


def _table(summary: dict) -> dict:
    """{(network, method, metric): (mean, std) over seeds}."""
    cells = {}
    for r in summary["records"]:
        cells.setdefault((r["network"], r["method"], r["metric"]), []).append(r["value"])
    return {k: (float(np.mean(v)), float(np.std(v))) for k, v in cells.items()}


def findings(summary: dict) -> dict:
    """The papers' claims, checked per network: {claim: [networks where it holds]}."""
    cells = _table(summary)
    mean = lambda n, m, metric: cells[(n, m, metric)][0]  # noqa: E731
    checks = {
        "TS enlarges APS sets (Xi et al. §3; Dabah & Tirer §3)":
            lambda n: mean(n, "ts", "set_size.aps.a10") > mean(n, "uncal", "set_size.aps.a10"),
        "TS enlarges RAPS sets": lambda n: mean(n, "ts", "set_size.raps.a10") > mean(n, "uncal", "set_size.raps.a10"),
        "TS lowers APS's class-conditional coverage gap (Dabah & Tirer §3)":
            lambda n: mean(n, "ts", "cc_gap.aps.a10") < mean(n, "uncal", "cc_gap.aps.a10"),
        "ConfTS gives smaller APS sets than TS (Xi et al. §5)":
            lambda n: mean(n, "conf_ts", "set_size.aps.a10") < mean(n, "ts", "set_size.aps.a10"),
        "ConfTS gives smaller RAPS sets than TS":
            lambda n: mean(n, "conf_ts", "set_size.raps.a10") < mean(n, "ts", "set_size.raps.a10"),
        "APS set size against T rises, then falls (Dabah & Tirer §4, the non-monotonic trend)":
            lambda n: 0 < int(np.argmax(_sweep(summary, n, "set_size.aps.a10"))) < len(SWEEP) - 1,
        "APS's AvgCovGap is lower at TS's T than at T = 1 (Dabah & Tirer §4)":
            lambda n: _at(summary, n, summary["sweep"][n]["ts_temperature"]) < _at(summary, n, 1.0),
    }
    return {claim: [n for n in NETWORKS if check(n)] for claim, check in checks.items()}


def _sweep(summary, network, metric):
    return [p[metric] for p in summary["sweep"][network]["points"]]


def _at(summary, network, temperature, metric="cc_gap.aps.a10"):
    """``metric`` of the sweep at ``temperature``, interpolated linearly in log T between its grid points."""
    return float(np.interp(np.log(temperature), np.log(SWEEP), _sweep(summary, network, metric)))


def page(summary: dict) -> str:
    """docs/conformal.md from ``summary``."""
    cells = _table(summary)
    shown = ("set_size.aps.a10", "cc_gap.aps.a10", "set_size.raps.a10", "cc_gap.raps.a10", "coverage.aps.a10")
    lines = ["# Calibration under conformal prediction", "",
             "<!-- Generated by scripts/conformal.py from scripts/conformal_summary.json: edit the script, not "
             "this page. -->", "",
             "Conformal prediction turns a classifier's probabilities into sets that hold the true label with "
             "probability ≥ 1 − α. calbench measures the sets of every calibrator's outputs: the metric ids "
             "`{coverage|coverage_gap|set_size|set_size_median|sscv|cc_gap|cc_gap_top}.{lac|lac_cc|aps|aps_nr|raps|"
             "raps_nr}.aNN` (`calbench metrics` lists them) are computed on the test split, divided at random into a "
             "half that calibrates the sets and a half that evaluates them, 20 times (`.calNN`, `.divN` change "
             "that); the calibrator's own calibration rows are never used. The constructions are LAC (Sadinle et "
             "al. 2019), its class-conditional (Mondrian) version `lac_cc`, APS (Romano et al. 2020) and RAPS "
             "(Angelopoulos et al. 2021, k_reg and λ chosen as that paper does), randomised and not (`_nr`); "
             "`cc_gap` and `cc_gap_top` are Dabah & Tirer's AvgCovGap and TopCovGap "
             "(src/calbench/metrics/conformal.py and conformal_eval.py cite the equations). The sets equal MAPIE's "
             "and TorchCP's on the same probabilities, rows and random draws (tests/unit/test_conformal_peers.py).", "",
             "`conf_ts` is ConfTS (Xi et al., TMLR 2025): a temperature fitted to the efficiency gap of APS sets "
             "instead of the log-loss, by the authors' descent (src/calbench/methods/conf_ts.py).", "",
             "## Under shift", "",
             "A conformal id in the config's `metrics` is computed on every shifted test set as on the clean one "
             "(docs/shift.md): the shifted set is divided into the same halves, so the sets are calibrated on "
             "shifted rows and the guarantee holds there; what the shift changes is their size and the coverage of "
             "each class, which the shift tables show. On label-shifted sets (docs/label_shift.md), list the id in "
             "the source's `label_shift.metrics`: `set_size.aps.a10` is the unadapted model's sets, "
             "`set_size.aps.a10.em` (or `.bbse_soft`, `.rlls`, `.oracle`) the sets of the probabilities re-weighted "
             "to the estimated priors; adaptation that finds the new priors shrinks the sets at the same coverage "
             "(tests/unit/test_conformal.py).", "",
             "## Reproduce", "", "```bash", "python scripts/conformal.py run      # fits, metrics, sweep; writes "
             "scripts/conformal_summary.json, the figure and this page", "python scripts/conformal.py render   "
             "# this page from the recorded summary", "```", "",
             f"Recorded: {summary['date']} on {summary['machine']} (commit {summary['commit']}); seeds "
             f"{', '.join(map(str, summary['seeds']))}, 5,000 calibration rows, the other 5,000 test rows.", "",
             "## Per network (α = 0.1; mean ± std over seeds)", ""]
    for name in NETWORKS:
        lines += [f"### {name}", "", "| method | " + " | ".join(f"`{m}`" for m in shown) + " |",
                  "|---|" + "---|" * len(shown)]
        for method in summary["methods"]:
            row = [f"{cells[(name, method, m)][0]:.3f} ± {cells[(name, method, m)][1]:.3f}" for m in shown]
            lines.append(f"| {method} | " + " | ".join(row) + " |")
        lines.append("")
    lines += ["## The papers' findings", "",
              "Neither paper evaluates these networks (chenyaofo's CIFAR ResNet-20 and VGG-19-BN): Dabah & Tirer use "
              "CIFAR-10 ResNet-34/50, CIFAR-100 ResNet-50/DenseNet-121 and ImageNet ResNet-152/ViT (the logit files "
              "their code lists, github.com/lahavdabah/TS4CP), Xi et al. ImageNet models (the model choices of "
              "their code, github.com/ml-stat-Sustech/Does-Confidence-Calibration-Improve-Conformal-Prediction; "
              "both found with the search tool), so their numbers are not set beside these; their claims are "
              "checked instead, on the means over the seeds (the tables' ± is the spread between them):", "",
              "| claim | holds on |", "|---|---|"]
    for claim, where in findings(summary).items():
        lines.append(f"| {claim} | {', '.join(where) if where else 'none'} ({len(where)}/{len(NETWORKS)}) |")
    lines += ["", "## The temperature sweep", "",
              "The raw logits divided by T, no calibrator, T from 0.25 to 8 (Dabah & Tirer, Figure 1): mean set "
              "size and AvgCovGap of APS and RAPS at α = 0.1; the dashed line marks the temperature TS fits.", "",
              "![set size and class-conditional coverage gap against T](figures/conformal_sweep.png)", "",
              "| network | TS's T | T of the smallest APS sets | T of the lowest APS AvgCovGap |", "|---|---|---|---|"]
    for name in NETWORKS:
        points = summary["sweep"][name]["points"]
        smallest = min(points, key=lambda p: p["set_size.aps.a10"])["temperature"]
        fairest = min(points, key=lambda p: p["cc_gap.aps.a10"])["temperature"]
        lines.append(f"| {name} | {summary['sweep'][name]['ts_temperature']:.2f} | {smallest:.2f} | {fairest:.2f} |")
    lines += ["", "## Which calibrator for a conformal user", ""] + advice(summary) + [""]
    return "\n".join(lines)


def advice(summary: dict) -> list[str]:
    """The recommendation, from the per-network means: the calibrator with the smallest mean rank of APS set size
    over the networks, and that of AvgCovGap."""
    cells = _table(summary)
    methods = summary["methods"]

    def mean_rank(metric):
        ranks = np.mean([np.argsort(np.argsort([cells[(n, m, metric)][0] for m in methods])) + 1
                         for n in NETWORKS], axis=0)
        return sorted(zip(ranks, methods))

    size, gap = mean_rank("set_size.aps.a10"), mean_rank("cc_gap.aps.a10")
    return [f"For the smallest adaptive sets (mean rank of APS set size over the four networks): `{size[0][1]}` "
            f"({size[0][0]:.1f}), then `{size[1][1]}` ({size[1][0]:.1f}); `ts` ranks "
            f"{dict((m, r) for r, m in size)['ts']:.1f}. For the most even coverage over classes (AvgCovGap): "
            f"`{gap[0][1]}` ({gap[0][0]:.1f}), then `{gap[1][1]}` ({gap[1][0]:.1f}). A conformal user who wants "
            "small sets should not deploy the log-loss temperature blindly; one who needs coverage per class "
            "should prefer `lac_cc` (Mondrian) sets, whose guarantee holds per class whatever the calibrator."]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("run", "render"))
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/conformal.md is out of date")
    args = parser.parse_args(argv)
    if args.action == "run":
        SUMMARY.write_text(json.dumps(run(), indent=1) + "\n")
    summary = json.loads(SUMMARY.read_text())
    if not args.check:
        figure(summary, FIGURE)
    return write_or_check(PAGE, page(summary), args.check, "python scripts/conformal.py render")


if __name__ == "__main__":
    sys.exit(main())
