"""Metric ids (docs/metrics.md) → functions, with how tables display and rank them.

An id is ``<family>.<target>.<binning>.<norm>`` or a plain name. Families register a regular
expression whose named groups become keyword arguments of the function, so ``ece.cw.em15.l1`` and
``ece.cw.ew20.l2`` are both understood without listing every bin count.
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class MetricContext:
    """What a metric may read: calibrated probabilities, labels, and optional extras."""

    probs: np.ndarray
    labels: np.ndarray
    true_probs: np.ndarray | None = None
    seed: int = 0
    #: Probabilities of the uncalibrated classifier on the same instances (``ece_gain.*``).
    uncal_probs: np.ndarray | None = None
    #: A label-shifted set's adaptation inputs (:class:`calbench.metrics.label_shift.LabelShiftInputs`): ``*.em``,
    #: ``*.bbse``, ``*.oracle``, ``prior_mse.*``.
    label_shift: object | None = None

    @cached_property
    def confidence(self) -> tuple[np.ndarray, np.ndarray]:
        """The confidence reduction (max p̂, 1[argmax p̂ = y]) as [N, 1] columns, made once for all metrics of
        this context (:func:`calbench.metrics.binned.confidence_columns`; read-only)."""
        from calbench.metrics.binned import confidence_columns

        return confidence_columns(self.probs, self.labels)

    @cached_property
    def _shared(self) -> dict:
        """Intermediate results shared by several metrics of this context (:meth:`shared`); a resample's context
        (``dataclasses.replace``) starts with its own."""
        return {}

    def shared(self, key, compute: Callable):
        """``compute()``, computed once per ``key`` for all the metrics of this context."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]


@dataclass(frozen=True)
class MetricFamily:
    pattern: re.Pattern
    function: Callable[..., float]
    higher_is_better: bool = False
    #: A signed metric (e.g. over- minus under-confidence): 0 is best, tables rank methods by |value|.
    signed: bool = False
    needs_true_probs: bool = False
    needs_uncal_probs: bool = False
    #: Reads a label-shifted set's adaptation inputs (docs/label_shift.md).
    needs_label_shift: bool = False
    #: Tables show ``value × scale`` rounded to ``decimals`` (e.g. ECE ×10², LECE paper Tables 3–4).
    scale: float = 1.0
    decimals: int = 3
    description: str = ""
    #: How to write the ids of a parametrised family, for people (``calbench metrics``); plain ids write themselves.
    usage: str = ""
    #: Optional ``pointwise(ctx) -> [N]`` whose mean is the metric; lets the bootstrap run as one matrix product.
    pointwise: Callable[..., np.ndarray] | None = None
    #: Optional ``resampled(ctx, counts, **groups) -> [R]``: the metric on R bootstrap resamples given as row
    #: counts ``[R, N]``, exactly, without re-evaluating; returns None for the ids it has no such form for.
    resampled: Callable[..., np.ndarray | None] | None = None
    #: Optional ``display_of(groups) -> MetricFamily``: the family whose direction, scale and decimals an id of this
    #: family takes (``nll.em`` is shown and ranked as ``nll``).
    display_of: Callable[[dict], "MetricFamily"] | None = None

    @property
    def direction(self) -> str:
        """How values compare, for people: "higher is better", "lower is better" or "signed, 0 is best"."""
        if self.signed:
            return "signed, 0 is best"
        return "higher is better" if self.higher_is_better else "lower is better"

    def badness(self, values):
        """``values`` mapped so that smaller is better (for ranking): −v, |v| (signed) or v."""
        if self.signed:
            return abs(values)
        return -values if self.higher_is_better else values


_FAMILIES: list[MetricFamily] = []


def metric(pattern: str, **meta):
    """Decorator registering ``function(ctx, **groups) -> float`` for ids matching ``pattern``."""

    def decorate(function):
        _FAMILIES.append(MetricFamily(re.compile(f"^{pattern}$"), function, **meta))
        return function

    return decorate


#: The most bins a metric id may ask for: a bin count sizes arrays of bins × classes in every evaluate job (10⁸
#: bins took 3 GB per job), and no test set of this benchmark has rows to fill more.
MAX_BINS = 10_000


def bin_count(groups: dict) -> int | None:
    """The bin count a metric id's parsed ``groups`` give (``bins``, or the digits of ``binning``: ``em15``)."""
    text = groups.get("bins") or (groups.get("binning") or "")[2:]
    return int(text) if text.isdigit() else None


def lookup(metric_id: str) -> tuple[MetricFamily, dict]:
    """The family of ``metric_id`` and the parsed groups; raises with the closest known ids, and for a bin count
    above :data:`MAX_BINS`."""
    for family in _FAMILIES:
        match = family.pattern.match(metric_id)
        if match:
            groups = match.groupdict()
            if (bins := bin_count(groups)) is not None and bins > MAX_BINS:
                raise ValueError(f"metric id {metric_id!r}: {bins:,} bins, more than {MAX_BINS:,}; a bin count sizes "
                                 "arrays of bins x classes in every evaluate job, and beyond the test rows most bins "
                                 "stay empty: use at most as many bins as the test set has rows (15 is usual)")
            if family.display_of is not None:
                shown = family.display_of(groups)
                family = replace(family, higher_is_better=shown.higher_is_better, scale=shown.scale,
                                 decimals=shown.decimals)
            return family, groups
    close = closest_ids(metric_id)
    hint = f"closest known ids: {', '.join(close)}" if close else "no known id is close"
    raise ValueError(f"unknown metric id {metric_id!r}; {hint} (`calbench metrics` lists every family)")


def example_ids(family: MetricFamily) -> list[str]:
    """Concrete ids of a family: its ``usage`` with every alternative ``{a|b}`` and optional part ``[.x]`` spelled
    out and each bin count ``N`` as 15 (plain ids: the id itself), the usage's own examples first."""
    usage, _, example = (family.usage or family.pattern.pattern[1:-1].replace("\\.", ".")).partition("e.g.")
    choices = [part.split("|") if part.startswith("{") else ["", part[1:-1]] if part.startswith("[") else [part]
               for part in re.split(r"(\{[^}]*\}|\[[^\]]*\])", usage.strip())]
    spelled = ("".join(parts).replace("{", "").replace("}", "") for parts in itertools.product(*choices))
    ids = example.replace(",", " ").split() + [re.sub(r"(?<=e[wm])N", "15", text) for text in spelled]
    return [i for i in dict.fromkeys(ids) if family.pattern.match(i) and "<" not in i]  # no placeholder left


def closest_ids(metric_id: str, n: int = 5) -> list[str]:
    """Up to ``n`` known ids for a mistyped one: ids that continue it (``ece.conf.em15`` → ``ece.conf.em15.l1``),
    the nearest by difflib's similarity, then ids that continue its longest known dotted prefix (``ece.bogus`` →
    ``ece.conf.ew15.l1``); the families' own examples first."""
    examples = [example_ids(family) for family in _FAMILIES]
    ids = [i for family_ids in examples for i in family_ids]
    ordered = [family_ids[0] for family_ids in examples if family_ids] + ids
    parts = metric_id.split(".")
    prefixes = [".".join(parts[:k]) + "." for k in range(len(parts), 0, -1)]
    continuing = [[i for i in ordered if i.startswith(prefix)] for prefix in prefixes]
    nearest = next((found for found in continuing if found), [])
    close = difflib.get_close_matches(metric_id, ids, n=n, cutoff=0.6)
    return list(dict.fromkeys(continuing[0][:3] + close + nearest[:3]))[:n]


def known_patterns() -> list[str]:
    return [f.pattern.pattern[1:-1] for f in _FAMILIES]


def described_ids() -> list[tuple[str, str, MetricFamily]]:
    """``(how to write the id, description, family)`` of every metric family, for people."""
    return [(f.usage or f.pattern.pattern[1:-1].replace("\\.", "."), f.description, f) for f in _FAMILIES]
