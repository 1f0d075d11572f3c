"""Inductive Venn-Abers predictors (Vovk & Petej, UAI 2014; Vovk, Petej & Fedorova, NeurIPS 2015), one-vs-rest.

For class j, the calibration pairs are (p̂_j, 1[y = j]). A test score s is appended to them twice, labelled 0
and labelled 1, and an isotonic regression is fitted to each augmented set: its value at s is p₀(s) resp.
p₁(s), with p₀ ≤ p₁. The two are merged into the log-loss-optimal single probability p = p₁ / (1 − p₀ + p₁)
(the minimax log-loss merge of Vovk & Petej 2014 and Vovk et al. 2015), and the per-class p are normalised to
sum to one (the one-vs-rest multiclass extension of Manokhin 2017 / Vovk et al.).

Efficient fit (the IVAP speed-up of Vovk et al. 2015, re-derived): with the calibration scores grouped into
sorted distinct values k₁ < … < k_m, p₁(s) and p₀(s) only depend on where s falls: s = kᵢ gives F₁(i), F₀(i),
the isotonic fits at group i with the extra point merged into it; kᵢ₋₁ < s < kᵢ gives p₁ = F₁(i) and p₀ =
F₀(i−1) (an extra 1 pools rightwards, an extra 0 leftwards; the max–min formula of isotonic regression), and
p₀ = 0 below k₁, p₁ = 1 above k_m. F₀ and F₁ at every group come from one left-to-right sweep that keeps the
pool-adjacent-violators (PAV) blocks of the prefix (groups < i, a stack) and of the suffix (groups > i,
replayed from a right-to-left PAV with an undo log): the extra point's block starts as group i and absorbs the
adjacent prefix and suffix blocks that violate monotonicity (any order of pooling adjacent violators gives the
isotonic fit). Each test score is then one binary search per class. """

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Array
from calbench.maps1d.one_vs_rest import renormalise
from calbench.methods.base import Calibrator, MissingClass
from calbench.methods.constraints import Interval
from calbench.methods.registry import register
from calbench.scores import Scores


def _suffix_undo_log(sums: np.ndarray, weights: np.ndarray):
    """Right-to-left PAV over the groups; the stack of suffix blocks (top = leftmost) and, per group i, the
    blocks its push popped (to restore the suffix i + 1 state when sweeping left to right). Blocks of equal
    mean are pooled too, so block means strictly increase and a query absorbs few blocks."""
    stack_s, stack_w, popped = [], [], []
    for i in range(sums.size - 1, -1, -1):
        cur_s, cur_w, gone = float(sums[i]), float(weights[i]), []
        while stack_s and cur_s * stack_w[-1] >= stack_s[-1] * cur_w:  # mean ≥ the right block's: pool (ties too)
            gone.append((stack_s.pop(), stack_w.pop()))
            cur_s, cur_w = cur_s + gone[-1][0], cur_w + gone[-1][1]
        stack_s.append(cur_s)
        stack_w.append(cur_w)
        popped.append(gone)
    return stack_s, stack_w, popped[::-1]


def ivap_fits(sums: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(F₀, F₁) at each group: the isotonic fit at group i of the data (group label ``sums``, counts ``weights``,
    sorted by score) with one extra point labelled 0 resp. 1 merged into group i."""
    m = sums.size
    suf_s, suf_w, popped = _suffix_undo_log(sums, weights)
    pre_s, pre_w = [], []
    fits = np.empty((2, m))
    for i in range(m):
        suf_s.pop(), suf_w.pop()  # drop group i's block: restore the PAV of groups > i
        for block_s, block_w in reversed(popped[i]):
            suf_s.append(block_s)
            suf_w.append(block_w)
        for label in (0, 1):
            cur_s, cur_w = float(sums[i]) + label, float(weights[i]) + 1.0
            left, right = len(pre_s) - 1, len(suf_s) - 1
            while True:
                if left >= 0 and pre_s[left] * cur_w > cur_s * pre_w[left]:
                    cur_s, cur_w, left = cur_s + pre_s[left], cur_w + pre_w[left], left - 1
                elif right >= 0 and suf_s[right] * cur_w < cur_s * suf_w[right]:
                    cur_s, cur_w, right = cur_s + suf_s[right], cur_w + suf_w[right], right - 1
                else:
                    break
            fits[label, i] = cur_s / cur_w
        cur_s, cur_w = float(sums[i]), float(weights[i])  # group i joins the prefix PAV
        while pre_s and pre_s[-1] * cur_w >= cur_s * pre_w[-1]:
            cur_s, cur_w = cur_s + pre_s.pop(), cur_w + pre_w.pop()
        pre_s.append(cur_s)
        pre_w.append(cur_w)
    return fits[0], fits[1]


def ivap_table(scores: np.ndarray, hits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted distinct calibration scores k and the lookup tables p₀ = [0, F₀(1..m)], p₁ = [F₁(1..m), 1]."""
    knots, group, counts = np.unique(scores, return_inverse=True, return_counts=True)
    sums = np.bincount(group.ravel(), weights=hits, minlength=knots.size)
    f0, f1 = ivap_fits(sums, counts.astype(np.float64))
    return knots, np.concatenate([[0.0], f0]), np.concatenate([f1, [1.0]])


def ivap_predict(knots: np.ndarray, p0_table: np.ndarray, p1_table: np.ndarray, s: np.ndarray):
    """(p₀(s), p₁(s)) of test scores ``s`` by binary search in the distinct calibration scores."""
    left = np.searchsorted(knots, s, side="left")
    equal = (left < knots.size) & (knots[np.minimum(left, knots.size - 1)] == s)
    return p0_table[left + equal], p1_table[left]


def merge(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """The log-loss-optimal single probability p₁ / (1 − p₀ + p₁) (Vovk & Petej 2014)."""
    return p1 / (1.0 - p0 + p1)


@register("venn_abers")
class VennAbers(Calibrator):
    """Inductive Venn-Abers predictor per class (one-vs-rest on p̂_j), merged p₁/(1 − p₀ + p₁), normalised."""

    #: Per class j, its m_j sorted distinct scores in ``knots_`` from ``offsets_[j]`` and m_j + 1 entries of each
    #: table: m knots in all and m + C table entries.
    _fitted_state = {"knots_": Array(float, ("m",)), "offsets_": Array(int, ("C+1",), within="[0, m]"),
                     "p0_table_": Array(float, ("m+C",), within="[0, 1]"),
                     "p1_table_": Array(float, ("m+C",), within="[0, 1]")}

    #: A class without calibration examples would rest on the extra test point alone: refused, as irova.
    #: No settings, so the inherited empty ``_parameter_constraints``.
    on_missing_class = MissingClass.REFUSE

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        probs = scores.probs
        tables = [ivap_table(probs[:, j], (y == j).astype(np.float64)) for j in range(probs.shape[1])]
        sizes = [knots.size for knots, _, _ in tables]
        self.offsets_ = np.concatenate([[0], np.cumsum(sizes)])
        self.knots_ = np.concatenate([t[0] for t in tables])
        self.p0_table_ = np.concatenate([t[1] for t in tables])  # m_j + 1 entries per class
        self.p1_table_ = np.concatenate([t[2] for t in tables])

    def probability_bounds(self, scores) -> tuple[np.ndarray, np.ndarray]:
        """The Venn-Abers interval (p₀, p₁) of every class of every row, [N, C] each (before merging)."""
        probs = self._check_scores(scores).probs
        p0, p1 = np.empty_like(probs), np.empty_like(probs)
        for j in range(probs.shape[1]):  # one binary search per class: the knots differ between classes
            lo, hi = self.offsets_[j], self.offsets_[j + 1]
            tables = self.p0_table_[lo + j:hi + j + 1], self.p1_table_[lo + j:hi + j + 1]
            p0[:, j], p1[:, j] = ivap_predict(self.knots_[lo:hi], *tables, probs[:, j])
        return p0, p1

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return renormalise(merge(*self.probability_bounds(scores)))

    def fitted_summary(self) -> dict:
        return {"distinct_scores_per_class": int(np.median(np.diff(self.offsets_)))}


@register("venn_abers_ovo")
class VennAbersOneVsOne(Calibrator):
    """Multiclass Venn-Abers in the one-vs-one form (Manokhin 2017): an inductive Venn-Abers predictor per pair of
    classes, the pairs coupled into one distribution by Price's pairwise coupling (1995).

    As the ``one_vs_one`` of the ``venn-abers`` package: for classes i < j the predictor is fitted on the calibration
    rows of class i or j with score p̂_j / (p̂_i + p̂_j) (taken as σ(z_j − z_i), the same order) and target 1[y = j],
    and gives the merged pairwise probability p(j | i or j) = p₁/(1 − p₀ + p₁); the pairs are coupled as
    p_i ∝ 1 / (Σ_{j≠i} 1/p(i | i or j) − (k − 2)) and normalised.

    k(k − 1)/2 predictors, each evaluated on every row: fit and prediction grow with the square of the number of
    classes (measured, one core: ~0.44 ms per pair to fit on 50 rows a pair, 0.11–0.14 µs per row and pair to
    predict). ``fit`` refuses more than ``max_classes`` classes (default 200, 19,900 pairs: 9 CPU-s to fit on 10,000
    rows, 21 to predict 10,000; at least 3, since up to 2 classes make one pair and there is nothing to bound); at
    ImageNet's 1,000 classes (499,500 pairs) fitting would take ~4 CPU-minutes and predicting 25,000 rows ~25.
    Prediction runs in chunks of rows, so its memory stays bounded at any size."""

    #: As :class:`VennAbers`'s, per pair of classes (P pairs) instead of per class.
    _fitted_state = {"pairs_": Array(int, ("P", 2), within="[0, C)"), "knots_": Array(float, ("m",)),
                     "offsets_": Array(int, ("P+1",), within="[0, m]"),
                     "p0_table_": Array(float, ("m+P",), within="[0, 1]"),
                     "p1_table_": Array(float, ("m+P",), within="[0, 1]")}

    #: A pair without calibration examples of one class would rest on the extra test point alone: refused.
    on_missing_class = MissingClass.REFUSE
    _parameter_constraints = {"max_classes": [Interval("int", 3)]}
    #: Rows × pairs of the pairwise matrix held at once in prediction (128 MB of float64).
    CHUNK_ENTRIES = 2**24

    def __init__(self, *, max_classes: int = 200):
        self.max_classes = max_classes

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        z = scores.logits
        k = z.shape[1]
        if k > self.max_classes:
            pairs = k * (k - 1) // 2
            raise ValueError(
                f"venn_abers_ovo: {k} classes make {pairs:,} pairwise predictors, over max_classes = "
                f"{self.max_classes} (the cost grows with the square of the classes: ~{pairs * 4.4e-4:,.0f} CPU-s to "
                f"fit and ~{pairs * 1.2e-7:.2g} CPU-s per test row to predict); use venn_abers (one-vs-rest, {k} "
                f"predictors) or set max_classes: {k} in the method's settings")
        self.pairs_ = np.array([(i, j) for i in range(k) for j in range(i + 1, k)], dtype=np.int64).reshape(-1, 2)
        by_class = [np.flatnonzero(y == c) for c in range(k)]
        knots, p0, p1, sizes = [], [], [], []
        for i, j in self.pairs_:
            rows = np.concatenate([by_class[i], by_class[j]])
            table = ivap_table(z[rows, j] - z[rows, i], (y[rows] == j).astype(np.float64))
            for store, part in zip((knots, p0, p1), table):
                store.append(part)
            sizes.append(table[0].size)
        self.offsets_ = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.knots_, self.p0_table_, self.p1_table_ = (np.concatenate(s) for s in (knots, p0, p1))

    def pairwise(self, scores) -> np.ndarray:
        """p_{j|ij} of every row and pair (``pairs_[m] = (i, j)``), [N, k(k − 1)/2]."""
        return self._pairwise(self._check_scores(scores).logits)

    def _pairwise(self, z: np.ndarray) -> np.ndarray:
        out = np.empty((z.shape[0], len(self.pairs_)))
        for m, (i, j) in enumerate(self.pairs_):
            lo, hi = self.offsets_[m], self.offsets_[m + 1]
            tables = self.p0_table_[lo + m:hi + m + 1], self.p1_table_[lo + m:hi + m + 1]
            out[:, m] = merge(*ivap_predict(self.knots_[lo:hi], *tables, z[:, j] - z[:, i]))
        return out

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        from scipy.sparse import csr_matrix

        k, pairs = self.num_classes_, len(self.pairs_)
        ones = np.ones(pairs)
        to_j, to_i = (csr_matrix((ones, (np.arange(pairs), self.pairs_[:, c])), shape=(pairs, k)) for c in (1, 0))
        z = scores.logits
        inverse = np.empty(z.shape)
        step = max(1, self.CHUNK_ENTRIES // pairs)
        for start in range(0, z.shape[0], step):  # Σ_{j≠i} 1/p_{i|ij} per class, a chunk of rows at a time
            pair = self._pairwise(z[start:start + step])
            inverse[start:start + step] = (to_j.T @ (1.0 / pair).T + to_i.T @ (1.0 / (1.0 - pair)).T).T
        return renormalise(1.0 / (inverse - (k - 2)))

    def fitted_summary(self) -> dict:
        return {"pairs": int(len(self.pairs_)), "distinct_scores_per_pair": int(np.median(np.diff(self.offsets_)))}
