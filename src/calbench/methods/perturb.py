"""The stage ``perturb`` of ``perturb+ts`` (Tomani et al., CVPR 2021, "Post-hoc uncertainty calibration for domain
drift scenarios"; docs/shift.md): the stages after it fit on the perturbed calibration set instead of the clean
calibration split.

The stage maps no score (at prediction the chain is its calibrators); what it declares is its data: ``needs``
names ``perturbed_cal``, the data stage that rule ``dump_perturbed_cal`` makes
(:func:`calbench.jobs.perturbed_cal.dump_perturbed_cal_job`, settings in the config key ``perturbed_cal``), which
the calibrate job reads in place of the calibration split.
"""

from calbench.methods.registry import register
from calbench.methods.uncal import IdentityMap


@register("perturb")
class PerturbedCalibrationData(IdentityMap):
    """p̂ = σ(z): fits and maps nothing; the chain's later stages fit on the perturbed calibration set."""

    needs = frozenset({"logits", "perturbed_cal"})
