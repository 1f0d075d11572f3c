"""docs/choosing.md ("Which method should I use?"), generated from measured runs.

``run`` measures: it puts the inputs of ``scripts/choosing.yaml`` in a work folder (the real CIFAR logits of
../shared/data, linked; a scikit-learn classifier's out-of-fold logits on the breast-cancer table that ships with
scikit-learn, written), runs the workflow there and records ``calbench recommend --all-metrics --json`` of the
result (the paired bootstrap of :mod:`calbench.stats`), with the command, machine and time, in
``scripts/choosing_summary.json``. ``render`` writes the page from that summary alone; ``--check`` exits 1 when
the committed page is not what it would write (``tests/docs/test_choosing_page.py``):

    python scripts/choosing.py run --work /tmp/choosing    # the runs (CIFAR + tabular), then the page
    python scripts/choosing.py render                      # the page from the recorded summary
    python scripts/choosing.py render --check              # exit 1 when docs/choosing.md is out of date

The advice is chosen on the ``CHOOSE`` sources and judged on the ``HELD_OUT`` ones, whose numbers the choice
never reads (:func:`choose`, then :func:`judge`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from calbench.perf import machine
from calbench.perf.docs_blocks import write_or_check

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "scripts" / "choosing.yaml"
SUMMARY = REPO / "scripts" / "choosing_summary.json"
PAGE = REPO / "docs" / "choosing.md"
SHARED = REPO.parent / "shared" / "data"

#: The sources the advice is chosen on: one CIFAR-10 and one CIFAR-100 network, and the tabular classifier.
CHOOSE = ("cifar10_resnet-20", "cifar100_vgg19_bn", "breast_cancer_hgb")
#: The sources it is judged on: the other two networks of ../shared/data and another tabular classifier.
HELD_OUT = ("cifar10_vgg19_bn", "cifar100_resnet-20", "breast_cancer_nb")
#: The metric the advice ranks by (a proper scoring rule), and the ones shown beside it.
PRIMARY = "nll"
SHOWN = ("nll", "ece.conf.em15.l1", "acc")
RESAMPLES = 1000
#: The summary's fields that describe the workflow run (kept by ``summarise``).
HEAD = ("command", "commit", "machine", "date", "workflow_wall_s", "workflow_cpu_s")
#: Each tabular source: the scikit-learn model and how its out-of-fold scores become logits.
#: What each source is (the page's first table).
DESCRIBED = {
    "cifar10_resnet-20": "image: CIFAR-10, pretrained ResNet-20 (chenyaofo/pytorch-cifar-models)",
    "cifar10_vgg19_bn": "image: CIFAR-10, pretrained VGG-19-BN (same)",
    "cifar100_resnet-20": "image: CIFAR-100, pretrained ResNet-20 (same)",
    "cifar100_vgg19_bn": "image: CIFAR-100, pretrained VGG-19-BN (same)",
    "breast_cancer_hgb": "tabular: scikit-learn's breast-cancer table, gradient-boosted trees, out-of-fold",
    "breast_cancer_nb": "tabular: the same table, Gaussian naive Bayes, out-of-fold",
}
TABULAR = {
    "breast_cancer_hgb": "HistGradientBoostingClassifier: [0, decision_function] (its log-odds)",
    "breast_cancer_nb": "GaussianNB: predict_log_proba (log-probabilities)",
}


def tabular_logits(name: str):
    """Out-of-fold logits and labels of the tabular source ``name``: 5-fold stratified cross-validated scores of
    a scikit-learn model on ``load_breast_cancer`` (569 rows, 30 features, 2 classes), so that no row is scored by
    a model that saw it."""
    import numpy as np
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.naive_bayes import GaussianNB

    x, y = load_breast_cancer(return_X_y=True)
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    if name == "breast_cancer_hgb":
        raw = cross_val_predict(HistGradientBoostingClassifier(random_state=0), x, y, cv=folds,
                                method="decision_function")
        logits = np.stack([np.zeros_like(raw), raw], axis=1)
    elif name == "breast_cancer_nb":
        logits = cross_val_predict(GaussianNB(), x, y, cv=folds, method="predict_log_proba")
    else:
        raise ValueError(f"unknown tabular source {name!r}; expected one of {', '.join(TABULAR)}")
    return logits.astype(np.float64), y.astype(np.int64)


def prepare(work: Path) -> None:
    """The inputs ``scripts/choosing.yaml`` names, relative to ``work``."""
    import numpy as np

    if not (SHARED / "logits").is_dir():
        raise FileNotFoundError(f"{SHARED / 'logits'}: not found; the CIFAR logits of ../shared/data are needed "
                                "(PROVENANCE.md there says where they come from)")
    work.mkdir(parents=True, exist_ok=True)
    link = work / "data"
    if not link.exists():
        link.symlink_to(SHARED.resolve(), target_is_directory=True)
    for name in TABULAR:
        folder = work / "tabular" / name
        folder.mkdir(parents=True, exist_ok=True)
        logits, labels = tabular_logits(name)
        np.save(folder / "logits.npy", logits)
        np.save(folder / "labels.npy", labels)


def sources(work: Path) -> dict:
    """Classes, rows and calibration rows per seed of every source of ``scripts/choosing.yaml`` (inputs in
    ``work``)."""
    import numpy as np
    import yaml

    config = yaml.safe_load(CONFIG.read_text())["sources"]
    out = {}
    for name, entry in config.items():
        labels = np.load(work / entry["files"]["labels"])
        out[name] = {"classes": int(labels.max()) + 1, "rows": int(labels.size),
                     "cal_rows": entry["split"]["cal_size"]}
    return out


def measure(work: Path, cores: str) -> dict:
    """Run the workflow of ``scripts/choosing.yaml`` in ``work``: how, where and how long (the summary's head)."""
    prepare(work)
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    workflow = [snakemake, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--configfile", str(CONFIG),
                "--cores", str(cores)]
    start, cpu_start = time.time(), os.times()
    subprocess.run(workflow, cwd=work, check=True)
    wall, cpu = time.time() - start, os.times()
    cpu_s = (cpu.children_user - cpu_start.children_user) + (cpu.children_system - cpu_start.children_system)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return {"command": f"python scripts/choosing.py run --work {shlex.quote(str(work))} --cores {cores}",
            "commit": commit, "machine": machine(), "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "workflow_wall_s": round(wall), "workflow_cpu_s": round(cpu_s)}


def summarise(work: Path, head: dict) -> dict:
    """The summary of the finished run in ``work`` measured as ``head`` says: ``calbench recommend --json`` of
    every metric the page shows (less the calibrators' paths; ``--recompute``: binned ECE on scores with ties
    of different outcomes has no row-weighted form and is recomputed on each resample), and the sources."""
    import yaml

    config = yaml.safe_load(CONFIG.read_text())
    records, start = [], time.time()
    for metric in SHOWN:
        command = [sys.executable, "-m", "calbench", "recommend", str(work / "results"), "--metric", metric,
                   "--json", "--recompute", "--resamples", str(RESAMPLES)]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        records += [{k: v for k, v in r.items() if k != "calibrator"} for r in json.loads(out)]
    return {**head, "recommend": f"calbench recommend --metric M --json --recompute --resamples {RESAMPLES}",
            "recommend_wall_s": round(time.time() - start), "resamples": RESAMPLES, "seeds": config["seeds"],
            "methods": config["methods"], "sources": sources(work), "records": records}


def by_source(records: list[dict], metric: str, sources) -> dict[str, list[dict]]:
    """``metric``'s records of each of ``sources``, best first (as ``recommend --json`` orders them)."""
    return {s: [r for r in records if r["metric"] == metric and r["source"] == s] for s in sources}


def choose(records: list[dict]) -> dict:
    """The advice, from the ``CHOOSE`` sources' records only: the method tied with the best ``PRIMARY`` on the
    most sources (ties: the lower mean rank), and the sources where ``ts`` is tied with the best."""
    ranked = by_source([r for r in records if r["source"] in CHOOSE], PRIMARY, CHOOSE)
    methods = list(dict.fromkeys(r["method"] for rows in ranked.values() for r in rows))
    ties = {m: sum(any(r["method"] == m and r["tied_with_best"] for r in rows) for rows in ranked.values())
            for m in methods}
    rank = {m: sum(next(i for i, r in enumerate(rows, 1) if r["method"] == m) for rows in ranked.values()) / len(CHOOSE)
            for m in methods}
    pick = min(methods, key=lambda m: (-ties[m], rank[m]))
    return {"pick": pick, "ties": ties[pick], "mean_rank": rank[pick]}


def tied(rows: list[dict], method: str) -> bool:
    return any(r["method"] == method and r["tied_with_best"] for r in rows)


def record_of(rows: list[dict], method: str) -> dict:
    return next(r for r in rows if r["method"] == method)


def accuracy_moves(records: list[dict], source: str, method: str) -> str | None:
    """``"raises"``/``"lowers"`` where ``method``'s accuracy on ``source`` lies outside uncal's accuracy interval
    (``calbench recommend``'s rule), else None."""
    from types import SimpleNamespace

    from calbench.jobs.recommendation import accuracy_flag

    rows = by_source(records, "acc", [source])[source]
    own, reference = (SimpleNamespace(**record_of(rows, m)) for m in (method, "uncal"))
    return accuracy_flag(own, SimpleNamespace(**{k: (float("nan") if v is None else v)
                                                  for k, v in vars(reference).items()}))


def cell(record: dict, family) -> str:
    """``estimate [low, high]`` as the tables show the metric."""
    from calbench.jobs.recommendation import shown

    return f"{shown(family, record['estimate'])} [{shown(family, record['low'])}, {shown(family, record['high'])}]"


def caption(metric: str) -> str:
    """``metric``'s id, scale and direction, as ``calbench recommend`` words them."""
    from calbench.jobs.recommendation import scale_note
    from calbench.metrics import lookup

    family, _ = lookup(metric)
    return f"`{metric}`{scale_note(family)}, {'higher' if family.higher_is_better else 'lower'} is better"


def metric_table(records: list[dict], metric: str, sources, order=()) -> str:
    """Methods (rows, in ``order``) × sources (columns), every cell with its interval; bold: the best and the
    methods tied with it."""
    from calbench.metrics import lookup

    family, _ = lookup(metric)
    ranked = by_source(records, metric, sources)
    methods = list(dict.fromkeys(r["method"] for s in sources for r in ranked[s]))
    methods.sort(key=lambda m: order.index(m) if order and m in order else len(methods))
    lines = ["| method | " + " | ".join(sources) + " |", "|---|" + "---|" * len(sources)]
    for m in methods:
        cells = []
        for s in sources:
            r = record_of(ranked[s], m)
            text = cell(r, family)
            cells.append(f"**{text}**" if r["tied_with_best"] else text)
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("| best | " + " | ".join(f"`{ranked[s][0]['method']}`" for s in sources) + " |")
    return "\n".join(lines)



def page(summary: dict) -> str:
    """docs/choosing.md from ``summary`` (what :func:`measure` records)."""
    from calbench.metrics import lookup

    records, every = summary["records"], [*CHOOSE, *HELD_OUT]
    choice = choose(records)
    pick = choice["pick"]
    nll = by_source(records, PRIMARY, every)
    ece = by_source(records, "ece.conf.em15.l1", every)
    nll_family, _ = lookup(PRIMARY)

    def where(sources, method):
        return [s for s in sources if tied(nll[s], method)]

    def gap(s, method):
        best = nll[s][0]
        return (f"{s}: uncal {cell(record_of(nll[s], 'uncal'), nll_family)}, `{method}` "
                f"{cell(record_of(nll[s], method), nll_family)}, best `{best['method']}` {cell(best, nll_family)}")

    pick_out = [s for s in HELD_OUT if not tied(nll[s], pick)]
    ts_out = [s for s in every if not tied(nll[s], "ts")]
    moved = [(s, nll[s][0]["method"], accuracy_moves(records, s, nll[s][0]["method"]),
              record_of(nll[s], nll[s][0]["method"])["acc_change"]) for s in every]
    moved = [(s, m, how, change) for s, m, how, change in moved if how]
    differ = [s for s in every if ece[s][0]["method"] != nll[s][0]["method"]]
    rows = summary["sources"]
    lines = [
        "# Which method should I use?",
        "",
        "<!-- generated by scripts/choosing.py from scripts/choosing_summary.json: do not edit by hand; rerun "
        "`python scripts/choosing.py render` (or `run`, to measure again) -->",
        "",
        f"Generated from measured runs: `{summary['command']}` at commit {summary['commit']} on {summary['date']}, "
        f"on {summary['machine']}; the workflow took {summary['workflow_wall_s'] / 60:.0f} min wall "
        f"({summary['workflow_cpu_s'] / 60:.0f} CPU-min), and `{summary['recommend']}` (once per metric shown) "
        f"{summary['recommend_wall_s'] / 60:.0f} min more. Every number is the mean over seeds "
        f"{', '.join(map(str, summary['seeds']))} with its 95 % interval from `calbench recommend` "
        f"({summary['resamples']} paired bootstrap resamples of the test rows, seeds pooled); **bold**: the best "
        "and the methods a Holm-adjusted paired test cannot tell from it (α = 0.05).",
        "",
        f"The advice below was **chosen** on {len(CHOOSE)} sources (the *choice* part, Table 2) and then **judged** "
        f"on {len(HELD_OUT)} others whose numbers the choice did not read (the *held-out* part, Table 3). It holds "
        "for these classifiers; measure yours with the commands at the end.",
        "",
        "## Short answers",
        "",
        "1. **Rank by NLL.** It is a proper scoring rule: it rewards the probabilities themselves, and a constant "
        "prediction cannot win it. Binned ECE depends on its bins and is biased upwards on small test sets.",
        f"2. **Start with `{pick}`.** Chosen as the method tied with the best NLL on the most choice sources "
        f"({choice['ties']} of {len(CHOOSE)}; Table 2). Held out, it is tied with the best on "
        f"{len(HELD_OUT) - len(pick_out)} of {len(HELD_OUT)} (Table 3)"
        + (": not on " + "; ".join(gap(s, pick) for s in pick_out) + "." if pick_out else "."),
        f"3. **`ts` is enough on {len(every) - len(ts_out)} of {len(every)} sources** (tied with the best NLL: "
        f"{', '.join(where(CHOOSE, 'ts')) or 'none'} of the choice part, {', '.join(where(HELD_OUT, 'ts')) or 'none'} "
        "held out; Tables 2 and 3)"
        + (". It is not on " + "; ".join(gap(s, "ts") for s in ts_out) + "." if ts_out else "."),
        "4. **Check accuracy before deploying a winner.** "
        + ("The NLL winner moves accuracy beyond the interval of the uncalibrated accuracy on "
           + "; ".join(f"{s} (`{m}` {how} it by {100 * abs(change):.1f} points)" for s, m, how, change in moved)
           + " (Table 5): there it re-learns the decision, not only the probabilities."
           if moved else "No NLL winner here moves accuracy beyond the interval of the uncalibrated accuracy "
           "(Table 5)."),
        f"5. **Each metric can name another winner**: the confidence-ECE winner is not the NLL winner on "
        f"{len(differ)} of {len(every)} sources (Table 4); rank by the metric your use needs "
        "(`calbench recommend --metric`).",
        "",
        "## The sources",
        "",
        "Table 1. Every source's rows are re-split per seed into calibration and test rows (stratified).",
        "",
        "| source | part | what | classes | calibration / test rows per seed |",
        "|---|---|---|---|---|",
        *(f"| {s} | {'choice' if s in CHOOSE else 'held-out'} | {DESCRIBED[s]} | {rows[s]['classes']} | "
          f"{rows[s]['cal_rows']:,} / {rows[s]['rows'] - rows[s]['cal_rows']:,} |" for s in every),
        "",
        "## Measurements",
        "",
        f"Table 2. {caption(PRIMARY)}, choice part.",
        "",
        metric_table(records, PRIMARY, CHOOSE, summary["methods"]),
        "",
        f"Table 3. {caption(PRIMARY)}, held-out part.",
        "",
        metric_table(records, PRIMARY, HELD_OUT, summary["methods"]),
        "",
        f"Table 4. {caption('ece.conf.em15.l1')} (confidence ECE, 15 equal-mass bins), every source.",
        "",
        metric_table(records, "ece.conf.em15.l1", every, summary["methods"]),
        "",
        f"Table 5. {caption('acc')}, every source: a method whose accuracy leaves uncal's interval changes the "
        "predicted class.",
        "",
        metric_table(records, "acc", every, summary["methods"]),
        "",
        "## Caveats",
        "",
        f"- {len(every)} classifiers, {len(TABULAR)} of them tabular on one small table "
        f"({', '.join(sorted({str(rows[s]['rows'] - rows[s]['cal_rows']) for s in TABULAR}))} test rows per seed: wide "
        "intervals). The tabular scores are out-of-fold (5-fold), so their rows come from five models.",
        "- Test rows come from the distribution of the calibration rows; under dataset shift the ranking can change "
        "(docs/shift.md).",
        "- `dir_odir` runs the default run's reduced grid (scripts/choosing.yaml).",
        "- The unit of resampling is what was sampled: these sources' seeds re-split one pool, so two seeds' test "
        "splits share about half their rows, and `calbench recommend` draws one count per pool row, shared by "
        "every seed that tests on it (docs/metrics.md). The intervals above were recorded when each seed's rows "
        "were resampled on their own, which makes them about a fifth too narrow where seeds overlap; "
        "`make choosing` measures them again.",
        "- An ECE winner can read no more than a perfectly calibrated model at this test size (the estimator's "
        "noise floor, docs/metrics.md): `calbench recommend` marks such a winner \"indistinguishable from a "
        "perfectly calibrated model at this test size\"; rank by NLL to tell such methods apart.",
        "",
        "## Measure it yourself",
        "",
        "```bash",
        "python -m calbench validate my.yaml",
        "snakemake -s <calbench>/Snakefile --cores all --configfile my.yaml",
        "calbench recommend results/ --all-metrics     # --json for scripts",
        "calbench fit <the winner> --scores cal_logits.npy --labels cal_labels.npy -o winner.safetensors",
        "```",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="measure (the workflow of scripts/choosing.yaml), record the summary, render")
    run.add_argument("--work", type=Path, required=True, help="folder for the run's inputs and results")
    run.add_argument("--cores", default="all", help="Snakemake's --cores (default: all)")
    again = sub.add_parser("summarise", help="the summary of the recorded run again (its outputs in --work), "
                                             "e.g. after recommend changed; then render")
    again.add_argument("--work", type=Path, required=True, help="the recorded run's folder")
    render = sub.add_parser("render", help="write docs/choosing.md from scripts/choosing_summary.json")
    render.add_argument("--check", action="store_true", help="exit 1 when docs/choosing.md is out of date")
    args = parser.parse_args()
    if args.action in ("run", "summarise"):
        work = args.work.resolve()
        head = measure(work, args.cores) if args.action == "run" else \
            {k: v for k, v in json.loads(SUMMARY.read_text()).items() if k in HEAD}
        SUMMARY.write_text(json.dumps(summarise(work, head), indent=1) + "\n")
    text = page(json.loads(SUMMARY.read_text()))
    return write_or_check(PAGE, text, getattr(args, "check", False), "python scripts/choosing.py render")


if __name__ == "__main__":
    sys.exit(main())
