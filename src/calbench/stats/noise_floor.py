"""What a calibration-error estimator reads on a perfectly calibrated model at a given test size: its noise floor.

Binned ECE estimates a non-negative quantity by plugging in bin averages, so it is biased upwards; the bias grows
as bins hold fewer rows (Kumar et al. 2019, §5; Roelofs et al. 2022, "Mitigating bias in calibration error
estimation"). The floor is measured by simulation: labels drawn from a model's own class probabilities make that
model calibrated by construction, with the accuracy its confidences imply, and the estimator is computed on
those labels; the mean over draws is the estimator's expected value on a calibrated model with the same outputs
and test size.
"""

from __future__ import annotations

import numpy as np

from calbench.metrics import lookup
from calbench.metrics.registry import MetricContext

#: Label draws per seed (the floor's standard error is its spread over draws / √(draws · seeds)).
DRAWS = 5
#: The method whose outputs stand for "a calibrated model of the same accuracy": temperature scaling keeps the
#: classifier's predicted class and is close to calibrated; the first method of a source is used without it.
REFERENCE = ("ts", "uncal")


def is_calibration_error(metric_id: str) -> bool:
    """True for estimators of a calibration error (zero for a calibrated model in the infinite-sample limit):
    the lower-is-better (not signed) metrics shown ×100 that are not means of per-row terms (proper scores and
    accuracy are means of per-row terms and have no such floor) and that need no true calibration map."""
    family, _ = lookup(metric_id)
    return (family.scale == 100 and not family.higher_is_better and not family.signed and family.pointwise is None
            and not family.needs_true_probs and not family.needs_uncal_probs)


def reference_probs(methods, seeds, load) -> list[np.ndarray]:
    """The test probabilities, per seed that has them, of the first of :data:`REFERENCE` (else the first method)
    that ran: ``load(method, seed)`` as :func:`calbench.stats.draws.source_draws` reads it."""
    reference = next(m for m in (*REFERENCE, methods[0]) if m in methods)
    return [out["probs"] for out in (load(reference, seed) for seed in seeds) if out is not None]


def sampled_labels(probs: np.ndarray, draws: int, seed: int) -> np.ndarray:
    """``draws`` label vectors ``[draws, N]``, each row's label drawn from its own class probabilities."""
    rng = np.random.default_rng([3571, seed])
    cumulative = np.cumsum(probs, axis=1)
    cumulative[:, -1] = np.inf  # rows summing to 1 - ε still pick a class
    u = rng.random((draws, probs.shape[0], 1))
    return (u < cumulative[None]).argmax(axis=2)


def noise_floor(metric_id: str, outputs: list[np.ndarray], draws: int = DRAWS) -> tuple[float, float]:
    """Mean and standard deviation of ``metric_id`` over ``draws`` label draws per seed, from the probabilities
    ``[N, C]`` of each seed in ``outputs``."""
    return noise_floors([metric_id], outputs, draws)[metric_id]


def noise_floors(metric_ids, outputs: list[np.ndarray], draws: int = DRAWS) -> dict[str, tuple[float, float]]:
    """:func:`noise_floor` of each of ``metric_ids``, every metric evaluated on one context per seed and label draw
    (the intermediates the metrics share, such as sorted columns and bin statistics, made once for all); the
    contexts in threads (:func:`calbench.parallel.thread_map`, values in the order of the draws)."""
    from calbench.parallel import thread_map

    families = {m: lookup(m) for m in metric_ids}
    contexts = [(seed, probs, labels) for seed, probs in enumerate(outputs)
                for labels in sampled_labels(probs, draws, seed)]

    def evaluate(item) -> list[float]:
        seed, probs, labels = item
        ctx = MetricContext(probs, labels, seed=seed)
        return [family.function(ctx, **groups) for family, groups in families.values()]

    values = np.array(thread_map(evaluate, contexts), dtype=np.float64).reshape(len(contexts), len(families))
    return {m: (float(np.mean(values[:, k])), float(np.std(values[:, k]))) for k, m in enumerate(families)}


#: Standard normal quantile of the floor's two-sided 95 % interval.
Z95 = 1.959963984540054


def floor_interval(mean: float, std: float) -> tuple[float, float]:
    """The central 95 % range of what the estimator reads on a perfectly calibrated model at this test size
    (the mean ± 1.96 standard deviations of its values over the label draws, the draws' normal approximation)."""
    return mean - Z95 * std, mean + Z95 * std


def within_floor(value: float, mean: float, std: float) -> bool:
    """True where ``value`` is no larger than the upper end of :func:`floor_interval`: a model that reads it cannot
    be told from a perfectly calibrated one at this test size."""
    return bool(value <= floor_interval(mean, std)[1])


def bias_dominated(floor: float, best: float) -> bool:
    """True when a calibrated model's expected value is at least half the best method's: then the estimator's
    bias is as large as what it is asked to tell apart."""
    return floor >= 0.5 * best


def debiased_id(metric_id: str) -> str | None:
    """The debiased variant of a plain binned estimator (``…l1`` → ``…l1.debiased``), or None where the family
    has none or ``metric_id`` already is it."""
    family, groups = lookup(metric_id)
    if "debiased" not in groups or groups["debiased"]:
        return None
    return f"{metric_id}.debiased"
