"""Registration of the label-shift adaptation metrics (docs/label_shift.md), computed on a source's label-shifted
test sets only: a base metric after adaptation (``nll.em``), its change by adaptation (``delta.acc.em``, the Δacc
of Alexandari, Kundaje & Shrikumar 2020, Tables 1–2), the error of the estimated weights (``weight_mse.em``, their
``mseweights_even``) and priors (``prior_mse.em``), the share of rows at the weight floor (``floor_share.em``) and
the collapse flag (``collapse.em``); :mod:`calbench.metrics.label_shift` holds the estimators.

Registered after every base metric (:mod:`calbench.metrics.definitions` imports this module last), the specific
families before the generic ``<base>.<estimator>``, which would otherwise match them."""

from dataclasses import replace

import numpy as np

from calbench.metrics import label_shift, proper
from calbench.metrics.bootstrap import RESAMPLED_IDS, weighted_means
from calbench.metrics.registry import MetricContext, lookup, metric
from calbench.metrics.row_counts import row_sums

_ALL = "em|bbse_soft|bbse|rlls_hard|rlls|oracle"
_ESTIMATED = "em|bbse_soft|bbse|rlls_hard|rlls"
_ESTIMATOR_NAMES = "EM (Saerens et al. 2002), BBSE hard or soft (Lipton et al. 2018; Alexandari et al. 2020), RLLS " \
                   "soft or hard (Azizzadenesheli et al. 2019)"


def _adaptation(ctx, estimator):
    """(π_t, raw weights, adapted probabilities) of ``estimator`` on this context, once for all its metrics."""
    def compute():
        priors, found = label_shift.target_priors(ctx.probs, ctx.label_shift, estimator)
        return priors, found, label_shift.adapt(ctx.probs, label_shift.applied(found, estimator))

    return ctx.shared(("label_shift", estimator), compute)


def _adaptation_resampled(ctx, counts, estimator):
    """(π_t [R, k], raw weights [R, k]) for bootstrap row weights ``counts`` [R, N], the weights re-estimated on
    every resample as on the set itself; made once per estimator for all the metrics of ``ctx`` bootstrapped on
    the same ``counts``."""
    def compute():
        return label_shift.target_priors(ctx.probs, ctx.label_shift, estimator, counts)

    held_counts, found = ctx.shared(("label_shift resamples", estimator), lambda: (counts, compute()))
    return found if held_counts is counts else compute()


def _weight_errors(found, inputs):
    """Mean over the classes present in the calibration labels of (max(ŵ, 0) − w)², w the true weights."""
    ideal = inputs.ideal_weights()
    present = np.isfinite(ideal)
    return np.mean((np.maximum(found[..., present], 0.0) - ideal[present]) ** 2, axis=-1)


metric(rf"prior_mse\.(?P<estimator>{_ESTIMATED})", needs_label_shift=True, scale=1000.0, decimals=3,
       usage="prior_mse.{em|bbse|bbse_soft|rlls|rlls_hard}",
       description=f"mean over classes of (π̂_t − π_t)², the target priors estimated by {_ESTIMATOR_NAMES} against "
                   "the label-shifted set's true ones",
       resampled=lambda ctx, counts, estimator: np.mean(
           (_adaptation_resampled(ctx, counts, estimator)[0] - ctx.label_shift.true_priors) ** 2, axis=1))(
    lambda ctx, estimator: float(np.mean((_adaptation(ctx, estimator)[0] - ctx.label_shift.true_priors) ** 2)))

metric(rf"weight_mse\.(?P<estimator>{_ESTIMATED})", needs_label_shift=True, decimals=4,
       usage="weight_mse.{em|bbse|bbse_soft|rlls|rlls_hard}",
       description="mean over classes of (ŵ − w)², the estimated weights π_t/π_s (negative ones as 0) against the "
                   "true ones, the set's priors over the calibration labels' frequencies (Alexandari et al. 2020, "
                   "Tables 1–2, 'MSE of weights', their mseweights_even)",
       resampled=lambda ctx, counts, estimator: _weight_errors(_adaptation_resampled(ctx, counts, estimator)[1],
                                                               ctx.label_shift))(
    lambda ctx, estimator: float(_weight_errors(_adaptation(ctx, estimator)[1], ctx.label_shift)))

metric(rf"floor_share\.(?P<estimator>{_ESTIMATED})", needs_label_shift=True, decimals=4,
       usage="floor_share.{em|bbse|bbse_soft|rlls|rlls_hard}",
       description=f"share of rows whose class weight the adaptation floored at {label_shift.WEIGHT_FLOOR:g} (an "
                   "estimated weight at or below it): the rows whose adapted log-loss the floor bounds",
       resampled=lambda ctx, counts, estimator: _floor_share_resampled(ctx, counts, estimator))(
    lambda ctx, estimator: float(label_shift.floored_rows(_adaptation(ctx, estimator)[1], ctx.labels).mean()))


def _floor_share_resampled(ctx, counts, estimator):
    """The share of each resample's row weight on classes whose weight is at the floor: its weight per class
    (summed over its rows of non-zero weight, :func:`calbench.kernels.label_shift.class_sums`) times the class's
    floor indicator."""
    from calbench.kernels.label_shift import class_sums  # lazy: numba only where redraws adapt

    found = _adaptation_resampled(ctx, counts, estimator)[1]
    per_class = np.empty(found.shape)
    class_sums(*label_shift.redraw_rows(counts), ctx.labels, per_class)
    return np.sum(per_class * label_shift.floored_rows(found, np.arange(found.shape[1])), axis=1) / row_sums(counts)


@metric(rf"collapse\.(?P<estimator>{_ESTIMATED})", needs_label_shift=True, decimals=2,
        usage="collapse.{em|bbse|bbse_soft|rlls|rlls_hard}",
        description=f"1 where the adaptation collapsed: more than {label_shift.COLLAPSE_MASS:g} of the estimated "
                    f"prior on classes the unadapted predictions choose for fewer than {label_shift.COLLAPSE_RARE:g}"
                    f"/k of the rows, or one class predicted for ≥ {label_shift.COLLAPSE_ONE_CLASS:g} of the rows "
                    "(not so before adaptation); else 0 (its mean over sets: the share of sets collapsed)")
def _collapse(ctx, estimator):
    priors, _, adapted = _adaptation(ctx, estimator)
    return float(label_shift.collapsed(ctx.probs, adapted, priors))


def adapted_base(metric_id: str, base: str):
    """The family and groups of the metric ``base`` that ``<base>.<estimator>`` computes after adaptation; refuses a
    base that itself needs more than probabilities and labels."""
    family, groups = lookup(base)
    if family.needs_true_probs or family.needs_uncal_probs or family.needs_label_shift:
        raise ValueError(f"metric {metric_id!r}: {base!r} cannot be computed after label-shift adaptation (it needs a "
                         "true calibration map, the uncalibrated outputs or is an adaptation metric itself)")
    return family, groups


def _after_adaptation_resampled(ctx, counts, base, estimator):
    """``<base>.<estimator>`` on bootstrap resamples (row weights [R, N]): each resample's probabilities re-weighted
    by its own weights, then the base metric's row-weighted form (its per-row terms or its ``resampled`` form); None
    (no resamples) where the base has neither. Made once for ``<base>.<estimator>`` and ``delta.<base>.<estimator>``
    bootstrapped on the same ``counts`` (R re-weightings of the N × k probabilities each)."""
    def compute():
        return _after_adaptation_values(ctx, counts, base, estimator)

    held_counts, values = ctx.shared(("adapted resamples", base, estimator), lambda: (counts, compute()))
    return values if held_counts is counts else compute()


def _after_adaptation_values(ctx, counts, base, estimator):
    family, groups = adapted_base(f"{base}.{estimator}", base)
    if family.pointwise is None and family.resampled is None:
        return None
    if estimator == "oracle":  # the set's true priors on every resample: one re-weighting serves them all
        adapted = replace(ctx, probs=_adaptation(ctx, estimator)[2], label_shift=None)
        if family.pointwise is not None:
            return counts @ family.pointwise(adapted) / row_sums(counts)
        return family.resampled(adapted, counts, **groups)
    ratios = label_shift.applied(_adaptation_resampled(ctx, counts, estimator)[1], estimator)
    if family.pointwise is not None:
        return _pointwise_after_adaptation(ctx, counts, ratios, family, base, estimator)
    values = []
    for weights, ratio in zip(counts, ratios):  # one re-weighted copy at a time: [R, N, k] would not fit
        adapted = replace(ctx, probs=label_shift.adapt(ctx.probs, ratio), label_shift=None)
        value = family.resampled(adapted, weights[None, :], **groups)
        if value is None:
            return None
        values.append(value[0])
    return np.asarray(values)


#: How many (resample, row) pairs :func:`_pointwise_after_adaptation` re-weights at once for a base metric other
#: than accuracy and log-loss (their k-vectors stay in cache: one re-weighted copy of the set per resample ran 2-3
#: times slower).
PAIR_BLOCK = 1 << 14
#: The per-row terms of the base metrics computed from each adapted row's argmax hit and label probability alone
#: (:func:`calbench.kernels.label_shift.adapted_pairs`), without the adapted rows.
_FROM_PAIRS = {"acc": lambda hits, label_probs: hits,
               "nll": lambda hits, label_probs: proper.log_loss_terms(label_probs)}


def _pointwise_after_adaptation(ctx, counts, ratios, family, base, estimator):
    """Σ_i counts_ri · pointwise(p ⊙ ratio_r renormalised)_i / Σ_i counts_ri for each resample r, over the rows of
    non-zero count of every resample (a redrawn set holds 15-40 % of the rows). Accuracy and log-loss read each
    (resample, row) pair's adapted argmax and label probability, made in one compiled pass per estimator for both
    (:func:`calbench.kernels.label_shift.adapted_pairs`; only the resamples' means are kept, of the bases the ids
    resampled on ``ctx`` adapt with the estimator); another per-row metric re-weights the pairs' rows
    (:func:`calbench.kernels.label_shift.reweighted_rows`) in blocks stacked as one context (a per-row metric's rows
    are independent)."""
    from calbench.kernels.label_shift import adapted_pairs, redraw_sums, reweighted_rows  # lazy: numba where used

    indptr, cols, vals = label_shift.redraw_rows(counts)
    probs, ratios = np.ascontiguousarray(ctx.probs, dtype=np.float64), np.ascontiguousarray(ratios, dtype=np.float64)

    def means(per_row):
        sums = np.empty(counts.shape[0])
        redraw_sums(indptr, vals, per_row, sums)
        return sums / row_sums(counts)

    if base in _FROM_PAIRS:
        def pairs():  # the means of every base of _FROM_PAIRS resampled here with this estimator, from one pass
            resampled = ctx.shared(RESAMPLED_IDS, list)
            bases = {base} | {b for b in _FROM_PAIRS if f"{b}.{estimator}" in resampled
                              or f"delta.{b}.{estimator}" in resampled}
            hits, label_probs = np.empty(cols.size), np.empty(cols.size)
            adapted_pairs(probs, ctx.labels, ratios, indptr, cols, hits, label_probs)
            return counts, {b: means(_FROM_PAIRS[b](hits, label_probs)) for b in bases}

        held_counts, found = ctx.shared(("adapted pairs", estimator), pairs)
        return found[base] if held_counts is counts and base in found else pairs()[1][base]
    sets, per_row = np.repeat(np.arange(counts.shape[0]), np.diff(indptr)), np.empty(cols.size)
    adapted = np.empty((min(PAIR_BLOCK, cols.size), ctx.probs.shape[1]))
    for start in range(0, cols.size, PAIR_BLOCK):
        part, row = sets[start:start + PAIR_BLOCK], cols[start:start + PAIR_BLOCK]
        block = adapted[:part.size]
        reweighted_rows(probs, ratios, part, row, block)
        per_row[start:start + PAIR_BLOCK] = family.pointwise(MetricContext(block, ctx.labels[row], seed=ctx.seed))
    return means(per_row)


def _pointwise_base(metric_id, base):
    family, groups = adapted_base(metric_id, base)
    if family.pointwise is None or groups:
        raise ValueError(f"metric {metric_id!r}: the change by adaptation is defined for metrics that are a mean of "
                         f"per-row terms (acc, nll, brier); {base!r} is not")
    return family


def _delta_resampled(ctx, counts, base, estimator):
    family = _pointwise_base(f"delta.{base}.{estimator}", base)
    after = _after_adaptation_resampled(ctx, counts, base, estimator)
    return after - weighted_means(ctx, counts, family)


@metric(rf"delta\.(?P<base>[a-z_]+)\.(?P<estimator>{_ALL})", needs_label_shift=True,
        display_of=lambda groups: _pointwise_base(f"delta.{groups['base']}.{groups['estimator']}", groups["base"]),
        usage="delta.<metric>.{em|bbse|bbse_soft|rlls|rlls_hard|oracle}   e.g. delta.acc.em, delta.nll.rlls",
        resampled=_delta_resampled,
        description="the change of a per-row metric by adaptation, adapted minus unadapted on the same rows "
                    "(delta.acc.em: Alexandari et al. 2020's Δacc against the unadapted calibrated model); it keeps "
                    "the base metric's direction")
def _delta(ctx, base, estimator):
    family = _pointwise_base(f"delta.{base}.{estimator}", base)
    adapted = replace(ctx, probs=_adaptation(ctx, estimator)[2], label_shift=None)
    return float(np.mean(family.pointwise(adapted) - family.pointwise(ctx)))


@metric(rf"(?P<base>.+)\.(?P<estimator>{_ALL})", needs_label_shift=True,
        display_of=lambda groups: adapted_base(f"{groups['base']}.{groups['estimator']}", groups["base"])[0],
        usage="<metric>.{em|bbse|bbse_soft|rlls|rlls_hard|oracle}   e.g. nll.em, acc.bbse_soft, "
              "ece.conf.em15.l1.oracle",
        resampled=_after_adaptation_resampled,
        description=f"a metric of the probabilities re-weighted by the weights of {_ESTIMATOR_NAMES} or the true ones "
                    f"(oracle), on a label-shifted test set; estimated weights floored at "
                    f"{label_shift.WEIGHT_FLOOR:g}")
def _after_adaptation(ctx, base, estimator):
    family, groups = adapted_base(f"{base}.{estimator}", base)
    return family.function(replace(ctx, probs=_adaptation(ctx, estimator)[2], label_shift=None), **groups)
