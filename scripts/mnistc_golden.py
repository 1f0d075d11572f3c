"""Write tests/golden/mnistc_golden.npz: the MNIST-C authors' code's output on two fixed 28 px digits.

Run OUTSIDE this project, in a scratch virtual environment with the packages of the code's era where they
matter (scikit-image before 0.21, whose ``AffineTransform(shear=s)`` is the matrix [[1, −sin s], [0, cos s]] that
the code was written for; later versions take the tangent). The goldens in tests/golden were made with Python
3.11.7, numpy 1.26.4, scipy 1.11.4, scikit-image 0.20.0, opencv-python-headless 4.8.1.78, Pillow 13.0.0, on
google-research/mnist-c at its newest commit:

    python3 -m venv /tmp/mnistc_ref20
    /tmp/mnistc_ref20/bin/pip install "numpy<2" scikit-image==0.20.0 "scipy<1.12" pillow \\
        "opencv-python-headless<4.9" setuptools
    git -C MIRROR archive HEAD | tar -x -C /tmp/mnistc_code      # google-research/mnist-c
    /tmp/mnistc_ref20/bin/python scripts/mnistc_golden.py /tmp/mnistc_code tests/golden/mnistc_golden.npz

The code imports Wand (ImageMagick) for ``motion_blur`` and ``snow`` alone; it is replaced by an empty module here,
as none of the corruptions recorded calls it (``--motion`` below uses the real one); numpy's removed alias ``np.int``
is set to ``int``, and ``gaussian(..., multichannel=True)`` (glass blur) is called as scikit-image 0.19 mapped it,
``channel_axis=-1``.
Keys: ``in|{k}`` the input digits (k = 0: the digit ``in|grey28`` of tests/golden/corruptions_golden.npz, k = 1: its
transpose); ``{corruption}|{k}`` the code's output at its default severity as ``np.uint8`` (truncation, as calbench
stores it); for the corruptions that draw a direction, ``{corruption}|{k}|{signs}`` with ``np.random.choice`` made
to return ``signs`` (``+``/``-``: the shear's or rotation's sign, or the x and y signs of the translation); for fog,
spatter, dotted line, zigzag and glass blur, ``{corruption}|{k}|seed{s}`` after ``np.random.seed(s)`` (the test
replays ``numpy.random.RandomState(s)``).

``--motion`` writes tests/golden/mnistc_motion_golden.npz instead: the code's ``motion_blur`` at its released
severity 1 (ImageMagick's ``MagickMotionBlurImage`` with radius 10, sigma 3) through the real Wand, with
``np.random.uniform`` made to return each angle of :data:`ANGLES` (key ``motion_blur|{k}|{angle}``), on the same two
digits given as the PIL grey image the code saves to PNG. Made in the same virtual environment plus
``pip install wand`` (0.7.2) over Debian's ImageMagick 6.9.11-60 Q16 (``apt-get install imagemagick
libmagickwand-dev``):

    /tmp/mnistc_ref20/bin/python scripts/mnistc_golden.py --motion /tmp/mnistc_code \\
        tests/golden/mnistc_motion_golden.npz
"""

import importlib
import os
import sys
import types
from itertools import product
from pathlib import Path

import numpy as np

DETERMINISTIC = ("brightness", "stripe", "scale", "canny_edges")
SIGNED = {"shear": 1, "rotate": 1, "translate": 2}
SEEDED = ("fog", "spatter", "dotted_line", "zigzag", "glass_blur")
SEEDS = (0, 1)


ANGLES = (-45.0, -30.0, -12.5, 0.0, 7.3, 22.5, 38.9, 45.0)


def load_code(folder: Path, real_wand: bool = False):
    """The authors' ``corruptions.py`` of ``folder`` (read at import: its ``pessimal_noise_matrix``)."""
    if real_wand:
        return _import(folder)
    wand = types.ModuleType("wand")
    for name in ("image", "api", "color"):
        sub = types.ModuleType(f"wand.{name}")
        setattr(wand, name, sub)
        sys.modules[f"wand.{name}"] = sub
    sys.modules["wand"] = wand
    sys.modules["wand.image"].Image = type("Image", (), {})
    sys.modules["wand.api"].library = types.SimpleNamespace(MagickMotionBlurImage=types.SimpleNamespace())
    return _import(folder)


def _import(folder: Path):
    np.int = int  # the alias the code's line_from_points uses, removed in numpy 1.24 (same behaviour)
    os.chdir(folder)
    sys.path.insert(0, str(folder))
    code = importlib.import_module("corruptions")
    blur = code.gaussian

    def gaussian(image, *args, multichannel=False, **kwargs):  # 0.19's mapping of the argument 0.20 dropped
        return blur(image, *args, channel_axis=-1 if multichannel else None, **kwargs)

    code.gaussian = gaussian
    return code


def main(folder: str, output: str) -> None:
    golden = Path(__file__).resolve().parents[1] / "tests" / "golden" / "corruptions_golden.npz"
    digit = np.load(golden)["in|grey28"]
    code = load_code(Path(folder).resolve())
    out = {}
    choice = np.random.choice
    for k, image in enumerate([digit, np.ascontiguousarray(digit.T)]):
        out[f"in|{k}"] = image
        for name in DETERMINISTIC:
            out[f"{name}|{k}"] = np.uint8(getattr(code, name)(image))
        for name, draws in SIGNED.items():
            for signs in product((1, -1), repeat=draws):
                np.random.choice = lambda *a, signs=signs, **kw: np.array(signs)
                try:
                    result = getattr(code, name)(image)
                finally:
                    np.random.choice = choice
                out[f"{name}|{k}|{''.join('+' if s > 0 else '-' for s in signs)}"] = np.uint8(result)
        for name in SEEDED:
            for seed in SEEDS:
                np.random.seed(seed)
                out[f"{name}|{k}|seed{seed}"] = np.uint8(getattr(code, name)(image))
    np.savez_compressed(output, **out)


def motion_main(folder: str, output: str) -> None:
    from PIL import Image

    golden = Path(__file__).resolve().parents[1] / "tests" / "golden" / "corruptions_golden.npz"
    digit = np.load(golden)["in|grey28"]
    code = load_code(Path(folder).resolve(), real_wand=True)
    out = {}
    uniform = np.random.uniform
    for k, image in enumerate([digit, np.ascontiguousarray(digit.T)]):
        out[f"in|{k}"] = image
        for angle in ANGLES:
            np.random.uniform = lambda *a, angle=angle, **kw: angle
            try:
                out[f"motion_blur|{k}|{angle:g}"] = np.uint8(code.motion_blur(Image.fromarray(image, mode="L")))
            finally:
                np.random.uniform = uniform
    np.savez_compressed(output, **out)


if __name__ == "__main__":
    if sys.argv[1] == "--motion":
        motion_main(*sys.argv[2:])
    else:
        main(*sys.argv[1:])
