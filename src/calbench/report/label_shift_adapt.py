"""Adapt or not (docs/label_shift.md): per calibrator, shift strength and estimator, whether re-weighting by the
estimated priors helps that calibrator's own unadapted outputs, with the paired interval of the change.

The change is ``delta.acc.<est>`` (Δacc of Alexandari, Kundaje & Shrikumar 2020, Tables 1–2, here against the same
calibrator unadapted) and ``delta.nll.<est>``, each the mean over the strength's draws and seeds with the 95 %
percentile interval of the engine's bootstrap (:func:`calbench.report.label_shift.label_shift_draws`: the set
redrawn from the test rows resampled as the main tables resample them, seeds pooled). Beside them the weights'
error ``weight_mse.<est>``, the share of rows at the weight floor and the share of sets whose adaptation collapsed.
The verdict:

* **adapt** where the Δacc interval lies above 0, no NLL interval lies above 0 and no set collapsed;
* **do not adapt** where the Δacc interval lies below 0, the Δnll interval above 0 (adaptation costs log-loss) or
  a set collapsed;
* **no clear change** otherwise (an interval that covers 0, or no interval).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from calbench.data.label_shift import parse_name
from calbench.report.label_shift import LEVEL, is_label_shifted, label_shift_draws, unit_words
from calbench.stats.paired import compare
from calbench.stats.resampling import RESAMPLES

ESTIMATORS = ("em", "bbse_soft", "rlls", "bbse", "rlls_hard")
ADAPT, DO_NOT, UNCLEAR = "adapt", "do not adapt", "no clear change"


@dataclass(frozen=True)
class Adaptation:
    """One calibrator's adaptation by one estimator at one shift strength, over its draws and seeds."""

    source: str
    method: str
    estimator: str
    kind: str
    strength: float
    delta_acc: tuple[float, float, float]
    delta_nll: tuple[float, float, float]
    weight_mse: float
    floor_share: float
    #: the share of sets collapsed; NaN where ``collapse.<estimator>`` was not computed
    collapsed: float
    verdict: str

    @property
    def column(self) -> str:
        return f"Dirichlet α={self.strength:g}" if self.kind == "dirichlet" else f"tweak-one ρ={self.strength:g}"


def verdict(delta_acc, delta_nll, collapsed: float) -> str:
    """The module docstring's rule on (estimate, low, high) of Δacc and Δnll and the share of sets collapsed."""
    if collapsed > 0 or delta_acc[2] < 0 or delta_nll[1] > 0:
        return DO_NOT
    return ADAPT if delta_acc[1] > 0 else UNCLEAR


def _per_seed(long: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    sub = long[is_label_shifted(long["test_set"])]
    if source is not None:
        sub = sub[sub["source"] == source]
    parsed = pd.DataFrame([parse_name(n)[:2] for n in sub["test_set"]], columns=["kind", "strength"], index=sub.index)
    return sub.join(parsed).groupby(["source", "kind", "strength", "method", "seed", "metric"],
                                    as_index=False)["value"].mean()


def adaptations(long: pd.DataFrame, resamples: dict, source: str | None = None) -> list[Adaptation]:
    """Every (source, calibrator, estimator, strength) of the long table with ``delta.acc.<est>``."""
    per_seed = _per_seed(long, source)
    out = []
    for (src, kind, strength), part in per_seed.groupby(["source", "kind", "strength"], sort=True):
        metrics = set(part["metric"])
        for est in (e for e in ESTIMATORS if f"delta.acc.{e}" in metrics):
            wanted = [m for m in (f"delta.acc.{est}", f"delta.nll.{est}") if m in metrics]
            draws = label_shift_draws(src, part, wanted, resamples, [f"{kind}{strength:g}"])
            found = {m: {v.method: (v.estimate, v.low, v.high) for v in compare(draws, m, LEVEL)} for m in wanted}
            means = part.groupby(["metric", "method"])["value"].mean()
            for method in draws.methods:
                acc = found[f"delta.acc.{est}"].get(method, (np.nan,) * 3)
                nll = found.get(f"delta.nll.{est}", {}).get(method, (np.nan,) * 3)
                extra = {m: float(means.get((f"{m}.{est}", method), np.nan))
                         for m in ("weight_mse", "floor_share", "collapse")}
                collapsed = extra["collapse"]  # NaN where collapse.<est> was not computed
                out.append(Adaptation(src, method, est, kind, float(strength), acc, nll, extra["weight_mse"],
                                      extra["floor_share"], collapsed,
                                      verdict(acc, nll, 0.0 if np.isnan(collapsed) else collapsed)))
    return out


def signed_interval(triple, scale: float, decimals: int, missing: str = "–") -> str:
    """An (estimate, low, high) change × ``scale`` with its sign and interval, ``missing`` where there is none."""
    estimate, low, high = triple
    if np.isnan(estimate):
        return missing
    text = f"{estimate * scale:+.{decimals}f}"
    return text if np.isnan(low) else f"{text} [{low * scale:+.{decimals}f}, {high * scale:+.{decimals}f}]"


def adapt_markdown(long: pd.DataFrame, resamples: dict, method_order=None) -> str:
    """Per source: each calibrator × estimator × shift strength, its Δacc and Δnll by adaptation with intervals,
    the weights' MSE, the floor and collapse shares and the verdict (module docstring)."""
    found = adaptations(long, resamples)
    lines = [f"### Adapt or not: each calibrator adapted against its own unadapted outputs ({LEVEL:.0%} percentile "
             f"intervals of the paired bootstrap ({RESAMPLES} resamples), resampling unit: "
             f"{unit_words(resamples, sorted(set(long.loc[is_label_shifted(long['test_set']), 'source'])))}; seeds "
             "pooled; Δacc in "
             "points; verdict: adapt where Δacc's interval lies above 0, Δnll's is not above 0 and no set "
             "collapsed; do not adapt where Δacc's lies below 0, Δnll's above 0 or a set collapsed)", ""]
    if not found:
        return "\n".join(lines + ["No label-shifted set has `delta.acc.<estimator>`.", ""])
    order = {m: i for i, m in enumerate(method_order or [])}
    for source in dict.fromkeys(a.source for a in found):
        rows = sorted((a for a in found if a.source == source),
                      key=lambda a: (order.get(a.method, len(order)), a.method, ESTIMATORS.index(a.estimator),
                                     a.kind, a.strength))
        lines += [f"**{source}**", "", "| method | estimator | shift | Δacc (points) | Δnll | weight MSE | rows at "
                  "floor | collapsed | verdict |", "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {a.method} | {a.estimator} | {a.column} | {signed_interval(a.delta_acc, 100, 2)} | "
                  f"{signed_interval(a.delta_nll, 1, 3)} | {_plain(a.weight_mse, 4)} | {_plain(a.floor_share, 4)} | "
                  f"{_plain(a.collapsed, 2)} | {'**' + a.verdict + '**' if a.verdict != UNCLEAR else a.verdict} |"
                  for a in rows]
        lines.append("")
    return "\n".join(lines)


def _plain(value: float, decimals: int) -> str:
    return "–" if np.isnan(value) else f"{value:.{decimals}f}"
