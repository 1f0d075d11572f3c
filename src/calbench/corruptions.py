"""Image corruptions at five severities, for evaluating calibration under dataset shift (docs/shift.md).

``corrupt(images, family, severity, seed)`` maps uint8 images ``[N, C, H, W]`` to corrupted uint8 images of
the same shape, vectorised over the images (numpy/scipy only) and deterministic given ``seed``. The families
and their severity constants:

* ``rotate``, ``translate`` — Ovadia et al. (NeurIPS 2019, "Can you trust your model's uncertainty?", Fig. 1):
  MNIST rotated by 0–180° in 15° steps and translated by 0–14 of its 28 pixels in 2-pixel steps.
  The five severities are the first five non-zero steps of their grids: rotation by 15°, 30°, 45°, 60°, 75°;
  horizontal translation by 2, 4, 6, 8, 10 of 28 pixels, as a fraction of the width; zero (black) fill,
  bilinear interpolation.
* ``gaussian_noise``, ``shot_noise``, ``impulse_noise``, ``gaussian_blur``, ``contrast``, ``brightness``,
  ``pixelate`` — Hendrycks & Dietterich (ICLR 2019, "Benchmarking neural network robustness to common
  corruptions and perturbations") with the severity constants of their CIFAR-10-C release
  (:data:`CIFAR10C`), applied to the images as stored (the blur width is in their pixels).
* ``elastic_transform`` — the elastic deformation of Simard et al. (2003) that ImageNet-C and MNIST-C
  (Mu & Gilmer 2019) apply: a uniform random displacement field smoothed by a Gaussian of width
  ``4/28`` of the side (Simard's MNIST smoothing) and scaled to a root-mean-square displacement of 2, 3.5,
  5, 6.5, 8 % of the side (calbench's constants: the published ones add a random affine warp and are not
  monotone in severity).

Intensities live in [0, 1] during a corruption and are rounded back to uint8, as the benchmark files store
them.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

SEVERITIES = (1, 2, 3, 4, 5)

#: Hendrycks & Dietterich's CIFAR-10-C severity constants (severity 1 … 5).
CIFAR10C = {
    "gaussian_noise": (0.04, 0.06, 0.08, 0.09, 0.10),  # noise std on [0, 1] intensities
    "shot_noise": (500, 250, 100, 75, 50),  # Poisson photon count per unit intensity
    "impulse_noise": (0.01, 0.02, 0.03, 0.05, 0.07),  # fraction of salt-and-pepper values
    "gaussian_blur": (0.4, 0.6, 0.7, 0.8, 1.0),  # blur std in pixels
    "contrast": (0.75, 0.5, 0.4, 0.3, 0.15),  # factor on the deviation from the image's channel means
    "brightness": (0.05, 0.1, 0.15, 0.2, 0.3),  # added to the HSV value channel
    "pixelate": (0.95, 0.9, 0.85, 0.75, 0.65),  # side of the box-downsampled image, as a fraction
}
#: Ovadia et al.'s rotated / translated MNIST on five severities.
ROTATE_DEGREES = (15.0, 30.0, 45.0, 60.0, 75.0)
TRANSLATE_FRACTION = (2 / 28, 4 / 28, 6 / 28, 8 / 28, 10 / 28)
#: Elastic deformation: root-mean-square displacement as a fraction of the side; smoothing width / side.
ELASTIC_RMS = (0.02, 0.035, 0.05, 0.065, 0.08)
ELASTIC_SIGMA = 4.0 / 28.0


def _rotate(x, c, rng):
    return ndimage.rotate(x, c, axes=(3, 2), reshape=False, order=1, mode="constant", cval=0.0)


def _translate(x, c, rng):
    return ndimage.shift(x, (0, 0, 0, c * x.shape[3]), order=1, mode="constant", cval=0.0)


def _gaussian_noise(x, c, rng):
    return x + rng.normal(scale=c, size=x.shape)


def _shot_noise(x, c, rng):
    return rng.poisson(x * c) / c


def _impulse_noise(x, c, rng):
    u = rng.random(x.shape)
    return np.where(u < c / 2, 0.0, np.where(u < c, 1.0, x))


def _gaussian_blur(x, c, rng):
    return ndimage.gaussian_filter(x, sigma=(0, 0, c, c), mode="nearest")


def _contrast(x, c, rng):
    means = x.mean(axis=(2, 3), keepdims=True)
    return (x - means) * c + means


def _brightness(x, c, rng):
    """HSV value + c with hue and saturation kept: each channel scales by V'/V (a black pixel turns grey)."""
    value = x.max(axis=1, keepdims=True)
    raised = np.clip(value + c, 0.0, 1.0)
    return np.where(value > 0, x * raised / np.where(value > 0, value, 1.0), raised)


def _box_matrix(n_out: int, n_in: int) -> np.ndarray:
    """[n_out, n_in] box (area-average) resampling weights: each output cell averages the input it covers."""
    edges_out = np.arange(n_out + 1) * (n_in / n_out)
    lo = np.maximum(edges_out[:-1, None], np.arange(n_in)[None, :])
    hi = np.minimum(edges_out[1:, None], np.arange(1, n_in + 1)[None, :])
    weights = np.clip(hi - lo, 0.0, None)
    return weights / weights.sum(axis=1, keepdims=True)


def _pixelate(x, c, rng):
    h, w = x.shape[2:]
    small_h, small_w = max(1, int(h * c)), max(1, int(w * c))
    down_h, down_w = _box_matrix(small_h, h), _box_matrix(small_w, w)
    up_h, up_w = _box_matrix(h, small_h), _box_matrix(w, small_w)
    return np.einsum("ij,jk,nckl,ml,om->ncio", up_h, down_h, x, down_w, up_w, optimize=True)


def _elastic_transform(x, c, rng):
    n, channels, h, w = x.shape
    side = max(h, w)
    field = ndimage.gaussian_filter(rng.uniform(-1.0, 1.0, size=(2, n, h, w)), sigma=(0, 0, ELASTIC_SIGMA * side,
                                                                                        ELASTIC_SIGMA * side))
    rms = np.sqrt(np.mean(field**2, axis=(0, 2, 3), keepdims=True))
    field *= c * side / np.maximum(rms, 1e-12)
    grid = np.meshgrid(np.arange(n), np.arange(channels), np.arange(h), np.arange(w), indexing="ij")
    coords = [grid[0], grid[1], grid[2] + field[0][:, None], grid[3] + field[1][:, None]]
    return ndimage.map_coordinates(x, coords, order=1, mode="reflect")


#: family → (corruption of float [0, 1] images ``f(x, constant, rng)``, its five severity constants)
FAMILIES = {
    "rotate": (_rotate, ROTATE_DEGREES),
    "translate": (_translate, TRANSLATE_FRACTION),
    **{name: (globals()[f"_{name}"], constants) for name, constants in CIFAR10C.items()},
    "elastic_transform": (_elastic_transform, ELASTIC_RMS),
}


def corrupt(images: np.ndarray, family: str, severity: int, seed=0) -> np.ndarray:
    """``images`` (uint8 ``[N, C, H, W]``) corrupted by ``family`` at ``severity`` (1–5), as uint8.

    The random draws depend on ``seed`` (an int or a sequence of ints, e.g. ``[seed, chunk]``), ``family``
    and ``severity`` only, so a shifted test set is the same whoever makes it and whichever other sets are
    made beside it.
    """
    if family not in FAMILIES:
        raise ValueError(f"corruption family {family!r} is unknown; known: {', '.join(FAMILIES)}")
    if severity not in SEVERITIES:
        raise ValueError(f"corruption severity must be one of {list(SEVERITIES)}, got {severity!r}")
    images = np.asarray(images)
    if images.ndim != 4 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 images [N, C, H, W], got {images.dtype} of shape {images.shape}")
    function, constants = FAMILIES[family]
    rng = np.random.default_rng([*np.atleast_1d(seed).tolist(), list(FAMILIES).index(family), severity])
    out = function(images.astype(np.float64) / 255.0, constants[severity - 1], rng)
    return np.rint(np.clip(out, 0.0, 1.0) * 255.0).astype(np.uint8)


def gaussian_perturbation(images: np.ndarray, epsilon: float, seed=0) -> np.ndarray:
    """``images`` (uint8 ``[N, C, H, W]``) plus Gaussian noise N(0, ε²) on the [0, 1] intensity scale, clipped
    and rounded to uint8: the perturbation of the calibration images of Tomani et al. (CVPR 2021; as in the
    authors' code). The standard-normal draws depend on ``seed`` only, so the images perturbed at two strengths
    differ by the noise's scale alone and the accuracy falls smoothly with ``epsilon``."""
    images = np.asarray(images)
    if images.ndim != 4 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 images [N, C, H, W], got {images.dtype} of shape {images.shape}")
    if not np.isfinite(epsilon) or epsilon < 0:
        raise ValueError(f"the noise's standard deviation must be finite and >= 0, got {epsilon!r}")
    out = _gaussian_noise(images.astype(np.float64) / 255.0, epsilon, np.random.default_rng(seed))
    return np.rint(np.clip(out, 0.0, 1.0) * 255.0).astype(np.uint8)
