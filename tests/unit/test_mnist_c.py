"""The MNIST-C benchmark's families (calbench.mnist_c) against the authors' code (google-research/mnist-c
``corruptions.py``, Mu & Gilmer 2019) at its released severities.

``tests/golden/mnistc_golden.npz`` is that code's output on two 28 px digits, made outside this project by
``scripts/mnistc_golden.py`` (which records how and with which package versions). Tolerance: one grey level, as
both outputs are truncated to uint8 after float arithmetic in a different order (the code's float32 and
scikit-image's own bilinear loop, calbench's float64 and ``scipy.ndimage.map_coordinates``), so a value within
rounding of an integer can fall on either side of it. The random directions are fed to both (the golden's with
``np.random.choice`` fixed, calbench's through the rng argument); the noise families are checked by their
statistics, as their draws cannot be matched. ``tests/golden/mnistc_motion_golden.npz`` is the code's motion blur
(through Wand and ImageMagick, ``scripts/mnistc_golden.py --motion``) at eight fixed angles: tolerance 0, as
calbench repeats ImageMagick's 16-bit arithmetic and its 8-bit output (equal on all 12,544 golden pixels: 8 angles
× 2 digits × 784).
"""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from calbench import mnist_c
from calbench.corruptions import FAMILIES, corrupt, levels

GOLDEN = np.load(Path(__file__).parents[1] / "golden" / "mnistc_golden.npz")
DIGITS = [GOLDEN["in|0"], GOLDEN["in|1"]]
MOTION = np.load(Path(__file__).parents[1] / "golden" / "mnistc_motion_golden.npz")


class _Signs:
    """An rng whose ``choice`` returns fixed directions (the golden's ``np.random.choice``)."""

    def __init__(self, signs):
        self.signs = signs

    def choice(self, values, size):
        return np.broadcast_to(np.asarray(self.signs), size)


def _apply(family, digit, signs):
    function, (constant,) = FAMILIES[family]
    out = function(digit[None, None] / 255.0, constant, _Signs(signs), "imagenet_c_grey")
    return (np.clip(out, 0.0, 1.0) * 255.0).astype(np.uint8)[0, 0]


@pytest.mark.parametrize("name", ["brightness", "stripe", "scale", "canny_edges"])
def test_deterministic_families_equal_the_authors_code(name):
    """Brightness + 0.5 (severity 5), stripe, zoom out by 0.7 (severity 3), Canny's edges: within one grey
    level (the edges: equal)."""
    for k, digit in enumerate(DIGITS):
        out = corrupt(digit[None, None], f"mnistc_{name}", 1)[0, 0]
        assert np.abs(out.astype(int) - GOLDEN[f"{name}|{k}"]).max() <= 1, (name, k)


@pytest.mark.parametrize("name,draws", [("shear", 1), ("rotate", 1), ("translate", 2)])
def test_directed_families_equal_the_authors_code_given_its_draws(name, draws):
    """Shear 0.4 and rotation 0.4 rad (severity 2) of either sign, translation by 3 px (severity 3) along each
    axis in either direction: within one grey level of the code with the same directions."""
    for k, digit in enumerate(DIGITS):
        for key in [f for f in GOLDEN.files if f.startswith(f"{name}|{k}|")]:
            signs = [1 if c == "+" else -1 for c in key.rsplit("|", 1)[1]]
            out = _apply(f"mnistc_{name}", digit, signs if draws == 2 else signs[0])
            assert np.abs(out.astype(int) - GOLDEN[key]).max() <= 1, key


class _Replay:
    """``numpy.random.RandomState(seed)`` as an rng argument: the code's draws after ``np.random.seed(seed)``."""

    def __init__(self, seed):
        self.state = np.random.RandomState(seed)
        self.uniform, self.normal = self.state.uniform, self.state.normal

    def integers(self, low, high, size):
        return self.state.randint(low, high, size=size)


class _GlassReplay(_Replay):
    """The glass blur's draws: the code draws a pixel's offset only when its coin says swap."""

    def choice(self, values, size):
        self.swap = bool(self.state.choice([True, False], 1)[0])
        return np.array([self.swap])

    def integers(self, low, high, size):
        return self.state.randint(low, high, size=size) if self.swap else np.zeros(size, dtype=int)


@pytest.mark.parametrize("name", ["fog", "spatter", "dotted_line", "zigzag", "glass_blur"])
def test_seeded_families_equal_the_authors_code_given_its_draws(name):
    """Fog (severity 5: a plasma fractal of decay 1.4, strength 3), spatter (severity 4: mud), the dotted line, the
    zigzag and glass blur (severity 1: std 0.7 px, offsets −1 … 0, two passes), given the code's draws
    (``numpy.random.RandomState``, replayed in the code's order): within one grey level (equal on these digits),
    and each golden changes its digit (the comparison is not of two unchanged images)."""
    for k, digit in enumerate(DIGITS):
        for key in [f for f in GOLDEN.files if f.startswith(f"{name}|{k}|seed")]:
            function, (constant,) = FAMILIES[f"mnistc_{name}"]
            replay = (_GlassReplay if name == "glass_blur" else _Replay)(int(key.rsplit("seed", 1)[1]))
            out = function(digit[None, None] / 255.0, constant, replay, "grey")
            out = (np.clip(out, 0.0, 1.0) * 255.0).astype(np.uint8)[0, 0]
            assert np.abs(out.astype(int) - GOLDEN[key]).max() <= 1, key
            assert not np.array_equal(GOLDEN[key], digit), key


class _Angles:
    """An rng whose ``uniform`` returns fixed angles (the golden's ``np.random.uniform``)."""

    def __init__(self, angles):
        self.angles = np.asarray(angles, dtype=float)

    def uniform(self, low, high, size):
        assert (low, high) == (-45, 45)  # the code's np.random.uniform(-45, 45)
        return self.angles


def test_motion_blur_equals_imagemagick_through_the_authors_code():
    """Motion blur at the released severity 1 (Mu & Gilmer's ``motion_blur``: radius 10, sigma 3, angle uniform on
    ±45°) equals the code's output through ImageMagick at each golden angle, both digits at once (one angle per
    image), the exact halves of θ = −30° included; each golden changes its digit."""
    function, (constant,) = FAMILIES["mnistc_motion_blur"]
    assert constant == (10, 3, 45)
    keys = [f for f in MOTION.files if f.startswith("motion_blur|0|")]
    assert len(keys) == 8
    for key in keys:
        angle = float(key.rsplit("|", 1)[1])
        digits = np.stack([MOTION["in|0"], MOTION["in|1"]])[:, None] / 255.0
        out = (np.clip(function(digits, constant, _Angles([angle, angle]), "grey"), 0, 1) * 255).astype(np.uint8)
        for k in (0, 1):
            golden = MOTION[f"motion_blur|{k}|{key.rsplit('|', 1)[1]}"]
            assert np.array_equal(out[k, 0], golden), (key, k, np.abs(out[k, 0].astype(int) - golden).max())
            assert not np.array_equal(golden, MOTION[f"in|{k}"])


def test_motion_blur_draws_an_angle_per_image_and_scales_with_the_side():
    """Through ``corrupt``: 32 copies of a digit get more than one blur (one angle each); at 56 px the blur is the
    28 px one's at twice the radius and sigma (the pixel constants scale with the side)."""
    digit = MOTION["in|0"]
    out = corrupt(np.broadcast_to(digit, (32, 1, 28, 28)).copy(), "mnistc_motion_blur", 1, seed=2)
    assert len({o.tobytes() for o in out}) > 1
    big = np.kron(digit, np.ones((2, 2), np.uint8))[None, None] / 255.0
    direct = mnist_c.motion_blur(big, 20, 6, np.array([10.0]))
    function, (constant,) = FAMILIES["mnistc_motion_blur"]
    assert np.array_equal(function(big, constant, _Angles([10.0]), "grey"), direct)


@pytest.mark.parametrize("name", ["shear", "rotate", "translate"])
def test_each_image_draws_its_own_direction(name):
    """Over 64 copies of a digit, every image is the code's output for one of the directions, and more than one
    direction occurs (the code draws one per image)."""
    digit = DIGITS[0]
    out = corrupt(np.broadcast_to(digit, (64, 1, 28, 28)).copy(), f"mnistc_{name}", 1, seed=3)[:, 0].astype(int)
    keys = [f for f in GOLDEN.files if f.startswith(f"{name}|0|")]
    match = np.array([[np.abs(o - GOLDEN[key]).max() <= 1 for key in keys] for o in out])
    assert match.any(axis=1).all() and match.any(axis=0).sum() > 1


def test_noise_families_follow_the_code_formulas():
    """On mid-grey digits: shot noise Poisson(3x)/3 clipped at 1 (values on thirds, the clipped Poisson law's
    mean and variance);
    impulse noise sets 17 % of the pixels to 0 or 255, half each (the released severities 5 and 4)."""
    x = np.full((64, 1, 28, 28), 128, dtype=np.uint8)
    shot = corrupt(x, "mnistc_shot_noise", 1).astype(float)
    counts = np.rint(shot / 85)  # k / 3 of 255, truncated: 0, 84 or 85, 169 or 170, 255
    assert np.abs(shot - counts * 85).max() <= 1
    law = stats.poisson(3 * 128 / 255)  # counts above 3 clip to white
    expected = np.minimum(np.arange(40), 3)
    mean, second = (law.pmf(np.arange(40)) * expected).sum(), (law.pmf(np.arange(40)) * expected**2).sum()
    assert abs(counts.mean() - mean) < 0.02 and abs(counts.var() - (second - mean**2)) < 0.03
    impulse = corrupt(x, "mnistc_impulse_noise", 1)
    flipped = impulse != 128
    assert abs(flipped.mean() - 0.17) < 0.01 and abs((impulse[flipped] == 255).mean() - 0.5) < 0.02


def test_one_severity_and_grey_images_only():
    """Each MNIST-C family takes severity 1 (the released one) with a clear error otherwise, and grey images."""
    grey = np.zeros((1, 1, 28, 28), np.uint8)
    for family in mnist_c.FAMILIES:
        assert levels(family) == (1,)
        with pytest.raises(ValueError, match="one published severity: give severity 1, got 3"):
            corrupt(grey, family, 3)
        with pytest.raises(ValueError, match="3 channels"):
            corrupt(np.zeros((1, 3, 28, 28), np.uint8), family, 1)


def test_pixel_constants_scale_with_the_side():
    """At 16 px the translation moves by 3 · 16 / 28 px and the stripes cover the columns left of 4 and from 12;
    the affine maps keep the centre (7.5, 7.5) fixed, so a centred square stays centred under the zoom."""
    x = np.zeros((1, 1, 16, 16), np.uint8)
    x[..., 6:10, 6:10] = 200
    stripe = corrupt(x, "mnistc_stripe", 1)[0, 0]
    assert (stripe[:, :4] == 255).all() and (stripe[:, 12:] == 255).all()
    assert (stripe[:, 4:12] == x[0, 0, :, 4:12]).all()
    out = _apply("mnistc_translate", x[0, 0], [1, 1]).astype(float)
    rows, cols = np.mgrid[:16, :16]
    assert abs((out * cols).sum() / out.sum() - (7.5 - 3 * 16 / 28)) < 0.01  # content moves by −dx
    zoomed = corrupt(x, "mnistc_scale", 1)[0, 0].astype(float)
    # within the uint8 truncation's skew
    for axis in (cols, rows):
        assert abs((zoomed * axis).sum() / zoomed.sum() - 7.5) < 0.01
