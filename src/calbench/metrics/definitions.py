"""Registration of every metric id; the formulas live in the topical modules."""

from calbench.metrics import ece, proper, true_ce
from calbench.metrics.registry import metric

metric("acc", higher_is_better=True, description="accuracy of the argmax")(
    lambda ctx: proper.accuracy(ctx.probs, ctx.labels))
metric("nll", description="log-loss, natural log")(lambda ctx: proper.log_loss(ctx.probs, ctx.labels))
metric("brier", decimals=4, description="Brier score summed over classes (LECE paper)")(
    lambda ctx: proper.brier(ctx.probs, ctx.labels))
metric("brier\\.mean", decimals=5, description="Brier score averaged over classes (Dirichlet paper)")(
    lambda ctx: proper.brier(ctx.probs, ctx.labels, mean_over_classes=True))
metric("brier\\.top", decimals=4, description="binary Brier score of the top-label confidence")(
    lambda ctx: proper.brier_top(ctx.probs, ctx.labels))


@metric(r"ece\.(?P<target>conf|cw)\.(?P<scheme>ew|em)(?P<bins>[1-9][0-9]*)\.(?P<norm>l1|l2)", scale=100.0,
        decimals=2, description="binned ECE: target conf|cw, equal-width|equal-mass bins, l1|l2 norm")
def _binned_ece(ctx, target, scheme, bins, norm):
    function = ece.confidence_ece if target == "conf" else ece.classwise_ece
    return function(ctx.probs, ctx.labels, int(bins), scheme, norm)


@metric(r"mce\.conf\.(?P<scheme>ew|em)(?P<bins>[1-9][0-9]*)", scale=100.0, decimals=2,
        description="maximum calibration error over confidence bins")
def _mce(ctx, scheme, bins):
    return ece.confidence_mce(ctx.probs, ctx.labels, int(bins), scheme)


metric("true_ce\\.conf\\.l1", needs_true_probs=True, description="true confidence CE (LECE paper §4.1.3)")(
    lambda ctx: true_ce.true_confidence_ce(ctx.probs, ctx.true_probs))
metric("true_ce\\.cw\\.l1", needs_true_probs=True, description="true classwise CE (LECE paper §4.1.3)")(
    lambda ctx: true_ce.true_classwise_ce(ctx.probs, ctx.true_probs))
