"""Forms of one matrix of bootstrap row counts ``[R, N]`` that several metrics and methods read: the paired bootstrap
(:mod:`calbench.stats.draws`) hands the same counts to every metric of every method of a seed, so a form derived
from them (a float64 copy for matrix products, the resamples-as-lanes chunks of the compiled kernels) is made once
and reused while those counts are in use, instead of once per metric and method.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

#: Count matrices whose forms are kept (the engine resamples one seed's counts at a time).
KEPT = 2

_forms: OrderedDict[int, tuple[np.ndarray, dict]] = OrderedDict()
_lock = threading.RLock()


def counts_form(counts: np.ndarray, key: str, compute: Callable[[], object]):
    """``compute()``, made once per ``counts`` array (the object, held while kept, so its id is not reused) and
    ``key``, for every caller that reads the same counts (threads wait for the first); the forms of the last
    :data:`KEPT` arrays are kept."""
    with _lock:
        entry = _forms.get(id(counts))
        if entry is None or entry[0] is not counts:
            entry = _forms[id(counts)] = (counts, {})
            while len(_forms) > KEPT:
                _forms.popitem(last=False)
        _forms.move_to_end(id(counts))
        if key not in entry[1]:
            entry[1][key] = compute()
        return entry[1][key]


def lanes(counts: np.ndarray) -> list:
    """:func:`calbench.kernels.resampled_bins.chunks` of ``counts``, made once per counts array."""
    from calbench.kernels.resampled_bins import chunks

    return counts_form(counts, "lanes", lambda: list(chunks(counts)))


def row_sums(counts: np.ndarray) -> np.ndarray:
    """``counts.sum(axis=1)``, each resample's total, made once per counts array."""
    return counts_form(counts, "row sums", lambda: counts.sum(axis=1))


def as_float(counts: np.ndarray) -> np.ndarray:
    """``counts`` as a float64 array (exact for counts below 2⁵³), made once per counts array."""
    return counts_form(counts, "float64", lambda: np.asarray(counts, dtype=np.float64))
