"""Calibration methods: one module per family, registered by name.

>>> from calbench.methods import make
>>> cal = make("ts").fit(logits_cal, y_cal)
>>> probs = cal.predict_proba(logits_test)
"""

from calbench.methods.base import Calibrator
from calbench.methods.chain import Chain
from calbench.methods.registry import available, build_method, code_files, make, method_class, register, split_chain
from calbench.methods.tuning import GridSearch

__all__ = ["Calibrator", "Chain", "GridSearch", "available", "build_method", "make", "method_class", "register",
           "code_files", "split_chain"]
