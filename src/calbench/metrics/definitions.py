"""Registration of every metric id; the formulas live in the topical modules (docs/metrics.md lists them)."""

from dataclasses import replace

import numpy as np

from calbench.maps1d import FAMILIES
from calbench.metrics import (
    consistency,
    ece,
    fitted_maps_ece,
    kcal,
    kde_ece,
    kernel_ce,
    label_shift,
    proper,
    smooth_ece,
    true_ce,
)
from calbench.metrics.binned import (
    binned_ece,
    columns,
    ece_from_stats,
    equal_mass_stats_resampled,
    equal_width_stats_resampled,
)
from calbench.metrics.registry import lookup, metric
from calbench.metrics.top_label import top_label_binned_ece

metric("acc", higher_is_better=True, description="accuracy of the argmax",
       pointwise=lambda ctx: (np.argmax(ctx.probs, axis=1) == ctx.labels).astype(float))(
    lambda ctx: proper.accuracy(ctx.probs, ctx.labels))
metric("nll", description="log-loss, natural log", pointwise=lambda ctx: proper.log_loss_rows(ctx.probs, ctx.labels))(
    lambda ctx: proper.log_loss(ctx.probs, ctx.labels))
metric("brier", decimals=4, description="Brier score summed over classes (LECE paper)",
       pointwise=lambda ctx: proper.brier_rows(ctx.probs, ctx.labels))(
    lambda ctx: proper.brier(ctx.probs, ctx.labels))
metric("brier\\.mean", decimals=5, description="Brier score averaged over classes (Dirichlet paper)")(
    lambda ctx: proper.brier(ctx.probs, ctx.labels, mean_over_classes=True))
metric("brier\\.top", decimals=4, description="binary Brier score of the top-label confidence")(
    lambda ctx: proper.brier_top(ctx.probs, ctx.labels))


def _columns(ctx, target):
    """The binary columns of ``target`` (the confidence ones cached on the context)."""
    return ctx.confidence if target == "conf" else columns(ctx.probs, ctx.labels, target)


def _binned_stats_resampled(scores, hits, scheme, bins, counts):
    """Bin statistics [R, M, B] of bootstrap resamples from their row counts, or None (recompute each)."""
    if scheme == "ew":
        return equal_width_stats_resampled(scores, hits, bins, counts)
    return equal_mass_stats_resampled(scores, hits, bins, counts)


def _binned_ece_resampled(ctx, counts, target, binning, norm, debiased):
    """Binned ECE on bootstrap resamples from their row counts; None for CV-chosen bins."""
    if binning.endswith("cv"):
        return None
    stats = _binned_stats_resampled(*_columns(ctx, target), binning[:2], int(binning[2:]), counts)
    return None if stats is None else np.mean(ece_from_stats(*stats, norm, bool(debiased)), axis=-1)


@metric(r"ece\.(?P<target>conf|cw)\.(?P<binning>(?:ew|em)(?:[1-9][0-9]*|cv)|cv)\.(?P<norm>l1|l2)"
        r"(?P<debiased>\.debiased)?", scale=100.0, decimals=2,
        usage="ece.{conf|cw}.{ewN|emN|ewcv|emcv|cv}.{l1|l2}[.debiased]   e.g. ece.conf.ew15.l1",
        description="binned ECE: target conf|cw, equal-width|equal-mass bins (a count, or cv = chosen by "
                    "10-fold CV as in the fit-on-test paper §4.6; bare cv = emcv), l1|l2 norm, optional "
                    ".debiased (fit-on-test App. C.5 for l1, Kumar et al. 2019 for l2)",
        resampled=_binned_ece_resampled)
def _binned_ece(ctx, target, binning, norm, debiased):
    scheme, bins = ("em", "cv") if binning == "cv" else (binning[:2], binning[2:])
    scores, hits = _columns(ctx, target)
    return float(np.mean(binned_ece(scores, hits, bins if bins == "cv" else int(bins), scheme, norm, bool(debiased))))


@metric(r"ece\.tl\.(?P<scheme>ew|em)(?P<bins>[1-9][0-9]*)\.(?P<norm>l1|l2)", scale=100.0, decimals=2,
        description="top-label ECE (Gupta & Ramdas 2022): binned confidence ECE within each predicted class, "
                    "averaged with weights n_l / n",
        usage="ece.tl.{ewN|emN}.{l1|l2}   e.g. ece.tl.em15.l1")
def _top_label_ece(ctx, scheme, bins, norm):
    return top_label_binned_ece(ctx.probs, ctx.labels, int(bins), scheme, norm)


@metric(r"smece\.(?P<target>conf|tl)", scale=100.0, decimals=2,
        description="smooth ECE (Błasiok & Nakkiran 2023, relplot): of the confidence, or top-label (per predicted "
                    "class, weighted n_l / n)",
        usage="smece.{conf|tl}   e.g. smece.conf")
def _smooth_ece(ctx, target):
    if target == "tl":
        return smooth_ece.top_label_average(ctx.probs, ctx.labels, smooth_ece.smooth_ece)
    scores, hits = _columns(ctx, "conf")
    return smooth_ece.smooth_ece(scores[:, 0], hits[:, 0])


def _kcal_columns(ctx, target):
    """Scores, hits and the threshold of the KCal paper's ECE (classwise: p̂ ≥ min(0.01, 1/K) kept)."""
    scores, hits = _columns(ctx, target)
    return scores, hits, kcal.kcal_threshold(ctx.probs.shape[1]) if target == "cw" else 0.0


def _kcal_ece_resampled(ctx, counts, target, bins):
    scores, hits, threshold = _kcal_columns(ctx, target)
    return kcal.kcal_ece_resampled(scores, hits, int(bins), threshold, counts)


@metric(r"ece\.(?P<target>conf|cw)\.em(?P<bins>[1-9][0-9]*)\.l1\.kcal", scale=100.0, decimals=2,
        usage="ece.{conf|cw}.emN.l1.kcal   e.g. ece.cw.em15.l1.kcal",
        description="KCal paper's adaptive ECE (remainder in the last bins); cw drops p < min(0.01, 1/K)",
        resampled=_kcal_ece_resampled)
def _kcal_ece(ctx, target, bins):
    scores, hits, threshold = _kcal_columns(ctx, target)
    return kcal.kcal_ece(scores, hits, int(bins), threshold)


_FAMILY = "|".join(sorted(FAMILIES, key=len, reverse=True))


@metric(rf"ece\.(?P<target>conf|cw)\.(?P<family>{_FAMILY})\.(?P<norm>l1|l2)", scale=100.0, decimals=2,
        usage="ece.{conf|cw}.{platt|beta|iso|pl|pl3|pl_mse|pl3_mse}.{l1|l2}   e.g. ece.conf.pl3.l1",
        description="fit-on-test plug-in CE (Kängsepp et al. Eq. 3) with map family platt|beta|iso|pl|pl3|…")
def _fit_on_test(ctx, target, family, norm):
    scores, hits = _columns(ctx, target)
    return float(np.mean(fitted_maps_ece.fit_on_test_ce(scores, hits, family, norm, ctx.seed)))


@metric(rf"cmee\.(?P<target>conf|cw)\.(?P<family>{_FAMILY})\.(?P<norm>l1|l2)",
        needs_true_probs=True, scale=100.0, decimals=3,
        usage="cmee.{conf|cw}.{platt|beta|iso|pl|pl3|pl_mse|pl3_mse}.{l1|l2}   e.g. cmee.conf.pl3.l1",
        description="calibration-map estimation error of a fit-on-test map vs the true map (fit-on-test §6.1)")
def _cmee(ctx, target, family, norm):
    scores, hits = _columns(ctx, target)
    truth = fitted_maps_ece.true_target(ctx.probs, ctx.true_probs, target)
    return float(np.mean(fitted_maps_ece.cmee(scores, hits, truth, family, norm, ctx.seed)))


@metric(r"kde_ece\.conf\.(?P<norm>l1|l2)(?P<code>\.mnm_code)?", scale=100.0, decimals=2,
        usage="kde_ece.conf.{l1|l2}[.mnm_code]   e.g. kde_ece.conf.l1",
        description="Mix-n-Match KDE top-label ECE (§4.1, App. C); .mnm_code = the authors' code's bandwidth")
def _kde_ece(ctx, norm, code):
    scores, hits = _columns(ctx, "conf")
    return kde_ece.kde_ece(scores[:, 0], hits[:, 0], norm, "mnm_code" if code else "paper")


def _gain_pointwise(ctx):
    return proper.brier_rows(ctx.uncal_probs, ctx.labels) - proper.brier_rows(ctx.probs, ctx.labels)


metric(r"ece_gain\.l2", higher_is_better=True, needs_uncal_probs=True, scale=100.0, decimals=3,
       pointwise=_gain_pointwise,
       description="Mix-n-Match calibration gain ΔECE² (Eq. 8): Brier(uncalibrated) − Brier(calibrated), summed")(
    lambda ctx: float(np.mean(_gain_pointwise(ctx))))
metric(r"skce\.ul", scale=100.0, decimals=4,
       description="unbiased linear squared kernel calibration error (Widmann et al. 2019), exp(−‖p−p'‖) kernel")(
    lambda ctx: kernel_ce.skce_ul(ctx.probs, ctx.labels))
metric(r"skce\.uq", scale=100.0, decimals=4,
       description="unbiased quadratic SKCE (Widmann et al. 2019), O(n²) in blocks")(
    lambda ctx: kernel_ce.skce_uq(ctx.probs, ctx.labels))


@metric(r"p_ece\.(?P<target>conf|cw)(?:\.(?P<scheme>ew|em)(?P<bins>[1-9][0-9]*))?", higher_is_better=True,
        usage="p_ece.{conf|cw}[.{ewN|emN}]   e.g. p_ece.conf.ew15",
        decimals=3, description="p-value of the consistency-resampling ECE test (Vaicenavicius et al.; "
                                "Dirichlet paper §2), default 15 equal-width bins, 1000 resamples")
def _p_ece(ctx, target, scheme, bins):
    return consistency.consistency_p_value(ctx.probs, ctx.labels, target, int(bins or 15), scheme or "ew",
                                           seed=ctx.seed)


def _mce_resampled(ctx, counts, scheme, bins):
    """MCE on bootstrap resamples from their row counts, or None (recompute each)."""
    stats = _binned_stats_resampled(*_columns(ctx, "conf"), scheme, int(bins), counts)
    return None if stats is None else ece.mce_from_stats(*stats)[:, 0]


@metric(r"mce\.conf\.(?P<scheme>ew|em)(?P<bins>[1-9][0-9]*)", scale=100.0, decimals=2,
        usage="mce.conf.{ewN|emN}   e.g. mce.conf.ew15",
        description="maximum calibration error over confidence bins", resampled=_mce_resampled)
def _mce(ctx, scheme, bins):
    return ece.confidence_mce(ctx.probs, ctx.labels, int(bins), scheme)


def _true_ce_resampled(rows):
    """The l2 true CE (root of a mean of per-row terms) on bootstrap resamples from their row counts."""
    return lambda ctx, counts: np.sqrt(counts @ rows(ctx) / ctx.labels.size)


def _true_conf_rows(ctx, squared=False):
    return true_ce.confidence_rows(ctx.probs, ctx.true_probs, squared)


def _true_cw_rows(ctx, squared=False):
    return true_ce.classwise_rows(ctx.probs, ctx.true_probs, squared)


metric("true_ce\\.conf\\.l1", needs_true_probs=True, description="true confidence CE (LECE paper §4.1.3)",
       pointwise=_true_conf_rows)(lambda ctx: true_ce.true_confidence_ce(ctx.probs, ctx.true_probs))
metric("true_ce\\.cw\\.l1", needs_true_probs=True, description="true classwise CE (LECE paper §4.1.3)",
       pointwise=_true_cw_rows)(lambda ctx: true_ce.true_classwise_ce(ctx.probs, ctx.true_probs))
metric("true_ce\\.conf\\.l2", needs_true_probs=True, description="root mean squared version of true_ce.conf.l1",
       resampled=_true_ce_resampled(lambda ctx: _true_conf_rows(ctx, squared=True)))(
    lambda ctx: true_ce.true_confidence_ce(ctx.probs, ctx.true_probs, squared=True))
metric("true_ce\\.cw\\.l2", needs_true_probs=True, description="root mean squared version of true_ce.cw.l1",
       resampled=_true_ce_resampled(lambda ctx: _true_cw_rows(ctx, squared=True)))(
    lambda ctx: true_ce.true_classwise_ce(ctx.probs, ctx.true_probs, squared=True))


# ---- label-shift adaptation (docs/label_shift.md): on a source's label-shifted test sets only ----
def _adaptation(ctx, estimator):
    """(π_t, adapted probabilities) of ``estimator`` on this context, computed once for all its metrics."""
    if estimator not in ctx.adapted:
        ctx.adapted[estimator] = label_shift.estimate(ctx.probs, ctx.label_shift, estimator)
    return ctx.adapted[estimator]


metric(r"prior_mse\.(?P<estimator>em|bbse)", needs_label_shift=True, scale=1000.0, decimals=3,
       usage="prior_mse.{em|bbse}",
       description="mean over classes of (π̂_t − π_t)², the estimated target priors (EM: Saerens et al. 2002; BBSE: "
                   "Lipton et al. 2018) against the label-shifted set's true ones")(
    lambda ctx, estimator: float(np.mean((_adaptation(ctx, estimator)[0] - ctx.label_shift.true_priors) ** 2)))


def adapted_base(metric_id: str, base: str):
    """The family and groups of the metric ``base`` that ``<base>.<estimator>`` computes after adaptation; refuses a
    base that itself needs more than probabilities and labels."""
    family, groups = lookup(base)
    if family.needs_true_probs or family.needs_uncal_probs or family.needs_label_shift:
        raise ValueError(f"metric {metric_id!r}: {base!r} cannot be computed after label-shift adaptation (it needs a "
                         "true calibration map, the uncalibrated outputs or is an adaptation metric itself)")
    return family, groups


@metric(r"(?P<base>.+)\.(?P<estimator>em|bbse|oracle)", needs_label_shift=True,
        display_of=lambda groups: adapted_base(f"{groups['base']}.{groups['estimator']}", groups["base"])[0],
        usage="<metric>.{em|bbse|oracle}   e.g. nll.em, acc.bbse, ece.conf.em15.l1.oracle",
        description="a metric of the probabilities re-weighted by the target priors of EM (Saerens et al. 2002), "
                    "BBSE (Lipton et al. 2018) or the true ones (oracle), on a label-shifted test set")
def _after_adaptation(ctx, base, estimator):
    family, groups = adapted_base(f"{base}.{estimator}", base)
    return family.function(replace(ctx, probs=_adaptation(ctx, estimator)[1], label_shift=None), **groups)
