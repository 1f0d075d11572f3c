"""The measured blocks of docs/shift.md ("Calibration under dataset shift"), generated from a run of config/shift.yaml.

``record`` reads a finished run's results folder (the shift report's ``tables/shift/intervals.csv``, the long table
``tables/metrics_long.csv``, the perturbed calibration dumps and the saved calibrators) and the ``/usr/bin/time -v``
log of the run, and writes what the page shows into scripts/shift_summary.json with the command, commit, machine
and date, and the corruption constants the run used at each image side (:func:`calbench.corruptions.severity_constant`).
``render`` writes the page's generated blocks from that summary alone; ``--check`` exits 1 when the committed page
is not what it would write (``tests/docs/test_shift_page.py``). The tests never repeat the run:

    /usr/bin/time -v snakemake --cores 2 --configfile config/shift.yaml > shift_run.log 2>&1
    python scripts/shift_page.py record --results results --time-log shift_run.log     # then renders
    python scripts/shift_page.py render [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SUMMARY = REPO / "scripts" / "shift_summary.json"
PAGE = REPO / "docs" / "shift.md"
CONFIG = REPO / "config" / "shift.yaml"
ECE, NLL, ACC, SCE = "ece.conf.em15.l1", "nll", "acc", "sce.conf"
#: The metrics whose cells (estimate, interval, mark) the summary keeps, and those kept per set and seed.
CELL_METRICS = (ACC, ECE, NLL, SCE)
SET_METRICS = (ACC, ECE, NLL)
PERTURBED = ("perturb+ts", "perturb+ets")
FITTED = ("ts", "ets", *PERTURBED)
#: The OOD detection scores the page shows (calbench.metrics.ood), and the methods of its OOD table.
OOD_KEYS = ("auroc.maxprob", "fpr95.maxprob")
OOD_METHODS = ("uncal", "ts", "ets", "ts+irova", "dir_odir", "kcal", "perturb+ts", "perturb+ets")
UNDER_SHIFT = "under shift"
NAMES = {"digits_vit": "digits ViT", "mnist5k_resnet18": "MNIST ResNet-18"}
WIDTH = 115


def _round(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else float(f"{value:.6g}")


def _run_cost(log: Path) -> dict:
    """CPU seconds, wall time and jobs of the run, from its ``/usr/bin/time -v`` and Snakemake log."""
    text = log.read_text(errors="replace")

    def field(label):
        found = re.search(rf"{re.escape(label)}.*: (\S+)$", text, re.M)
        if not found:
            raise ValueError(f"{log}: no '{label}' line; run snakemake under /usr/bin/time -v and pass its log")
        return found[1]

    parts = [float(p) for p in field("Elapsed (wall clock) time").split(":")]
    wall = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    done = re.findall(r"^\[(\d+)/(\d+)\] ", text, re.M) or re.findall(r"(\d+) of (\d+) steps \(100%\) done", text)
    cores = re.search(r"^Provided cores: (\d+)$", text, re.M)
    return {"command": f"snakemake --cores {cores[1] if cores else '?'} --configfile config/shift.yaml",
            "user_s": float(field("User time")), "system_s": float(field("System time")), "wall_s": wall,
            "jobs": int(done[-1][0]) if done else None}


def record(results: Path, time_log: Path) -> dict:
    """The summary of the run in ``results`` (module docstring)."""
    import pandas as pd

    from calbench.config import load
    from calbench.corruptions import kind_at, severity_constant
    from calbench.data.store import read_attrs, read_calibrated
    from calbench.jobs.shift import corrupted_images
    from calbench.metrics import lookup
    from calbench.perf import provenance
    from calbench.persist import load as load_calibrator
    from calbench.report.shift import cell_mark

    config = load(CONFIG)
    sources = [s for s, entry in config["sources"].items() if entry.get("shifts")]
    families = list(config["sources"][sources[0]]["shifts"])
    cells = pd.read_csv(results / "tables" / "shift" / "intervals.csv")
    long = pd.read_csv(results / "tables" / "metrics_long.csv")
    summary = {**provenance("python scripts/shift_page.py record"),
               "run": _run_cost(time_log),
               "methods": list(config["methods"]), "families": families, "sources": {}}
    for source in sources:
        shifts = results / "shifts" / f"{source}.h5"
        corrupted = corrupted_images(shifts)
        if corrupted is None:
            raise ValueError(f"{shifts}: no image_shape attribute (a shift dump of an older calbench); rerun the "
                             "shift study so the constants are recorded at the side the images were corrupted at")
        channels, side = corrupted  # the stored images' side, which the model's image_size may resize after
        entry = {"side": side, "constants": {f: [severity_constant(f, s, kind_at(channels, side), side)
                                                 for s in range(1, 6)] for f in families}, "cells": {}, "sets": {}}
        for metric in CELL_METRICS:
            family, _ = lookup(metric)
            rows = cells[(cells["source"] == source) & (cells["metric"] == metric)]
            entry["cells"][metric] = {
                method: {str(r.column): [_round(r.estimate), _round(r.low), _round(r.high),
                                         cell_mark(r, family).strip(), r.note if isinstance(r.note, str) else ""]
                         for r in group.itertuples()}
                for method, group in rows.groupby("method", sort=False)}
        for metric in SET_METRICS:
            rows = long[(long["source"] == source) & (long["metric"] == metric)
                        & ~long["test_set"].str.startswith("prior/")]
            table = rows.pivot_table(index=["method", "test_set"], columns="seed", values="value")
            entry["sets"][metric] = {method: {test_set: [_round(v) for v in values]
                                              for test_set, values in group.droplevel(0).iterrows()}
                                     for method, group in table.groupby(level=0)}
        entry["perturbed"] = []
        for seed in config["seeds"]:
            attrs = read_attrs(results / "perturbed_cal" / source / f"seed{seed}.h5")
            entry["perturbed"].append({"seed": seed, "epsilons": [_round(e) for e in json.loads(attrs["epsilons"])],
                                       "accuracies": [_round(a) for a in json.loads(attrs["accuracies"])]})
        entry["fitted"] = {m: [load_calibrator(results / "calibrators" / source / m / f"seed{s}.safetensors")
                               .fitted_summary() for s in config["seeds"]] for m in FITTED}
        entry["ood"] = {}
        for method in config["methods"]:
            seeds = [json.loads((results / "ood" / source / method / f"seed{s}.json").read_text())
                     for s in config["seeds"]]
            entry["ood"][method] = {name: {key: [_round(r[name][key]) for r in seeds] for key in OOD_KEYS}
                                    for name in seeds[0]}
        entry["top_confidence"] = {m: [_round(read_calibrated(results / "calibrated" / source / m / f"seed{s}.h5",
                                                              "test")["probs"].max()) for s in config["seeds"]]
                                   for m in config["methods"]}
        summary["sources"][source] = entry
    return json.loads(json.dumps(summary, default=lambda x: np.asarray(x).tolist()))


# -- rendering (from the summary alone) ------------------------------------------------------------------------

def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, WIDTH, break_long_words=False, break_on_hyphens=False))


def _share(value: float) -> str:
    return f"{100 * value:.1f}"


def _set_means(entry: dict, metric: str, method: str) -> dict[str, float]:
    """The metric per test set (``clean`` and every ``family/severity``), the mean over the seeds."""
    return {name: float(np.mean(values)) for name, values in entry["sets"][metric][method].items()}


def _shifted(means: dict[str, float]) -> dict[str, float]:
    return {name: v for name, v in means.items() if name != "clean"}


def _cell(entry: dict, metric: str, method: str, column: str) -> str:
    from calbench.metrics import lookup

    family, _ = lookup(metric)
    found = entry["cells"][metric].get(method, {}).get(column)
    if found is None:
        return "–"
    estimate, low, high, mark, _ = found
    scale, dec = family.scale, family.decimals
    interval = " †" if low is None else f" [{low * scale:.{dec}f}, {high * scale:.{dec}f}]"
    return f"{estimate * scale:.{dec}f}{interval}{f' {mark}' if mark else ''}"


def _columns(entry: dict, metric: str) -> list[str]:
    found = entry["cells"][metric]["uncal"]
    return sorted((c for c in found if c != UNDER_SHIFT), key=int) + [UNDER_SHIFT]


def _heading(column: str) -> str:
    return "clean" if column == "0" else column if column == UNDER_SHIFT else f"sev. {column}"


def _ranks(entry: dict, metric: str, column: str, methods) -> dict[str, int]:
    """Each method's rank on the displayed estimate of ``column`` (ties: the minimum rank), as the tables rank."""
    from calbench.metrics import lookup

    family, _ = lookup(metric)
    shown = {m: round(entry["cells"][metric][m][column][0] * family.scale, family.decimals) for m in methods}
    bad = {m: -v if family.higher_is_better else v for m, v in shown.items()}
    return {m: 1 + sum(other < bad[m] for other in bad.values()) for m in methods}


def missing_note(entry: dict, metrics, methods) -> list[str]:
    """A line under a table naming the cells shown without an interval (†) and why (the shift report's note, its
    CPU-second figures left out)."""
    missing = {}
    for metric in metrics:
        for method in methods:
            for column, (_, low, _, _, note) in entry["cells"][metric][method].items():
                if low is None:
                    reason = ("no interval in the shift report's time budget (`calbench recommend --recompute` "
                              "computes it)" if "no row-weighted form" in (note or "") else note or "no resamples")
                    missing.setdefault(reason, {}).setdefault(method, []).append(_heading(column))
    lines = []
    for reason, who in missing.items():
        named = "; ".join(f"{m} ({', '.join(cols) if len(cols) < 3 else f'{len(cols)} columns'})"
                          for m, cols in who.items())
        lines.append(_wrap(f"† {named}: {reason}."))
    return ["", *lines] if lines else []


def severity_table(entry: dict, metric: str, methods) -> list[str]:
    """Methods × clean, severities 1-5 and under shift (estimate [95 % interval] mark), the number of shifted sets
    on which the method's seed mean is below ``uncal``'s, and the rank on the clean split and under shift."""
    from calbench.metrics import lookup

    family, _ = lookup(metric)
    columns = _columns(entry, metric)
    clean_rank, shift_rank = _ranks(entry, metric, "0", methods), _ranks(entry, metric, UNDER_SHIFT, methods)
    word = "above" if family.higher_is_better else "below"
    lines = ["| method | " + " | ".join(map(_heading, columns)) + f" | sets {word} uncal | rank clean → shift |",
             "|---|" + "---|" * (len(columns) + 2)]
    for method in methods:
        lines.append(f"| {method} | " + " | ".join(_cell(entry, metric, method, c) for c in columns)
                     + f" | {_below(entry, metric, method)} | {clean_rank[method]} → {shift_rank[method]} |")
    return lines + missing_note(entry, [metric], methods)


def family_table(summary: dict) -> list[str]:
    """Per family: each model's uncal accuracy (%) at severities 1-5 (seed means) and the constants at its side."""
    sources = list(summary["sources"])
    header = " | ".join(f"{NAMES.get(s, s)} (corrupted at {summary['sources'][s]['side']} px): accuracy, sev. 1-5"
                        for s in sources)
    lines = [f"| family (source) | {header} |", "|---|" + "---|" * len(sources)]
    for family in summary["families"]:
        cells = []
        for source in sources:
            entry = summary["sources"][source]
            acc = _set_means(entry, ACC, "uncal")
            cells.append(", ".join(_share(acc[f"{family}/{k}"]) for k in range(1, 6)))
        lines.append(f"| `{family}` ({FAMILY_SOURCES.get(family, '')}; {_constants(summary, family)}) | "
                     + " | ".join(cells) + " |")
    return lines


#: Where each family of config/shift.yaml comes from (docs/corruptions.md has the formulas and scaling rules).
FAMILY_SOURCES = {
    "rotate": "Ovadia et al., degrees", "translate": "Ovadia et al., cyclic roll, px",
    "gaussian_noise": "ImageNet-C grey, std", "shot_noise": "ImageNet-C grey, c",
    "impulse_noise": "ImageNet-C grey, fraction", "gaussian_blur": "ImageNet-C grey, std × side/28",
    "contrast": "ImageNet-C grey, c", "brightness": "ImageNet-C grey, c",
    "pixelate": "ImageNet-C grey, side px", "elastic_transform": "ImageNet-C grey's severity 5, α and γ × k/5",
}


def _number(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _constants(summary: dict, family: str) -> str:
    """The five constants of ``family`` at each model's side, once where the sides share them."""
    per_side = {}
    for entry in summary["sources"].values():
        values = entry["constants"][family]
        if family == "elastic_transform":
            text = "α/side " + ", ".join(_number(v[0]) for v in values)
        else:
            text = ", ".join(_number(v) for v in values)
        per_side.setdefault(text, []).append(f"{entry['side']} px")
    if len(per_side) == 1:
        return next(iter(per_side))
    return "; ".join(f"{' and '.join(sides)}: {text}" for text, sides in per_side.items())


def accuracy_sentence(entry: dict, methods, title: str) -> str:
    """``uncal``'s accuracy clean and per severity (the spread over the family × seed sets), and how far the
    other methods' accuracy moves from it."""
    values = {k: [v for name, pair in entry["sets"][ACC]["uncal"].items() if name.endswith(f"/{k}") for v in pair]
              for k in range(1, 6)}
    errors = [np.std(v, ddof=1) / np.sqrt(len(v)) for v in values.values()]
    means = [_share(np.mean(v)) for v in values.values()]
    reference = entry["sets"][ACC]["uncal"]
    same, moved = [], {}
    for method in methods:
        if method == "uncal":
            continue
        gap = max(abs(a - b) for name, pair in entry["sets"][ACC][method].items()
                  for a, b in zip(pair, reference[name], strict=True))
        if gap == 0:
            same.append(method)
        else:
            moved[method] = gap
    under = np.mean([v for name, pair in reference.items() if name != "clean" for v in pair])
    spread = f"{100 * min(errors):.1f}-{100 * max(errors):.1f}"
    return _wrap(f"{title} Accuracy of `uncal`: {_share(np.mean(reference['clean']))} % clean, {', '.join(means)} % at "
                 f"severities 1-5 (± {spread}: standard error over family × seed), "
                 f"{_share(under)} % under shift; {', '.join(same)} keep it on every set and seed, the others move "
                 "it by at most " + ", ".join(f"{100 * g:.1f} ({m})" for m, g in moved.items()) + " points.")


def _below(entry: dict, metric: str, method: str) -> str:
    """On how many shifted sets ``method``'s seed mean is better than ``uncal``'s (lower; higher for accuracy)."""
    from calbench.metrics import lookup

    if method == "uncal":
        return "–"
    family, _ = lookup(metric)
    reference, mine = (_shifted(_set_means(entry, metric, m)) for m in ("uncal", method))
    better = sum((mine[s] > reference[s]) if family.higher_is_better else (mine[s] < reference[s]) for s in mine)
    return f"{better} of {len(mine)}"


def compact_table(entry: dict, methods) -> list[str]:
    """ECE clean, at severity 5 and under shift and the shifted sets on which it is below ``uncal``'s, then the same
    of NLL."""
    columns = [(ECE, "0"), (ECE, "5"), (ECE, UNDER_SHIFT), (NLL, "0"), (NLL, "5"), (NLL, UNDER_SHIFT)]
    names = [f"{'ECE' if m == ECE else 'NLL'} {_heading(c)}" for m, c in columns]
    names.insert(3, "ECE: sets below uncal")
    names.append("NLL: sets below uncal")
    lines = ["| method | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for method in methods:
        cells = [_cell(entry, m, method, c) for m, c in columns]
        cells.insert(3, _below(entry, ECE, method))
        cells.append(_below(entry, NLL, method))
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines + missing_note(entry, [ECE, NLL], methods)


def perturbed_sentence(entry: dict, versus: str = "ts", method: str = "perturb+ts") -> str:
    """Where ``method`` beats ``versus``: shifted sets (seed means) with the lower ECE and NLL, overall and split by
    ``uncal``'s accuracy on the set (below 50 %, above 90 %)."""
    acc = _shifted(_set_means(entry, ACC, "uncal"))
    ece = {m: _shifted(_set_means(entry, ECE, m)) for m in (method, versus)}
    nll = {m: _shifted(_set_means(entry, NLL, m)) for m in (method, versus)}
    wins = lambda values: sum(values[method][s] < values[versus][s] for s in acc)  # noqa: E731

    def on(sets):
        mean = lambda values, m: np.mean([values[m][s] for s in sets])  # noqa: E731
        return (f"ECE {100 * mean(ece, method):.1f} against {100 * mean(ece, versus):.1f}, "
                f"NLL {mean(nll, method):.2f} against {mean(nll, versus):.2f}")

    low = [s for s, a in acc.items() if a < 0.5]
    high = [s for s, a in acc.items() if a > 0.9]
    ratio = entry["cells"][ECE][method]["0"][0] / entry["cells"][ECE][versus]["0"][0]
    return _wrap(f"`{method}` against `{versus}`: clean ECE {ratio:.0f} × `{versus}`'s; the lower ECE on "
                 f"{wins(ece)} of the {len(acc)} shifted sets and the lower NLL on {wins(nll)}; on the {len(low)} "
                 f"sets where `uncal`'s accuracy is below 50 %: {on(low)}; on the {len(high)} above 90 %: {on(high)}.")


def levels_table(summary: dict) -> list[str]:
    """Per model and seed: the perturbation strengths, the accuracies they reach, the temperatures of TS and ETS
    fitted on the clean split and on the perturbed set, and ETS's weight on its tempered softmax."""
    lines = ["| model | seed | ε₁ … ε₅ | accuracy, level 0 → 5 | temperature: " + ", ".join(FITTED)
             + " | ETS's weight w₁: ets, perturb+ets |", "|---|---|---|---|---|---|"]
    for source, entry in summary["sources"].items():
        temps = {m: _temperatures(entry["fitted"][m]) for m in FITTED}
        weights = {m: _weights(entry["fitted"][m]) for m in FITTED}
        for i, level in enumerate(entry["perturbed"]):
            lines.append(f"| {NAMES.get(source, source)} | {level['seed']} | "
                         + ", ".join(f"{e:.2f}" for e in level["epsilons"][1:]) + " | "
                         + ", ".join(_share(a) for a in level["accuracies"]) + " % | "
                         + ", ".join(f"{temps[m][i]:.2f}" for m in FITTED) + " | "
                         + ", ".join(f"{weights[m][i]:.3f}" for m in FITTED if weights[m]) + " |")
    return lines


def _temperatures(fitted: list[dict]) -> list[float]:
    """The temperature of each seed's fit: TS's, or the TS step's of a chain, or ETS's."""
    found = []
    for summary in fitted:
        flat = {k: v for step in summary.values() if isinstance(step, dict) for k, v in step.items()} | summary
        found.append(flat["temperature"])
    return found


def _weights(fitted: list[dict]) -> list[float]:
    """ETS's weight on the tempered softmax per seed (Zhang et al. 2020, Eq. 5: w₁), empty for other methods."""
    found = []
    for summary in fitted:
        flat = {k: v for step in summary.values() if isinstance(step, dict) for k, v in step.items()} | summary
        if "weights" in flat:
            found.append(flat["weights"][0])
    return found


def _span(severities: list[int]) -> str:
    """``sev. 1-3, 5`` for [1, 2, 3, 5]."""
    runs = []
    for k in severities:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return "sev. " + ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def confidence_lines(entry: dict, methods) -> list[str]:
    """From ``sce.conf``'s intervals: the methods over-confident in every shifted column, and per other method the
    columns where its interval excludes 0."""
    columns = _columns(entry, SCE)
    shifted = [c for c in columns if c not in ("0", UNDER_SHIFT)]
    marks = {m: {c: entry["cells"][SCE][m][c][3] for c in columns} for m in methods}
    always = [m for m in methods if all(marks[m][c] == "over" for c in shifted)]
    lines = [f"over-confident at every severity: {', '.join(always)}"]
    clean = {kind: [m for m in methods if marks[m]["0"] == kind] for kind in ("over", "under")}
    lines.append(f"clean split: over-confident {', '.join(clean['over']) or 'none'}; under-confident "
                 f"{', '.join(clean['under']) or 'none'}")
    for method in methods:
        if method in always:
            continue
        said = [f"{kind} at " + _span([int(c) for c in shifted if marks[method][c] == kind])
                for kind in ("over", "under") if any(marks[method][c] == kind for c in shifted)]
        lines.append(f"{method}: " + ("; ".join(said) if said else "no shifted column excludes 0"))
    return lines


def _signed(value: float) -> str:
    return f"{value:+.3f}".replace("-", "−")


def _seeds(values) -> str:
    return f"{np.mean(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def ood_table(entry: dict) -> list[str]:
    """Per method: AUROC and FPR at 95 % TPR of the max probability on each OOD set, mean over seeds [range]."""
    sets = list(entry["ood"]["uncal"])
    heading = {"auroc.maxprob": "AUROC max prob", "fpr95.maxprob": "FPR@95"}
    names = [f"{heading[key]}, {name}" for name in sets for key in OOD_KEYS]
    lines = ["| method | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {m} | " + " | ".join(_seeds(entry["ood"][m][name][key]) for name in sets for key in OOD_KEYS) + " |"
              for m in OOD_METHODS]
    return lines


def ood_sentence(entry: dict) -> str:
    """Each OOD set's largest AUROC change from ``uncal`` either way and lowest FPR@95, and the highest test max
    probability of TS and the perturbed calibrators."""
    parts = []
    for name in entry["ood"]["uncal"]:
        base = {key: np.mean(entry["ood"]["uncal"][name][key]) for key in OOD_KEYS}
        change = {m: np.mean(entry["ood"][m][name]["auroc.maxprob"]) - base["auroc.maxprob"] for m in OOD_METHODS}
        fpr = {m: np.mean(entry["ood"][m][name]["fpr95.maxprob"]) for m in OOD_METHODS}
        low, high, best = min(change, key=change.get), max(change, key=change.get), min(fpr, key=fpr.get)
        parts.append(f"on {name}, AUROC {_signed(change[low])} ({low}) to {_signed(change[high])} ({high}) from "
                     f"`uncal`'s, lowest FPR@95 {fpr[best]:.3f} ({best}; `uncal` {base['fpr95.maxprob']:.3f})")
    top = {m: max(entry["top_confidence"][m]) for m in ("ts", *PERTURBED)}
    return _wrap("Max probability: " + "; ".join(parts) + ". The highest max probability of a test row: "
                 + ", ".join(f"{v:.2f} under `{m}`" for m, v in top.items()) + ".")


def provenance_line(summary: dict) -> str:
    run = summary["run"]
    cpu = run["user_s"] + run["system_s"]
    minutes, seconds = divmod(round(run["wall_s"]), 60)
    return _wrap(f"Measured: `{run['command']}` ({run['jobs']} jobs, {minutes} min {seconds} s wall, {cpu:,.0f} CPU-s: "
                 f"{run['user_s']:,.0f} user + {run['system_s']:,.0f} system, `/usr/bin/time -v`) at commit "
                 f"{summary['commit']}, {summary['date']}, on {summary['machine']}; scripts/shift_summary.json.")


def blocks(summary: dict) -> dict[str, str]:
    """The page's generated blocks, by name."""
    methods = summary["methods"]
    digits, mnist = (summary["sources"][s] for s in ("digits_vit", "mnist5k_resnet18"))
    out = {"shift-levels": "\n".join(levels_table(summary)),
           "shift-families": "\n".join(family_table(summary)),
           "shift-ood": "\n".join([*ood_table(digits), "", ood_sentence(digits)])}
    out["shift-digits"] = "\n".join([
        accuracy_sentence(digits, methods, "**The digits ViT.**"), "",
        f"ECE (confidence, 15 equal-mass bins, ×100; `results/tables/shift/{ECE}.md`):", "",
        *severity_table(digits, ECE, methods), "", "NLL (`results/tables/shift/nll.md`):", "",
        *severity_table(digits, NLL, methods), "", perturbed_sentence(digits)])
    out["shift-mnist"] = "\n".join([accuracy_sentence(mnist, methods, "**The MNIST ResNet-18** (confidence ECE "
                                                      "×100 and NLL, as above)."), "", *compact_table(mnist, methods),
                                    "", perturbed_sentence(mnist)])
    out["shift-confidence"] = "\n".join(
        [textwrap.fill(f"* {NAMES[s]}: " + "; ".join(confidence_lines(summary["sources"][s], methods)) + ".", WIDTH,
                       subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
         for s in summary["sources"]] + ["", provenance_line(summary)])
    return out


def render(summary: dict, text: str) -> str:
    from calbench.perf.docs_blocks import replace_blocks

    return replace_blocks(PAGE, text, blocks(summary))


def main() -> int:
    from calbench.perf.docs_blocks import write_or_check

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    rec = sub.add_parser("record", help="record the summary of a finished run, then render")
    rec.add_argument("--results", type=Path, default=Path("results"), help="the run's results folder")
    rec.add_argument("--time-log", type=Path, required=True, help="the run's `/usr/bin/time -v snakemake …` log")
    show = sub.add_parser("render", help="write docs/shift.md's generated blocks from the summary")
    show.add_argument("--check", action="store_true", help="exit 1 when docs/shift.md is out of date")
    args = parser.parse_args()
    if args.action == "record":
        SUMMARY.write_text(json.dumps(record(args.results, args.time_log), indent=1) + "\n")
    text = render(json.loads(SUMMARY.read_text()), PAGE.read_text())
    return write_or_check(PAGE, text, getattr(args, "check", False), "python scripts/shift_page.py render")


if __name__ == "__main__":
    sys.exit(main())
