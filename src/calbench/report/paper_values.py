"""Published reference values that reproduction tables are compared with (mean, std).

LECE paper (Valk & Kull, TMLR) Table 1: the synthetic experiment of §4.1, mean ± std over 100 data
seeds (docs/methods_nonparametric.md, "Reproduction"). Columns are keyed by calbench method name
(``true`` is the true calibration map c(·) applied to the test predictions), rows by calbench metric id.
"""

LECE_TABLE1_METHODS = {"hist_lecd": "H-LECD", "hist_lece": "H-LECE", "ts": "TS", "dir": "DIR", "lece": "LECE",
                       "true": "true"}
LECE_TABLE1_METRICS = {"true_ce.conf.l1": "confidence CE", "true_ce.cw.l1": "classwise CE", "brier": "Brier score",
                       "nll": "log-loss", "acc": "accuracy"}
LECE_TABLE1 = {
    "true_ce.conf.l1": {"hist_lecd": (0.056, 0.001), "hist_lece": (0.019, 0.002), "ts": (0.030, 0.002),
                        "dir": (0.022, 0.004), "lece": (0.018, 0.003), "true": (0.000, 0.000)},
    "true_ce.cw.l1": {"hist_lecd": (0.049, 0.001), "hist_lece": (0.016, 0.001), "ts": (0.027, 0.001),
                      "dir": (0.018, 0.002), "lece": (0.015, 0.002), "true": (0.000, 0.000)},
    "brier": {"hist_lecd": (0.448, 0.001), "hist_lece": (0.438, 0.001), "ts": (0.440, 0.001),
              "dir": (0.438, 0.001), "lece": (0.438, 0.001), "true": (0.436, 0.001)},
    "nll": {"hist_lecd": (0.772, 0.002), "hist_lece": (0.749, 0.010), "ts": (0.751, 0.002),
            "dir": (0.747, 0.002), "lece": (0.742, 0.002), "true": (0.738, 0.002)},
    "acc": {"hist_lecd": (0.668, 0.002), "hist_lece": (0.671, 0.002), "ts": (0.669, 0.001),
            "dir": (0.671, 0.001), "lece": (0.670, 0.001), "true": (0.671, 0.001)},
}
#: The paper prints 3 decimals: its means are known to ± half a unit of the last digit.
LECE_TABLE1_ROUNDING = 0.0005
