"""Registration of every metric id; the formulas live in the topical modules (docs/metrics.md lists them)."""


import numpy as np

from calbench.maps1d import FAMILIES
from calbench.metrics import (
    adaptive_ce,
    conformal_eval,
    consistency,
    cumulative,
    ece,
    fitted_maps_ece,
    kcal,
    kde_ece,
    kernel_ce,
    mmce,
    proper,
    selective,
    signed,
    smooth_ece,
    true_ce,
)
from calbench.metrics.binned import (
    bin_stats,
    binned_ece,
    binned_sums_resampled,
    columns,
    ece_from_stats,
    stats_of_sums,
)
from calbench.metrics.registry import metric
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


def _bin_stats(ctx, target, scheme, bins):
    """:func:`calbench.metrics.binned.bin_stats` of ``target``'s columns, made once per (target, scheme, bins) for all
    the metrics of ``ctx`` (ECE, ACE, the signed parts)."""
    return ctx.shared(("binned stats", target, scheme, bins), lambda: bin_stats(*_columns(ctx, target), bins, scheme))


def _binned_stats_resampled(ctx, target, scheme, bins, counts):
    """Bin statistics [R, M, B] of bootstrap resamples from their row counts (ECE, ACE, the signed parts, MCE), made
    once per ``counts`` for all of them."""
    binning = ("ew", bins) if scheme == "ew" else ("em", bins, None, "first")
    found = _resampled_found(ctx, target, counts)
    if ("stats", binning) not in found:
        found["stats", binning] = stats_of_sums(_resampled_sums(ctx, target, binning, counts, found))
    return found["stats", binning]


def _resampled_found(ctx, target, counts) -> dict:
    """What the resamples ``counts`` of ``target``'s columns gave so far on ``ctx`` (a fresh dict for other counts)."""
    held_counts, found = ctx.shared(("binned sums of resamples", target), lambda: (counts, {}))
    return found if held_counts is counts else {}


def _resampled_sums(ctx, target, binning, counts, found=None):
    """Per-bin sums [3, R, M, B] of ``binning`` (:func:`calbench.metrics.binned.binned_sums_resampled`) of
    ``target``'s columns on the resamples ``counts``, made in one pass with every other binning of ``target`` that
    the ids resampled on ``ctx`` read (:func:`_binnings`), once per ``counts`` for all of them."""
    found = _resampled_found(ctx, target, counts) if found is None else found
    if binning not in found:
        wanted = list(dict.fromkeys([binning, *(b for b in _binnings(ctx, target) if b not in found)]))
        found.update(zip(wanted, binned_sums_resampled(*_columns(ctx, target), counts, wanted)))
    return found[binning]


def _binnings(ctx, target) -> list[tuple]:
    """The binnings of ``target``'s columns that the ids resampled on ``ctx`` read
    (:data:`calbench.metrics.bootstrap.RESAMPLED_IDS`): binned ECE and its signed parts, ACE, MCE, the KCal ECE."""
    from calbench.metrics.bootstrap import RESAMPLED_IDS
    from calbench.metrics.registry import lookup

    found = []
    for metric_id in ctx.shared(RESAMPLED_IDS, list):
        family, groups = lookup(metric_id)
        if groups.get("target", "conf") != target:
            continue
        if family.resampled in (_binned_ece_resampled, _signed_part_resampled) and groups["binning"][2:].isdigit():
            scheme, bins = groups["binning"][:2], int(groups["binning"][2:])
            found.append(("ew", bins) if scheme == "ew" else ("em", bins, None, "first"))
        elif family.resampled is _ace_resampled:
            found.append(("em", int(groups["bins"]), None, "first"))
        elif family.resampled is _mce_resampled:
            found.append(("ew", int(groups["bins"])) if groups["scheme"] == "ew" else
                         ("em", int(groups["bins"]), None, "first"))
        elif family.resampled is _kcal_ece_resampled:
            found.append(kcal.binning(int(groups["bins"]), _kcal_threshold(ctx, target)))
    return found


def _binned_ece_resampled(ctx, counts, target, binning, norm, debiased):
    """Binned ECE on bootstrap resamples from their row counts; None for CV-chosen bins."""
    if binning.endswith("cv"):
        return None
    stats = _binned_stats_resampled(ctx, target, binning[:2], int(binning[2:]), counts)
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
    if bins != "cv":
        return float(np.mean(ece_from_stats(*_bin_stats(ctx, target, scheme, int(bins)), norm, bool(debiased))))
    return float(np.mean(binned_ece(*_columns(ctx, target), "cv", scheme, norm, bool(debiased))))


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


def _kcal_threshold(ctx, target):
    """The threshold of the KCal paper's ECE (classwise: p̂ ≥ min(0.01, 1/K) kept; confidence: every row)."""
    return kcal.kcal_threshold(ctx.probs.shape[1]) if target == "cw" else 0.0


def _kcal_columns(ctx, target):
    """Scores, hits and the threshold of the KCal paper's ECE."""
    return *_columns(ctx, target), _kcal_threshold(ctx, target)


def _kcal_ece_resampled(ctx, counts, target, bins):
    binning = kcal.binning(int(bins), _kcal_threshold(ctx, target))
    return kcal.kcal_ece_of_sums(_resampled_sums(ctx, target, binning, counts))


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
    stats = _binned_stats_resampled(ctx, "conf", scheme, int(bins), counts)
    return None if stats is None else ece.mce_from_stats(*stats)[:, 0]


@metric(r"mce\.conf\.(?P<scheme>ew|em)(?P<bins>[1-9][0-9]*)", scale=100.0, decimals=2,
        usage="mce.conf.{ewN|emN}   e.g. mce.conf.ew15",
        description="maximum calibration error over confidence bins", resampled=_mce_resampled)
def _mce(ctx, scheme, bins):
    return ece.confidence_mce(ctx.probs, ctx.labels, int(bins), scheme)


def _true_ce_resampled(rows):
    """The l2 true CE (root of a mean of per-row terms) on bootstrap resamples from their row counts."""
    return lambda ctx, counts: np.sqrt(counts @ rows(ctx) / counts.sum(axis=1))


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


# ACE, MMCE, KS, signed CE, calibration tests, selective prediction, calibration/refinement split (docs/metrics.md)


def _ace_resampled(ctx, counts, target, bins):
    stats = _binned_stats_resampled(ctx, target, "em", int(bins), counts)
    return None if stats is None else adaptive_ce.ace_from_stats(*stats)


@metric(r"ace\.(?P<target>conf|cw)\.em(?P<bins>[1-9][0-9]*)", scale=100.0, decimals=2,
        usage="ace.{conf|cw}.emN   e.g. ace.cw.em15",
        description="adaptive calibration error (Nixon et al. 2019): N equal-mass ranges per class (cw) or of the "
                    "confidence (conf), gaps averaged with equal weight over ranges and classes",
        resampled=_ace_resampled)
def _ace(ctx, target, bins):
    return float(adaptive_ce.ace_from_stats(*_bin_stats(ctx, target, "em", int(bins))))


@metric(r"mmce\.conf", scale=100.0, decimals=2,
        description="maximum mean calibration error (Kumar et al. 2018) of the confidence, Laplacian kernel of "
                    "width 0.4, root of the V-statistic, exact in O(n log n)")
def _mmce(ctx):
    scores, hits = _columns(ctx, "conf")
    return mmce.mmce(scores[:, 0], hits[:, 0])


@metric(r"ks\.(?P<target>conf|cw)", scale=100.0, decimals=2, usage="ks.{conf|cw}   e.g. ks.conf",
        description="KS calibration error (Gupta et al. 2021): max gap between cumulative hits and cumulative "
                    "scores along the sorted scores, top-label (conf) or the mean over classes (cw)",
        resampled=lambda ctx, counts, target: cumulative.ks_error_resampled(*_columns(ctx, target), counts))
def _ks(ctx, target):
    return float(np.mean(cumulative.ks_error(*_columns(ctx, target))))


metric(r"sce\.conf", signed=True, scale=100.0, decimals=2, pointwise=lambda ctx: signed.confidence_gap_rows(
    ctx.probs, ctx.labels), description="signed calibration error: mean confidence minus accuracy (> 0: "
                                       "over-confident, < 0: under-confident)")(
    lambda ctx: float(np.mean(signed.confidence_gap_rows(ctx.probs, ctx.labels))))


def _signed_part_resampled(ctx, counts, target, binning, part):
    stats = _binned_stats_resampled(ctx, target, binning[:2], int(binning[2:]), counts)
    return None if stats is None else np.mean(signed.signed_parts(*stats, part), axis=-1)


@metric(r"sce\.(?P<target>conf|cw)\.(?P<binning>(?:ew|em)[1-9][0-9]*)\.(?P<part>over|under)", scale=100.0,
        decimals=2, usage="sce.{conf|cw}.{ewN|emN}.{over|under}   e.g. sce.conf.em15.over",
        description="the over-confident (bins with mean score > frequency) or under-confident part of the l1 "
                    "binned ECE: over + under = ece.*.l1, over − under = sce.conf",
        resampled=_signed_part_resampled)
def _signed_part(ctx, target, binning, part):
    return float(np.mean(signed.signed_parts(*_bin_stats(ctx, target, binning[:2], int(binning[2:])), part)))


_TESTS = {"spiegelhalter": cumulative.spiegelhalter_test, "ks": cumulative.ks_test, "kuiper": cumulative.kuiper_test}


@metric(r"p_(?P<test>spiegelhalter|ks|kuiper)\.conf", higher_is_better=True, decimals=3,
        usage="p_{spiegelhalter|ks|kuiper}.conf   e.g. p_kuiper.conf",
        description="p-value of a calibration test of the confidence: Spiegelhalter's Z (two-sided), or the "
                    "KS / Kuiper tests of the cumulative differences (Arrieta-Ibarra et al. 2022, as MAPIE)")
def _calibration_test(ctx, test):
    scores, hits = _columns(ctx, "conf")
    return _TESTS[test](scores[:, 0], hits[:, 0])[1]


def _errors(ctx):
    scores, hits = _columns(ctx, "conf")
    return scores[:, 0], 1.0 - hits[:, 0]


metric(r"aurc", decimals=4, description="area under the risk-coverage curve of the confidence (Geifman & "
                                        "El-Yaniv 2017): mean selective risk over coverages k/n")(
    lambda ctx: selective.aurc(*_errors(ctx)))
metric(r"augrc", decimals=4, description="area under the generalised risk-coverage curve (Traub et al. 2024): "
                                         "mean over coverages of P(accepted and wrong)")(
    lambda ctx: selective.augrc(*_errors(ctx)))


@metric(r"auroc\.conf", higher_is_better=True, decimals=4,
        description="misclassification-detection AUROC: the probability that a correct prediction has a higher "
                    "confidence than a wrong one (ties ½)")
def _auroc(ctx):
    scores, hits = _columns(ctx, "conf")
    return selective.auroc(scores[:, 0], hits[:, 0] == 1)


_PROPER_LOSSES = {"nll": proper.log_loss, "brier": proper.brier}


def _recalibrated_loss(ctx, loss, family, folds):
    from calbench.metrics import refinement  # lazy: the TS solver's compiled kernels, only for these ids

    k = None if folds == "all" else int(folds[2:])
    probs = ctx.shared((f"{family}-recalibrated", k),
                       lambda: refinement.recalibrated(ctx.probs, ctx.labels, k, ctx.seed, family))
    return _PROPER_LOSSES[loss](probs, ctx.labels)


_SPLIT = r"(?P<loss>nll|brier)\.(?P<family>ts|isotonic)\.(?P<folds>cv(?:[2-9]|[1-9][0-9]+)|all)"


@metric(r"refinement\." + _SPLIT, decimals=4,
        usage="refinement.{nll|brier}.{ts|isotonic}.{cvK|all}   e.g. refinement.nll.ts.cv5",
        description="refinement error (Berta et al. 2025): the loss after temperature-scaling or one-vs-rest "
                    "isotonic recalibration, cross-fitted on K folds or fitted on all rows (probmetrics "
                    "refinement_*_{ts|isotonic}-mix_*)")
def _refinement(ctx, loss, family, folds):
    return _recalibrated_loss(ctx, loss, family, folds)


@metric(r"calib_err\." + _SPLIT, decimals=4,
        usage="calib_err.{nll|brier}.{ts|isotonic}.{cvK|all}   e.g. calib_err.nll.ts.cv5",
        description="calibration error of a proper loss (Berta et al. 2025): the loss minus its refinement "
                    "error, the part TS or isotonic recalibration removes (probmetrics calib-err_*_*-mix_*)")
def _calibration_part(ctx, loss, family, folds):
    return _PROPER_LOSSES[loss](ctx.probs, ctx.labels) - _recalibrated_loss(ctx, loss, family, folds)


# ---- conformal prediction sets on the test split (docs/conformal.md): random divisions of its rows ----
_CONFORMAL_KINDS = {"coverage": dict(higher_is_better=True, description="marginal coverage of the sets"),
                    "coverage_gap": dict(signed=True, description="marginal coverage − (1 − α)"),
                    "set_size": dict(decimals=2, description="mean set size"),
                    "set_size_median": dict(decimals=2, description="median set size"),
                    "sscv": dict(description="size-stratified coverage violation (Angelopoulos et al. 2021)"),
                    "cc_gap": dict(description="mean over classes of |class coverage − (1 − α)| (Dabah & Tirer "
                                               "2025, AvgCovGap)"),
                    "cc_gap_top": dict(description="mean of the largest 5 % of those class gaps (Dabah & Tirer "
                                                   "2025, TopCovGap)")}
_CONFORMAL_ID = (r"\.(?P<construction>lac_cc|lac|aps_nr|aps|raps_nr|raps)\.a(?P<alpha>0[1-9]|[1-9][0-9])"
                 r"(?:\.cal(?P<cal>[1-9][0-9]?))?(?:\.div(?P<div>[1-9][0-9]*))?")


def _conformal_settings(construction, alpha, cal, div):
    return dict(construction=construction, alpha=int(alpha) / 100,
                cal_fraction=conformal_eval.CAL_FRACTION if cal is None else int(cal) / 100,
                count=conformal_eval.DIVISIONS if div is None else int(div))


def _conformal_sets(ctx, construction, alpha, cal, div):
    """The division sets of one (construction, α, division settings), made once for all the metrics of ``ctx``."""
    settings = _conformal_settings(construction, alpha, cal, div)
    return ctx.shared(("conformal sets", *settings.values()), lambda: conformal_eval.division_sets(
        ctx.probs, ctx.labels, settings["construction"], settings["alpha"], seed=ctx.seed, count=settings["count"],
        cal_fraction=settings["cal_fraction"]))


def _conformal_metric(kind):
    def compute(ctx, construction, alpha, cal, div):
        sets = _conformal_sets(ctx, construction, alpha, cal, div)
        key = ("conformal values", construction, alpha, cal, div)
        values = ctx.shared(key, lambda: [conformal_eval.summaries(s, ctx.labels, int(alpha) / 100,
                                                                   ctx.probs.shape[1]) for s in sets])
        return float(np.mean([v[kind] for v in values]))

    def resampled(ctx, counts, construction, alpha, cal, div):
        """The kind's values on the resamples ``counts``, computed with the other kinds of its group
        (:data:`calbench.metrics.conformal_eval.GROUPS`) once per ``counts`` for all the metrics of ``ctx``."""
        held_counts, found = ctx.shared(("conformal resamples", construction, alpha, cal, div), lambda: (counts, {}))
        if held_counts is not counts:
            found = {}
        if kind not in found:
            group = next(g for g in conformal_eval.GROUPS if kind in g)
            found.update(conformal_eval.resampled_values(
                _conformal_sets(ctx, construction, alpha, cal, div), ctx.labels, int(alpha) / 100, counts,
                construction, ctx.probs.shape[1], kinds=group))
        return found[kind]

    return compute, resampled


for _kind, _meta in _CONFORMAL_KINDS.items():
    _compute, _resampled = _conformal_metric(_kind)
    _meta = {"decimals": 3, **_meta, "description": f"conformal sets: {_meta['description']}; construction, α in %, "
             "optional test share that calibrates (.calNN, default 50) and divisions (.divN, default 20)"}
    metric(_kind + _CONFORMAL_ID, resampled=_resampled, **_meta,
           usage=f"{_kind}.{{lac|lac_cc|aps|aps_nr|raps|raps_nr}}.aNN[.calNN][.divN]   e.g. {_kind}.aps.a10")(_compute)


# ---- label-shift adaptation (docs/label_shift.md): registered after every base metric, which they adapt ----
from calbench.metrics import definitions_label_shift  # noqa: E402, F401  (registers the adaptation ids)
