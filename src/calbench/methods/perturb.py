"""Perturbed calibration data (Tomani et al., CVPR 2021, "Post-hoc uncertainty calibration for domain drift
scenarios"; docs/shift.md): the stage ``perturb`` in ``perturb+ts`` makes the next stages fit on the
calibration images perturbed by Gaussian noise at ``levels`` strengths instead of the clean ones.

The stage itself is the identity; what it changes is the data: a calibrate job whose chain starts with it
reads the model's outputs on the perturbed calibration images (rule ``dump_perturbed_cal``,
:func:`calbench.jobs.perturbed_cal.dump_perturbed_cal_job`) and fits the chain on their union.
"""

from calbench.methods.constraints import Interval, Options
from calbench.methods.registry import register
from calbench.methods.uncal import IdentityMap


@register("perturb")
class PerturbedCalibrationData(IdentityMap):
    """Identity map p̂ = σ(z) whose fit data are the perturbed calibration set.

    ``levels``: number of perturbation strengths, the clean one (ε = 0) included; 6, the default of the authors'
    ``run_experiments.py`` (``--perturb_levels``). ``clip``: clip the noisy intensities to [0, 1], as the
    authors' ImageNet branch; off as their CIFAR branch (with clipping the strongest levels push most values to
    0 or 1).
    """

    needs = frozenset({"logits", "perturbed_cal"})
    _parameter_constraints = {"levels": [Interval("int", 2, None)], "clip": [Options(True, False)]}

    def __init__(self, *, levels: int = 6, clip: bool = False):
        self.levels = levels
        self.clip = clip
