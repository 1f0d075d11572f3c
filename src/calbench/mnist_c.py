"""The MNIST-C benchmark's corruptions (Mu & Gilmer, "MNIST-C: A Robustness Benchmark for Computer Vision", 2019,
arXiv:1906.02337; google-research/mnist-c ``corruptions.py``), each at the one severity of the released dataset:
the default ``severity`` argument of its function in that code, as its ``CORRUPTIONS`` list calls them.

:mod:`calbench.corruptions` registers them as the families ``mnistc_<corruption>``, which take severity 1 only,
on grey images (``[N, 1, H, W]``). Constants in pixels are the code's at 28 px and scale with the side.

* ``mnistc_shot_noise``: Poisson(3·x)/3 (severity 5 of five); ``mnistc_impulse_noise``: salt and pepper on 17 %
  of the pixels (severity 4); ``mnistc_brightness``: x + 0.5 (severity 5; the code's grey → RGB → HSV value
  + 0.5 → grey); these reuse the five-level families' formulas (:mod:`calbench.corruptions`).
* ``mnistc_shear``, ``mnistc_rotate``, ``mnistc_scale``, ``mnistc_translate``: scikit-image's
  ``transform.warp`` of the image by an affine map about the centre ((side − 1)/2, 13.5 at 28 px), bilinear,
  black outside: shear 0.4 (severity 2; scikit-image 0.19's ``AffineTransform(shear=s)``, the matrix
  ``[[1, −sin s], [0, cos s]]``), rotation 0.4 rad (severity 2), zoom out by 0.7 (severity 3: the map scales by
  1/0.7), and translation by 3 px (severity 3) along each axis; the direction (the sign of the shear, of the
  rotation, of each translation) drawn uniformly per image, as the code's ``np.random.choice([-1, 1])``.
* ``mnistc_stripe``: the image inverted (1 − x) on the columns left of 7/28 and from 21/28 of the width.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

#: The released severity's constant of each family: (``shot_noise``'s c = 3 …), from the code's default
#: ``severity`` argument: shot noise 5, impulse noise 4, brightness 5, shear 2, rotate 2, scale 3, translate 3.
SHOT_NOISE = 3
IMPULSE_NOISE = 0.17
BRIGHTNESS = 0.5
SHEAR = 0.4
ROTATION = 0.4
SCALE = 1 / 0.7
TRANSLATION = 3 / 28
STRIPE = (7 / 28, 21 / 28)


def warp(x: np.ndarray, matrices: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """scikit-image's ``transform.warp(image, inverse_map=AffineTransform(...))`` of each image: the output at
    (column, row) p takes the input at ``matrices[i] @ p + offsets[i]`` ([N, 2, 2] and [N, 2], (x, y) order),
    bilinear, zero outside the image (interpolating towards zero across the border, as scikit-image's
    ``mode='constant'``)."""
    n, channels, h, w = x.shape
    rows, cols = np.mgrid[:h, :w].astype(float)
    src_x = matrices[:, 0, 0, None, None] * cols + matrices[:, 0, 1, None, None] * rows + offsets[:, 0, None, None]
    src_y = matrices[:, 1, 0, None, None] * cols + matrices[:, 1, 1, None, None] * rows + offsets[:, 1, None, None]
    shape = (n, channels, h, w)
    index = np.broadcast_to(np.arange(n)[:, None, None, None], shape)
    chan = np.broadcast_to(np.arange(channels)[None, :, None, None], shape)
    coords = [index, chan, np.broadcast_to(src_y[:, None], shape), np.broadcast_to(src_x[:, None], shape)]
    return ndimage.map_coordinates(x, coords, order=1, mode="grid-constant", cval=0.0)


def _about_centre(x: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """``warp`` by ``matrices`` with the offset that keeps the image centre fixed, as the code's translation
    ``13.5 · (1 − a1 − a2)``, ``13.5 · (1 − b1 − b2)``."""
    centre = (x.shape[3] - 1) / 2
    return warp(x, matrices, centre * (1 - matrices.sum(axis=2)))


def _signs(rng, size) -> np.ndarray:
    return np.asarray(rng.choice([-1, 1], size=size), dtype=float)


def _shear(x, c, rng, kind):
    s = c * _signs(rng, x.shape[0])
    zero, one = np.zeros_like(s), np.ones_like(s)
    return _about_centre(x, np.stack([np.stack([one, -np.sin(s)], -1), np.stack([zero, np.cos(s)], -1)], 1))


def _rotate(x, c, rng, kind):
    r = c * _signs(rng, x.shape[0])
    return _about_centre(x, np.stack([np.stack([np.cos(r), -np.sin(r)], -1), np.stack([np.sin(r), np.cos(r)], -1)],
                                     1))


def _scale(x, c, rng, kind):
    return _about_centre(x, np.broadcast_to(np.eye(2) * c, (x.shape[0], 2, 2)))


def _translate(x, c, rng, kind):
    n = x.shape[0]
    return warp(x, np.broadcast_to(np.eye(2), (n, 2, 2)), c * x.shape[3] * _signs(rng, (n, 2)))


def _stripe(x, c, rng, kind):
    w = x.shape[3]
    left, right = round(c[0] * w), round(c[1] * w)
    cols = np.arange(w)
    return np.where((cols < left) | (cols >= right), 1.0 - x, x)


#: family → (its corruption: a function of this module or the name of a five-level family whose formula it
#: takes, the released severity's constant)
FAMILIES = {
    "mnistc_shot_noise": ("shot_noise", SHOT_NOISE),
    "mnistc_impulse_noise": ("impulse_noise", IMPULSE_NOISE),
    "mnistc_brightness": ("brightness", BRIGHTNESS),
    "mnistc_shear": (_shear, SHEAR),
    "mnistc_rotate": (_rotate, ROTATION),
    "mnistc_scale": (_scale, SCALE),
    "mnistc_translate": (_translate, TRANSLATION),
    "mnistc_stripe": (_stripe, STRIPE),
}
