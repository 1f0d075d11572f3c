"""The corruptions of shifted test sets (calbench.corruptions; Hendrycks & Dietterich 2019, Ovadia et al. 2019)."""

import numpy as np
import pytest

from calbench.corruptions import FAMILIES, SEVERITIES, _box_matrix, corrupt


@pytest.fixture(scope="module")
def images():
    """Digit-like images: a bright stroke on black, with grey texture (so every corruption has something to move)."""
    rng = np.random.default_rng(0)
    x = np.zeros((24, 1, 16, 16))
    x[:, :, 3:13, 6:9] = 0.9
    x[:, :, 3:5, 4:12] = 0.7
    x = np.clip(x + 0.15 * rng.random(x.shape), 0, 1)
    return np.rint(x * 255).astype(np.uint8)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_corruption_is_deterministic_and_keeps_shape_and_range(images, family):
    for severity in SEVERITIES:
        out = corrupt(images, family, severity, seed=3)
        assert out.shape == images.shape and out.dtype == np.uint8
        np.testing.assert_array_equal(out, corrupt(images, family, severity, seed=3))
        # each image is corrupted on its own: a subset gives the same images whatever the other rows
        # (the random draws differ with the batch, so only the deterministic families are compared row by row)
        if family in ("rotate", "translate", "gaussian_blur", "contrast", "brightness", "pixelate"):
            np.testing.assert_array_equal(corrupt(images[:5], family, severity, seed=3), out[:5])


GEOMETRIC = ("rotate", "translate")


@pytest.mark.parametrize("family", sorted(set(FAMILIES) - set(GEOMETRIC)))
def test_corruption_grows_with_severity(images, family):
    """The mean absolute pixel change rises strictly from severity 1 to 5 (seed-averaged for the random ones)."""
    change = [np.mean([np.abs(corrupt(images, family, s, seed).astype(float) - images).mean() for seed in range(3)])
              for s in SEVERITIES]
    assert change[0] > 0
    assert np.all(np.diff(change) > 0), change


@pytest.mark.parametrize("family", GEOMETRIC)
def test_geometric_corruption_moves_content_farther_with_severity(family):
    """Rotation and translation: the pixel change saturates once the content no longer overlaps itself, so the
    measure is how far a bright spot's centre of mass moves (Ovadia et al.'s rotation angle / shift)."""
    x = np.zeros((1, 1, 32, 32), dtype=np.uint8)
    x[0, 0, 15:17, 2:4] = 255
    rows, cols = np.mgrid[:32, :32]

    def centre(img):
        w = img[0, 0].astype(float)
        return np.array([(w * rows).sum(), (w * cols).sum()]) / w.sum()

    moved = [np.linalg.norm(centre(corrupt(x, family, s)) - centre(x)) for s in SEVERITIES]
    assert moved[0] > 1 and np.all(np.diff(moved) > 0), moved


def test_random_corruptions_change_with_the_seed(images):
    for family in ("gaussian_noise", "shot_noise", "impulse_noise", "elastic_transform"):
        assert not np.array_equal(corrupt(images, family, 3, seed=0), corrupt(images, family, 3, seed=1))


def test_colour_brightness_keeps_hue_and_saturation():
    """Hendrycks & Dietterich's brightness adds to the HSV value: ratios between channels stay."""
    x = np.array([[[[200]], [[100]], [[50]]]], dtype=np.uint8)
    out = corrupt(x, "brightness", 5).astype(float).ravel()
    np.testing.assert_allclose(out / out[0], [1.0, 0.5, 0.25], atol=0.01)
    assert out[0] == 255


def test_box_resampling_preserves_the_mean_and_constants():
    m = _box_matrix(5, 8)
    np.testing.assert_allclose(m.sum(1), 1.0)
    np.testing.assert_allclose(m.sum(0), 5 / 8)  # each input cell contributes its area


def test_bad_family_severity_or_images_are_refused(images):
    with pytest.raises(ValueError, match="unknown; known: rotate"):
        corrupt(images, "fog", 1)
    with pytest.raises(ValueError, match="severity must be one of"):
        corrupt(images, "rotate", 6)
    with pytest.raises(ValueError, match="uint8 images"):
        corrupt(images.astype(float), "rotate", 1)
