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
* ``mnistc_fog`` (severity 5), ``mnistc_spatter`` (severity 4), ``mnistc_dotted_line``, ``mnistc_zigzag``,
  ``mnistc_canny_edges``, ``mnistc_glass_blur`` (severity 1): :func:`_fog`, :func:`_spatter`,
  :func:`_dotted_line`, :func:`_zigzag`, :func:`canny`, :func:`_glass_blur`.
* ``mnistc_motion_blur`` (severity 1): ImageMagick's motion blur with radius 10 and sigma 3 px of 28 at an angle
  uniform on ±45° per image, as the code calls Wand's ``motion_blur`` (:func:`motion_blur`).
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
FOG = (3.0, 1.4)  # severity 5: the fog's strength and the fractal's decay
GLASS_BLUR = (0.7, 1, 2)  # severity 1: the blur's std, the largest offset, the passes
SPATTER = (0.65, 0.3, 1, 0.65, 1.5)  # severity 4: field mean, std, blur, threshold, mask blur (px of 28)
MOTION_BLUR = (10, 3, 45)  # severity 1: ImageMagick's radius and sigma (px of 28), the largest angle (degrees)


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


def plasma_fractal(rng, n: int, decay: float, size: int = 256) -> np.ndarray:
    """[n, size, size] diamond-square height maps in [0, 1] (the code's ``plasma_fractal``, after FLHerne's
    mapgen): each step sets the centres of the squares, then of the diamonds, to the mean of their four corners
    plus ``w · U(−w, w)``, the wibble w starting at 100 and divided by ``decay`` at each halving of the step."""
    heights = np.zeros((n, size, size))
    step, wibble = size, 100.0

    def wibbled(total):
        return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = heights[:, ::step, ::step]
        square = corners + np.roll(corners, -1, axis=1)
        heights[:, half::step, half::step] = wibbled(square + np.roll(square, -1, axis=2))
        centres, corners = heights[:, half::step, half::step], heights[:, ::step, ::step]
        left = (centres + np.roll(centres, 1, axis=1)) + (corners + np.roll(corners, -1, axis=2))
        heights[:, ::step, half::step] = wibbled(left)
        top = (centres + np.roll(centres, 1, axis=2)) + (corners + np.roll(corners, -1, axis=1))
        heights[:, half::step, ::step] = wibbled(top)
        step, wibble = half, wibble / decay
    heights -= heights.min(axis=(1, 2), keepdims=True)
    return heights / heights.max(axis=(1, 2), keepdims=True)


def _fog(x, c, rng, kind):
    """x + c₀ · a plasma fractal of decay c₁ (its top-left H × W pixels), scaled by max / (max + c₀)."""
    strength, decay = c
    n, _, h, w = x.shape
    fog = plasma_fractal(rng, n, decay)[:, None, :h, :w]
    top = x.max(axis=(1, 2, 3), keepdims=True)
    return (x + strength * fog) * top / (top + strength)


def _blur(x, sigma):
    """scikit-image's ``gaussian`` of each image: both axes, edges repeated, truncated at 4 std."""
    return ndimage.gaussian_filter(x, (0, 0, sigma, sigma), mode="nearest", truncate=4.0)


def _spatter(x, c, rng, kind):
    """Mud: a normal field (mean c₀, std c₁) blurred by c₂ px, kept above c₃; its mask blurred by c₄ px and kept
    from 0.8 is the mud's opacity m; the image becomes x·(1 − m) + (63/255)·m."""
    mean, std, sigma, threshold, mask_sigma = c
    scale = x.shape[3] / 28
    liquid = _blur(rng.normal(mean, std, size=x.shape), sigma * scale)
    mask = _blur((liquid > threshold).astype(float), mask_sigma * scale)
    mask = np.where(mask < 0.8, 0.0, mask)
    return x * (1 - mask) + 63 / 255 * mask


def line(side: int, c0, r0, c1, r1) -> np.ndarray:
    """[n, side, side] the code's ``line_from_points`` for each row of the (column, row) end points: intensity
    1 + log(1 − d/2.3) at vertical distance d < 2.3 px from the line (clipped to [0, 1]), zero left of
    floor(c0) and from ceil(c1); lengths in pixels of 28 scaled to ``side``."""
    scale = side / 28
    grid = np.arange(side)[None, None, :] / scale
    c0, r0, c1, r1 = (np.asarray(v, dtype=float)[:, None, None] for v in (c0, r0, c1, r1))
    rows, cols = grid.transpose(0, 2, 1), grid
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(c1 == c0, 0.0, (r1 - r0) / np.where(c1 == c0, 1.0, c1 - c0))
    distance = np.clip(np.abs(rows - (slope * (cols - c0) + r0)), 0, 2.3 - 1e-10)
    value = np.clip(np.log(1 - distance / 2.3) + 1, 0, 1)
    inside = (cols >= np.floor(c0)) & (cols < np.ceil(c1)) & (c1 != c0)
    return np.where(inside, value, 0.0)


def _dotted_line(x, c, rng, kind):
    """A line from (0, r₀) to (27, r₁), r uniform on the integers 0-26, kept on every other pair of columns
    (columns 2-3, 6-7, … of 28)."""
    n, _, _, w = x.shape
    ends = rng.integers(0, 27, size=(n, 2))
    strokes = line(w, np.zeros(n), ends[:, 0], np.full(n, 27.0), ends[:, 1])
    dashes = (np.floor(np.arange(w) * 28 / w) // 2) % 2 == 1
    return x + (strokes * dashes)[:, None]


def _zigzag(x, c, rng, kind):
    """The code's zigzag: from (2, r₀) towards (25, r₁) (r₀ uniform on 0-26, r₁ − r₀ on −5 … 4), a line of
    length d = 23 / cos θ with corners at (2i + 1)·2 along it, alternately ±2 across it, and a last point at
    (d, −(−1)ᵏ·2 / (2 (d − 4⌊d/4⌋))) as the code writes it; each of its segments is drawn by :func:`line` and added,
    the image clipped to [0, 1] after each."""
    n, _, _, w = x.shape
    length, width, start, end = 2.0, 2.0, 2.0, 25.0
    r0 = rng.integers(0, 27, size=n).astype(float)
    r1 = r0 + rng.integers(-5, 5, size=n)
    theta = np.arctan((r1 - r0) / (end - start))
    d = (end - start) / np.cos(theta)
    corners = ((d - length) // (2 * length)).astype(int) + 1
    i = np.arange(corners.max())
    along = np.where(i < corners[:, None], (2 * i + 1) * length, np.nan)
    across = np.where(i < corners[:, None], (-1.0) ** i * width, np.nan)
    last_across = (-1.0) ** (corners - 1) * width
    whole = 2 * length * (d // (2 * length))
    with np.errstate(divide="ignore"):
        tail = np.where(d != whole, last_across / (2 * (d - whole)), np.nan)
    along = np.column_stack([np.zeros(n), along, np.where(d != whole, d, np.nan)])
    across = np.column_stack([np.zeros(n), across, tail])
    cols = np.cos(theta)[:, None] * along - np.sin(theta)[:, None] * across + start
    rows = np.sin(theta)[:, None] * along + np.cos(theta)[:, None] * across + r0[:, None]
    # the points of each image in order, the missing ones (NaN) dropped: gather the present ones to the front
    order = np.argsort(np.isnan(cols), axis=1, kind="stable")
    cols, rows = np.take_along_axis(cols, order, 1), np.take_along_axis(rows, order, 1)
    for k in range(1, cols.shape[1]):
        present = ~np.isnan(cols[:, k])
        segment = line(w, np.where(present, cols[:, k - 1], 0), np.where(present, rows[:, k - 1], 0),
                       np.where(present, cols[:, k], 0), np.where(present, rows[:, k], 0))
        x = np.clip(x + segment[:, None], 0.0, 1.0)
    return x


def _along(values: np.ndarray, di: np.ndarray, dj: np.ndarray) -> np.ndarray:
    """``values`` [N, H, W] at each pixel's neighbour (row + di, column + dj), zero outside the image."""
    padded = np.pad(values, ((0, 0), (1, 1), (1, 1)))
    n, h, w = values.shape
    rows = np.arange(h)[None, :, None] + 1 + di
    cols = np.arange(w)[None, None, :] + 1 + dj
    return padded[np.arange(n)[:, None, None], rows, cols]


def canny(images: np.ndarray, sigma: float, low: float = 0.1, high: float = 0.2) -> np.ndarray:
    """Canny's edge detector (Canny 1986) on [N, H, W] images in [0, 1], as scikit-image's ``feature.canny`` with
    its defaults: a Gaussian of std ``sigma`` with zeros outside, normalised by the same filter of ones; Sobel
    gradients (edges reflected); each pixel off the border kept where its magnitude is at least the magnitudes at
    the two points one step along and against the gradient (each interpolated linearly between the axis and
    the diagonal neighbour that bracket the direction); then the kept pixels of magnitude >= ``low`` whose
    8-connected group holds one >= ``high``."""
    def smooth(a):
        return ndimage.gaussian_filter(a, (0, sigma, sigma), mode="constant", cval=0.0, truncate=4.0)

    smoothed = smooth(images) / (smooth(np.ones_like(images)) + np.finfo(float).eps)

    def sobel(axis):
        other = 2 if axis == 1 else 1
        derivative = ndimage.correlate1d(smoothed, [-1.0, 0.0, 1.0], axis=axis, mode="reflect")
        return ndimage.correlate1d(derivative, [1.0, 2.0, 1.0], axis=other, mode="reflect")

    gi, gj = sobel(1), sobel(2)
    magnitude = np.hypot(gi, gj)
    rows_major = np.abs(gi) >= np.abs(gj)
    major, minor = np.where(rows_major, np.abs(gi), np.abs(gj)), np.where(rows_major, np.abs(gj), np.abs(gi))
    weight = np.divide(minor, major, out=np.zeros_like(major), where=major > 0)
    si, sj = np.sign(gi).astype(int), np.sign(gj).astype(int)
    axis_i, axis_j = np.where(rows_major, si, 0), np.where(rows_major, 0, sj)
    keep = np.ones_like(magnitude, dtype=bool)
    for sign in (1, -1):
        neighbour = (weight * _along(magnitude, sign * si, sign * sj)
                     + (1 - weight) * _along(magnitude, sign * axis_i, sign * axis_j))
        keep &= neighbour <= magnitude
    interior = np.zeros_like(keep)
    interior[:, 1:-1, 1:-1] = True
    weak = keep & interior & (magnitude > 0) & (magnitude >= low)
    labels, count = ndimage.label(weak, structure=np.pad(np.ones((1, 3, 3), bool), ((1, 1), (0, 0), (0, 0))))
    strong = np.zeros(count + 1, dtype=bool)
    strong[labels[weak & (magnitude >= high)]] = True
    return strong[labels]


def _canny_edges(x, c, rng, kind):
    """The image replaced by its Canny edges (white on black), the smoothing's std 1 px of 28."""
    return canny(x[:, 0], sigma=c * x.shape[3] / 28)[:, None].astype(float)


def _glass_blur(x, c, rng, kind):
    """The code's glass blur: blur by std c₀ px down the columns only (its ``gaussian(..., multichannel=True)`` on
    a 2-D digit), truncate to uint8, then c₂ passes over the pixels from the bottom-right corner to the
    (c₁ + 1)-th row and column, each pixel swapped, with probability 1/2, with its neighbour at an offset whose
    components are uniform on −c₁ … c₁ − 1 (the code's ``randint(-c₁, c₁)``); blurred again. The passes are
    sequential over the pixels (each swap moves what later ones see) and vectorised over the images."""
    sigma, delta, passes = c
    n, _, h, w = x.shape
    scale = w / 28

    def blur(a):
        return ndimage.gaussian_filter(a, (0, 0, sigma * scale, 0), mode="nearest", truncate=4.0)

    delta = max(1, round(delta * scale))
    grey = np.floor(blur(x)[:, 0] * 255)
    images = np.arange(n)
    for _ in range(passes):
        for row in range(h - delta, delta, -1):
            for col in range(w - delta, delta, -1):
                swap = np.asarray(rng.choice([True, False], size=n), dtype=bool)
                dx, dy = np.asarray(rng.integers(-delta, delta, size=(n, 2))).T
                chosen = images[swap]
                r, k = row + dy[swap], col + dx[swap]
                here, there = grey[chosen, row, col], grey[chosen, r, k]
                grey[chosen, row, col], grey[chosen, r, k] = there, here
    return blur(grey[:, None] / 255)


def motion_blur(x: np.ndarray, radius: float, sigma: float, angles: np.ndarray) -> np.ndarray:
    """ImageMagick's motion blur (``MotionBlurImage``, which Wand's ``motion_blur`` calls) of grey images ``x``
    ([N, 1, H, W] in [0, 1]) at ``angles`` (degrees, one per image), on its 16-bit quantum scale and written as the
    8-bit PNG the code decodes.

    The kernel is one-sided: width m = 2⌈radius⌉ + 1 taps (ImageMagick's optimal 1-D width for a given radius),
    tap i weighted exp(−i²/(2σ²)) normalised to sum 1 and placed at the integer offset
    (⌈i·cos θ − ½⌉, ⌈i·sin θ − ½⌉) (column, row), the direction computed as ImageMagick does, through the point
    (m sin θ, m cos θ) over its length, so that the rounding of the offsets at exact halves (θ = −30°) is its own.
    Pixels beyond the border repeat the nearest edge pixel (the default virtual-pixel method). The sum is on the
    quantum scale (a grey level g read from the 8-bit PNG is 257·g), rounded to a 16-bit quantum and written to
    8 bits as ⌊q/257⌋, which equals the authors' code's output on every golden pixel (tests/unit/test_mnist_c.py).
    Vectorised over the images and pixels; one pass per tap."""
    width = int(2 * np.ceil(radius) + 1)
    taps = np.arange(width)
    weights = np.exp(-(taps**2) / (2 * sigma**2))
    weights /= weights.sum()
    theta = np.pi * np.asarray(angles, dtype=float) / 180
    across, down = width * np.sin(theta), width * np.cos(theta)
    length = np.hypot(across, down)
    dx = np.ceil(taps * (down / length)[:, None] - 0.5).astype(int)  # [N, width]
    dy = np.ceil(taps * (across / length)[:, None] - 0.5).astype(int)
    n, _, h, w = x.shape
    rows, cols = np.mgrid[:h, :w]
    images = np.arange(n)[:, None, None]
    quantum = x[:, 0] * 65535.0
    total = np.zeros((n, h, w))
    for tap in range(width):
        r = np.clip(rows + dy[:, tap, None, None], 0, h - 1)
        c = np.clip(cols + dx[:, tap, None, None], 0, w - 1)
        total += weights[tap] * quantum[images, r, c]
    return (np.floor(np.floor(total + 0.5) / 257) / 255)[:, None]


def _motion_blur(x, c, rng, kind):
    radius, sigma, largest = c
    scale = x.shape[3] / 28
    return motion_blur(x, radius * scale, sigma * scale, rng.uniform(-largest, largest, size=x.shape[0]))


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
    "mnistc_fog": (_fog, FOG),
    "mnistc_spatter": (_spatter, SPATTER),
    "mnistc_dotted_line": (_dotted_line, None),
    "mnistc_zigzag": (_zigzag, None),
    "mnistc_canny_edges": (_canny_edges, 1.0),
    "mnistc_glass_blur": (_glass_blur, GLASS_BLUR),
    "mnistc_motion_blur": (_motion_blur, MOTION_BLUR),
}
