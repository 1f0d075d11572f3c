"""Image corruptions at graded severities, for evaluating calibration under dataset shift (docs/shift.md).

``corrupt(images, family, severity, seed)`` maps uint8 images ``[N, C, H, W]`` to corrupted images of the same
shape, vectorised over the images (numpy/scipy only) and deterministic given ``seed``.

* The image-corruption families (``gaussian_noise`` … ``elastic_transform``) follow the published generation
  code of Hendrycks & Dietterich (ICLR 2019; ``make_cifar_c.py``, ``make_imagenet_c.py``), with the severity
  constants of the image kind (:data:`CONSTANTS`): ``imagenet_c_grey`` for grey images (ImageNet-C's five levels
  as MNIST-C's ``corruptions.py`` carries them for 28 px digits; the MNIST-C benchmark itself uses one severity
  of other families, and none of gaussian noise, gaussian blur, contrast, pixelate or elastic), CIFAR-10-C's for
  colour images under 224 px, ImageNet-C's from 224 px. Constants in pixels are defined at the kind's side (28,
  32, 224 px) and scale with the side (:func:`severity_constant`).
  As the published files store ``np.uint8`` of the [0, 255] result, the intensities are truncated.
  ``gaussian_blur`` blurs both image axes, as the colour scripts and Gaussian blur's definition do;
  ``gaussian_blur_one_axis`` is MNIST-C's code's blur on its 2-D images (scikit-image's ``gaussian(...,
  multichannel=True)`` takes the width for channels and blurs down the columns only).
* ``rotate``, ``translate`` and their full grids ``rotate_full``, ``translate_full`` are Ovadia et al.'s
  rotated and translated MNIST (NeurIPS 2019, ``uq_benchmark_2019/mnist/data_lib.py``): rotation with
  ``scipy.ndimage.rotate`` (cubic spline, the canvas enlarged, then the centre cropped) by 15° steps, and a
  cyclic roll along the width by 2-pixel steps of 28.

* ``mnistc_*``: the MNIST-C benchmark's corruptions at its one published severity (:mod:`calbench.mnist_c`).

Intensities live in [0, 1] during a corruption and return to uint8 as clipped values.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import ndimage

from calbench import mnist_c

SEVERITIES = (1, 2, 3, 4, 5)

#: Severity constants (severity 1 … 5) of each image kind, from the published generation code.
#: ``gaussian_blur``: std in pixels; ``pixelate``: side of the box-downsampled image as a fraction;
#: ``elastic_transform``: (alpha, sigma, affine) as multiples of the side (ImageNet-C's 244 = its code's).
CONSTANTS = {
    "imagenet_c_grey": {
        "gaussian_noise": (0.08, 0.12, 0.18, 0.26, 0.38),
        "shot_noise": (60, 25, 12, 5, 3),
        "impulse_noise": (0.03, 0.06, 0.09, 0.17, 0.27),
        "gaussian_blur": (1, 2, 3, 4, 6),
        "contrast": (0.4, 0.3, 0.2, 0.1, 0.05),
        "brightness": (0.1, 0.2, 0.3, 0.4, 0.5),
        "pixelate": (0.6, 0.5, 0.4, 0.3, 0.25),
        "elastic_transform": ((2, 0.7, 0.1), (2, 0.08, 0.2), (0.05, 0.01, 0.02), (0.07, 0.01, 0.02),
                              (0.12, 0.01, 0.02)),
    },
    "cifar10_c": {
        "gaussian_noise": (0.04, 0.06, 0.08, 0.09, 0.10),
        "shot_noise": (500, 250, 100, 75, 50),
        "impulse_noise": (0.01, 0.02, 0.03, 0.05, 0.07),
        "gaussian_blur": (0.4, 0.6, 0.7, 0.8, 1.0),
        "contrast": (0.75, 0.5, 0.4, 0.3, 0.15),
        "brightness": (0.05, 0.1, 0.15, 0.2, 0.3),
        "pixelate": (0.95, 0.9, 0.85, 0.75, 0.65),
        "elastic_transform": ((0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05),
                              (0.1, 0.03, 0.03)),
    },
}
CONSTANTS["imagenet_c"] = {**CONSTANTS["imagenet_c_grey"], "elastic_transform": tuple(
    tuple(v * 244 / 224 for v in c) for c in CONSTANTS["imagenet_c_grey"]["elastic_transform"])}
#: The side (pixels) at which each kind's constants are defined.
REFERENCE_SIDE = {"imagenet_c_grey": 28, "cifar10_c": 32, "imagenet_c": 224}
KINDS = ("auto", *REFERENCE_SIDE)
#: The smallest std (pixels) of ``gaussian_blur`` at severity 1 (:func:`blur_scale`): at 0.25 px the filter has
#: three taps and changes an 8-bit image; below about 0.12 px it has one tap.
MIN_BLUR_STD = 0.25
#: Former kind names, refused with the new one.
RENAMED_KINDS = {"mnist_c": "imagenet_c_grey"}

#: Ovadia et al.'s grids: rotation by 15° … 180°, roll by 2 … 26 of 28 pixels; the five-severity families take
#: their first five steps.
ROTATE_GRID = tuple(range(15, 181, 15))
TRANSLATE_GRID = tuple(k / 28 for k in range(2, 28, 2))


def image_kind(images: np.ndarray) -> str:
    """The constants of ``images`` [N, C, H, W]: ImageNet-C's at a 28 px side (grey), CIFAR-10-C's (colour,
    side < 224) or ImageNet-C's (colour, from 224 px)."""
    return kind_at(images.shape[1], max(images.shape[2:]))


def kind_at(channels: int, side: int) -> str:
    """:func:`image_kind` of images of ``channels`` channels and ``side`` pixels."""
    if channels == 1:
        return "imagenet_c_grey"
    return "imagenet_c" if side >= 224 else "cifar10_c"


def downsampled_sides(side: int, fractions) -> list[int]:
    """``pixelate``'s downsampled sides: ``int(side · c)`` as published, made distinct and below ``side`` (where
    two severities truncate to the same side, 8 px: ``int(8c)`` = 7, 7, 6, 6, 5, the weaker one is raised by a
    pixel, and where that reaches ``side``, the stronger ones are lowered instead), then made to change
    :func:`pixelate_reference` more at each severity: where they do not, the decreasing sides that do and move
    the fewest pixels in all from them, of those the ones that make the fewest severities stronger (a smaller
    side), then the smallest. A box resize by a non-integer ratio aliases (28 → 16 px, a ratio of 1.75, changes
    an image more than 28 → 14 px): at 28 px grey the sides 16, 14, 11, 8, 7 become 17, 14, 11, 9, 7."""
    return list(_growing_sides(int(side), tuple(fractions)))


@functools.lru_cache(maxsize=64)
def _growing_sides(side: int, fractions: tuple) -> tuple[int, ...]:
    n = [int(side * c) for c in fractions]
    for i in range(len(n) - 2, -1, -1):
        n[i] = max(n[i], n[i + 1] + 1)
    n[0] = min(n[0], side - 1)
    for i in range(1, len(n)):
        n[i] = min(n[i], n[i - 1] - 1)
    if n[-1] < 1:
        raise ValueError(f"pixelate needs images of at least {len(n) + 1} pixels a side, got {side}")
    reference = pixelate_reference(side)
    if np.all(np.diff([pixelate_change(reference, k) for k in n]) > 0):
        return tuple(n)
    sides = np.arange(1, side)
    change = np.array([pixelate_change(reference, k) for k in sides])
    # cost[k]: of the sides of severities k … 5 with severity k's side sides[j], the least cost (pixels moved,
    # plus 1e-3 per severity made stronger); a weaker severity's side is larger and changes the reference less
    follows = (sides[:, None] > sides[None, :]) & (change[:, None] < change[None, :])
    cost, choice = np.abs(sides - n[-1]) + 1e-3 * (sides < n[-1]), []
    for target in n[-2::-1]:
        totals = np.where(follows, cost[None, :], np.inf)
        choice.append(totals.argmin(axis=1))
        cost = np.abs(sides - target) + 1e-3 * (sides < target) + totals.min(axis=1)
    if not np.isfinite(cost.min()):
        raise ValueError(f"pixelate: no {len(n)} sides below {side} px change the reference more at each severity; "
                         "give images of another side")
    path = [int(cost.argmin())]
    for step in reversed(choice):
        path.append(int(step[path[-1]]))
    return tuple(int(sides[j]) for j in path)


#: Pixels of :func:`pixelate_reference` at every side (a few hundred 28 px images, two at 224 px).
REFERENCE_PIXELS = 2**17


def pixelate_reference(side: int) -> np.ndarray:
    """The fixed images (uint8 ``[m, 1, side, side]``, :data:`REFERENCE_PIXELS` pixels, at least two) on which
    :func:`downsampled_sides` orders pixelate's severities: Gaussian noise of amplitude spectrum 1/f (frequency f
    in cycles per pixel; the mean removed), the spectrum of natural images (Field, JOSA A 1987), each image
    stretched to 0-255. Its draws are ``numpy.random.default_rng(0)``'s: the same images wherever calbench runs."""
    m = max(2, REFERENCE_PIXELS // side**2)
    freq = np.fft.fftfreq(side)
    amplitude = np.hypot(freq[:, None], freq[None, :])
    amplitude[0, 0] = np.inf
    noise = np.fft.ifft2(np.fft.fft2(np.random.default_rng(0).standard_normal((m, side, side))) / amplitude).real
    lo, span = noise.min(axis=(1, 2), keepdims=True), np.ptp(noise, axis=(1, 2), keepdims=True)
    return np.rint((noise - lo) / span * 255)[:, None].astype(np.uint8)


def pixelate_change(images: np.ndarray, small: int) -> float:
    """The mean absolute change (grey levels) of uint8 ``images`` pixelated through ``small`` px, as
    :func:`corrupt` stores it."""
    x = images.astype(np.float64)
    return float(np.abs(np.rint(np.clip(_pixelate(x / 255, small, None, None), 0, 1) * 255) - x).mean())


def roll_pixels(side: int, fractions) -> np.ndarray:
    """Ovadia et al.'s roll by whole pixels, ``round(f · side)``; at a side where two of ``fractions`` would
    round to the same roll (8 px), the exact fractional shift ``f · side`` instead (a cyclic linear
    interpolation between the two neighbouring rolls)."""
    exact = np.asarray(fractions) * side
    whole = np.rint(exact)
    return whole if len(np.unique(whole)) == len(whole) and whole.min() > 0 else exact


def _gaussian_noise(x, c, rng, kind):
    return x + rng.normal(scale=c, size=x.shape)


def _shot_noise(x, c, rng, kind):
    return rng.poisson(x * c) / c


def _impulse_noise(x, c, rng, kind):
    """scikit-image's ``random_noise(mode='s&p', amount=c)``: a fraction c of the values flipped, half to 0."""
    flipped, salted = rng.random(x.shape) < c, rng.random(x.shape) < 0.5
    return np.where(flipped, salted.astype(float), x)


def blur_scale(kind: str, side: int) -> float:
    """The factor on ``gaussian_blur``'s published stds at ``side`` pixels: ``side / reference side``, raised
    where that would put severity 1 below :data:`MIN_BLUR_STD` px (CIFAR-10-C's 0.4 px at 8 px: 0.1 px, a kernel
    of one tap, the identity), so that the five stds keep their published ratios and every one changes the image."""
    return max(side / REFERENCE_SIDE[kind], MIN_BLUR_STD / CONSTANTS[kind]["gaussian_blur"][0])


def _gaussian_blur(x, c, rng, kind, axes=(2, 3)):
    """A Gaussian filter of std c px (scaled to the side, :func:`blur_scale`) along ``axes``, edges repeated,
    truncated at 4 std."""
    sigma = c * blur_scale(kind, x.shape[3])
    return ndimage.gaussian_filter(x, sigma=[sigma if axis in axes else 0 for axis in range(4)], mode="nearest",
                                   truncate=4.0)


def _gaussian_blur_one_axis(x, c, rng, kind):
    """MNIST-C's published code on a 2-D image: the blur along the height only (down each column)."""
    return _gaussian_blur(x, c, rng, kind, axes=(2,))


def _contrast(x, c, rng, kind):
    means = x.mean(axis=(2, 3), keepdims=True)
    return (x - means) * c + means


def _brightness(x, c, rng, kind):
    """HSV value + c with hue and saturation kept: each channel scales by V'/V (a black pixel turns grey); on a
    grey image (MNIST-C's grey → RGB → HSV → grey) it is x + c."""
    value = x.max(axis=1, keepdims=True)
    raised = np.clip(value + c, 0.0, 1.0)
    return np.where(value > 0, x * raised / np.where(value > 0, value, 1.0), raised)


def box_weights(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] weights of PIL's ``Image.resize(..., BOX)`` along one axis (Pillow's ``precompute_coeffs``
    with the box filter of support 1/2): area averaging when shrinking, nearest neighbour when enlarging."""
    scale = n_in / n_out
    filterscale = max(scale, 1.0)
    centre = (np.arange(n_out) + 0.5) * scale
    lo = np.maximum((centre - 0.5 * filterscale + 0.5).astype(int), 0)
    hi = np.minimum((centre + 0.5 * filterscale + 0.5).astype(int), n_in)
    x = np.arange(n_in)[None, :]
    arg = (x - centre[:, None] + 0.5) / filterscale
    weights = ((arg > -0.5) & (arg <= 0.5) & (x >= lo[:, None]) & (x < hi[:, None])).astype(float)
    return weights / weights.sum(axis=1, keepdims=True)


def _resize_box(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """PIL's BOX resize of [0, 255] values: the width, then the height, each pass rounded to uint8 as PIL's."""
    h, w = x.shape[2:]
    x = np.floor(np.einsum("nchw,vw->nchv", x, box_weights(w, width)) + 0.5)
    return np.floor(np.einsum("nchw,uh->ncuw", x, box_weights(h, height)) + 0.5)


def _pixelate(x, n, rng, kind):
    h, w = x.shape[2:]
    return _resize_box(_resize_box(np.floor(x * 255 + 0.5), n, n), h, w) / 255


def _affine_from_points(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """[N, 2, 3] affine maps taking the three (x, y) points ``src`` [3, 2] to ``dst`` [N, 3, 2] (OpenCV's
    ``getAffineTransform``)."""
    design = np.hstack([src, np.ones((3, 1))])
    return np.linalg.solve(design, dst).transpose(0, 2, 1)


def _elastic_transform(x, c, rng, kind):
    """The published elastic transform: a random affine warp of the three points at ±side/3 about the centre
    by up to ``affine`` pixels, then a displacement field of uniform noise smoothed by a Gaussian of std
    ``sigma`` (truncated at 3) times ``alpha``; bilinear, the border reflected (colour) or black (grey)."""
    n, channels, h, w = x.shape
    alpha, sigma, affine = (v * w for v in c)
    centre, half = np.float32([h, w]) // 2, min(h, w) // 3
    src = np.array([centre + half, [centre[0] + half, centre[1] - half], centre - half], dtype=float)
    maps = _affine_from_points(src, src + rng.uniform(-affine, affine, size=(n, 3, 2)))
    inverse = np.linalg.inv(np.concatenate([maps, np.broadcast_to([[[0.0, 0.0, 1.0]]], (n, 1, 3))], axis=1))
    rows, cols = np.mgrid[:h, :w].astype(float)
    src_x = inverse[:, 0, 0, None, None] * cols + inverse[:, 0, 1, None, None] * rows + inverse[:, 0, 2, None, None]
    src_y = inverse[:, 1, 0, None, None] * cols + inverse[:, 1, 1, None, None] * rows + inverse[:, 1, 2, None, None]
    grey = kind == "imagenet_c_grey"
    index = np.broadcast_to(np.arange(n)[:, None, None, None], (n, channels, h, w))
    chan = np.broadcast_to(np.arange(channels)[None, :, None, None], (n, channels, h, w))

    def sample(image, y, x_, mode):
        y, x_ = np.broadcast_to(y[:, None], image.shape), np.broadcast_to(x_[:, None], image.shape)
        return ndimage.map_coordinates(image, [index, chan, y, x_], order=1, mode=mode)

    warped = sample(x, src_y, src_x, "grid-constant" if grey else "mirror")
    fields = alpha * ndimage.gaussian_filter(rng.uniform(-1.0, 1.0, size=(2, n, h, w)), sigma=(0, 0, sigma, sigma),
                                             mode="reflect", truncate=3.0)
    return sample(warped, rows + fields[1], cols + fields[0], "constant" if grey else "reflect")


def _rotate(x, degrees, rng, kind):
    """Ovadia et al.: ``scipy.ndimage.rotate`` (cubic spline, black fill, the canvas enlarged), centre crop."""
    h, w = x.shape[2:]
    out = ndimage.rotate(x, degrees, axes=(3, 2), reshape=True, order=3, mode="constant", cval=0.0)
    top, left = out.shape[2] // 2 - h // 2, out.shape[3] // 2 - w // 2
    return out[:, :, top:top + h, left:left + w]


def _translate(x, shift, rng, kind):
    """Ovadia et al.: a cyclic roll along the width (sub-pixel shifts interpolate linearly, cyclically)."""
    if float(shift).is_integer():
        return np.roll(x, int(shift), axis=3)
    return ndimage.shift(x, (0, 0, 0, shift), order=1, mode="grid-wrap")


#: family → (corruption ``f(x in [0, 1], constant, rng, kind)``, its levels, Ovadia et al.'s geometric family?)
FAMILIES = {
    "rotate": (_rotate, ROTATE_GRID[:5]),
    "translate": (_translate, TRANSLATE_GRID[:5]),
    "rotate_full": (_rotate, ROTATE_GRID),
    "translate_full": (_translate, TRANSLATE_GRID),
    **{name: (globals()[f"_{name}"], SEVERITIES) for name in CONSTANTS["imagenet_c_grey"]},
    "gaussian_blur_one_axis": (_gaussian_blur_one_axis, SEVERITIES),
    # the MNIST-C benchmark's families, one severity each (calbench.mnist_c); after the others, whose draws stay
    **{name: (globals()[f"_{f}"] if isinstance(f, str) else f, (c,)) for name, (f, c) in mnist_c.FAMILIES.items()},
}
GEOMETRIC = ("rotate", "translate", "rotate_full", "translate_full")


def levels(family: str) -> tuple[int, ...]:
    """The severities a family takes: 1-5, 1-12 (``rotate_full``) and 1-13 (``translate_full``), or 1 (the
    ``mnistc_*`` families)."""
    if family not in FAMILIES:
        raise ValueError(f"corruption family {family!r} is unknown; known: {', '.join(FAMILIES)}")
    return tuple(range(1, len(FAMILIES[family][1]) + 1))


def elastic_constants(published) -> list[tuple[float, float, float]]:
    """``elastic_transform``'s (alpha, sigma, affine) at severities 1-5, *scaled*: the published constants are
    not monotone (ImageNet-C's severities 1-2 move the image more than 3-5 at every side), so severity k takes
    the published severity 5 with the displacement field's scale alpha and the affine's range times k / 5 (the
    smoothing sigma kept): both displacements grow linearly with the severity."""
    alpha, sigma, affine = published[-1]
    return [(alpha * k / 5, sigma, affine * k / 5) for k in SEVERITIES]


def severity_constant(family: str, severity: int, kind: str, side: int):
    """The constant ``family`` applies at ``severity`` to images of ``kind`` and ``side`` pixels: the published
    one, pixel sizes scaled to the side (``pixelate``: :func:`downsampled_sides`; ``translate``:
    :func:`roll_pixels`; ``gaussian_blur``'s std and ``elastic_transform``'s in the corruption itself), except
    ``elastic_transform``'s, scaled to grow with the severity (:func:`elastic_constants`)."""
    grid = FAMILIES[family][1]
    if family in mnist_c.FAMILIES:
        return grid[0]
    if family.startswith("rotate"):
        return float(grid[severity - 1])
    if family.startswith("translate"):
        return float(roll_pixels(side, grid)[severity - 1])
    constants = CONSTANTS[kind][family.removesuffix("_one_axis")]
    if family == "pixelate":
        return downsampled_sides(side, constants)[severity - 1]
    if family == "elastic_transform":
        return elastic_constants(constants)[severity - 1]
    return constants[severity - 1]


def scaled_constants(families, channels: int, side: int) -> dict[str, str]:
    """Of ``families``, those that run at ``side`` px (``channels`` channels) with constants other than the
    published ones taken as fractions of the side, each with what it runs with: ``pixelate`` where
    :func:`downsampled_sides` changed an ``int(side · c)``, ``gaussian_blur`` (and its one-axis variant) where
    :func:`blur_scale` is not 1, ``elastic_transform`` always (:func:`elastic_constants`), ``translate`` where
    :func:`roll_pixels` is not Ovadia's 2 … px of 28."""
    kind = kind_at(channels, side)
    out = {}
    for family in families:
        base = family.removesuffix("_one_axis").removesuffix("_full")
        if base == "pixelate":
            sides, published = downsampled_sides(side, CONSTANTS[kind][base]), [int(side * c) for c in
                                                                                CONSTANTS[kind][base]]
            if sides != published:
                out[family] = (f"downsampled sides {', '.join(map(str, sides))} px (int(side · c): "
                               f"{', '.join(map(str, published))})")
        elif base == "gaussian_blur" and blur_scale(kind, side) != 1:
            out[family] = f"the published stds × {blur_scale(kind, side):.3g}"
        elif base == "elastic_transform":
            out[family] = "severity k: the published severity 5 with α and γ × k/5"
        elif base == "translate" and side != 28:
            rolls = roll_pixels(side, FAMILIES[family][1])
            out[family] = f"rolls {', '.join(f'{v:.3g}' for v in rolls[:5])}{' …' if len(rolls) > 5 else ''} px"
    return out


def corrupt(images: np.ndarray, family: str, severity: int, seed=0, kind: str = "auto") -> np.ndarray:
    """``images`` (uint8 ``[N, C, H, W]``) corrupted by ``family`` at ``severity``, as uint8.

    ``kind``: whose severity constants (``auto``: :func:`image_kind`; or ``imagenet_c_grey``, ``cifar10_c``,
    ``imagenet_c``). The random draws depend on ``seed`` (an int or a sequence of ints, e.g. ``[seed, chunk]``),
    ``family`` and ``severity`` only (``elastic_transform``: not the severity), so a shifted test set is the same
    whoever makes it and whichever other sets are made beside it.
    """
    if severity not in levels(family):
        if family in mnist_c.FAMILIES:
            raise ValueError(f"corruption {family} is MNIST-C's at its one published severity: give severity 1, "
                             f"got {severity!r}")
        raise ValueError(f"corruption {family} takes severities {list(levels(family))}, got {severity!r}")
    if kind in RENAMED_KINDS:
        raise ValueError(f"corruption constants {kind!r} are now called {RENAMED_KINDS[kind]!r}: they are "
                         "ImageNet-C's five levels for grey images, which the MNIST-C benchmark does not use")
    if kind not in KINDS:
        raise ValueError(f"corruption constants {kind!r} are unknown; known: {', '.join(KINDS)}")
    images = np.asarray(images)
    if images.ndim != 4 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 images [N, C, H, W], got {images.dtype} of shape {images.shape}")
    if family == "gaussian_blur_one_axis" and images.shape[1] != 1:
        raise ValueError(f"gaussian_blur_one_axis is MNIST-C's code's blur of grey digits (one axis of a 2-D "
                         f"image); these images have {images.shape[1]} channels: shift them by gaussian_blur")
    if family in mnist_c.FAMILIES and images.shape[1] != 1:
        raise ValueError(f"{family} is the MNIST-C benchmark's corruption of grey digits; these images have "
                         f"{images.shape[1]} channels")
    kind = image_kind(images) if kind == "auto" else kind
    function = FAMILIES[family][0]
    # elastic_transform draws the same field at every severity (its displacements scale with it)
    stream = 0 if family == "elastic_transform" else severity
    rng = np.random.default_rng([*np.atleast_1d(seed).tolist(), list(FAMILIES).index(family), stream])
    constant = severity_constant(family, severity, kind, images.shape[3])
    out = np.clip(function(images.astype(np.float64) / 255.0, constant, rng, kind), 0.0, 1.0) * 255.0
    # the published files store np.uint8 of the result (truncation); Ovadia et al. keep floats: the nearest
    return (np.rint(out) if family in GEOMETRIC or family == "pixelate" else out).astype(np.uint8)


def gaussian_perturbation(images: np.ndarray, epsilon: float, seed=0, clip: bool = False) -> np.ndarray:
    """``images`` (uint8 ``[N, C, H, W]``) plus Gaussian noise N(0, ε²) on the [0, 1] intensity scale, as float32
    on the [0, 255] scale: the perturbation of the calibration images of Tomani et al. (CVPR 2021), neither
    clipped nor rounded as in the authors' CIFAR branch; ``clip``: clipped to [0, 255] as their ImageNet
    branch. The standard-normal draws depend on ``seed`` only, so the images perturbed at two strengths differ
    by the noise's scale alone and the accuracy falls smoothly with ``epsilon``."""
    images = np.asarray(images)
    if images.ndim != 4 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 images [N, C, H, W], got {images.dtype} of shape {images.shape}")
    if not np.isfinite(epsilon) or epsilon < 0:
        raise ValueError(f"the noise's standard deviation must be finite and >= 0, got {epsilon!r}")
    out = images.astype(np.float64) / 255.0 + epsilon * np.random.default_rng(seed).standard_normal(images.shape)
    return ((np.clip(out, 0.0, 1.0) if clip else out) * 255.0).astype(np.float32)
