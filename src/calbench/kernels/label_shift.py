"""Compiled kernels of label-shift adaptation on a set's bootstrap redraws (docs/label_shift.md), over each redraw's
rows of non-zero weight only (about 15–40 % of a redraw's row weights are non-zero; :func:`sparse_rows`):

* :func:`redraw_counts`: the rows each redraw of a label-shifted set takes (the draw of
  :func:`calbench.data.label_shift.redraw_weights`), from a list of the resample's copies of each class's rows;
* :func:`em_redraws`: the EM of Saerens, Latinne & Decaestecker (2002, Eqs. 2.9–2.10) with SQUAREM, run to its
  stopping rule on each redraw in turn (:func:`calbench.metrics.label_shift.em_priors` defines it), the redraw's
  rows gathered once into a contiguous table;
* :func:`adapted_pairs` and :func:`reweighted_rows`: rows re-weighted by their redraw's class weights (Saerens et al.
  2002, Eq. 2.4), the first reduced to what accuracy and log-loss read (the adapted argmax and label probability),
  the second as whole rows (the adapted per-row metrics of :mod:`calbench.metrics.definitions_label_shift`), and
  :func:`redraw_sums` and :func:`class_sums`, a per-row term and the weights summed over each redraw's rows.

For a redraw with row weights w, s = p / π_s and priors π: the mixture mᵢ = sᵢ · π, the EM step
π ⊙ Σᵢ wᵢ sᵢ / mᵢ / Σ w and the weighted mean log-likelihood Σᵢ wᵢ ln max(mᵢ, 1e-300) / Σ w, in one pass over the
redraw's rows. Each sum runs in the order of the numpy computation it replaces (mᵢ over the classes in turn, the
step's sums over the rows in turn, a row norm ‖·‖ in numpy's pairwise order: :func:`_pairwise_sum`), so the results
are numpy's to the bit (tests/unit/test_label_shift_batched.py); reordered sums (vector instructions, BLAS) would
move EM's iterates by rounding, and its stopping rule then stops some redraws a cycle earlier or later.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from calbench.kernels.vector_log import log_dot


@njit(cache=True, nogil=True, error_model="numpy")
def redraw_counts(counts, order, starts, available, classes, uniforms, scale, out):
    """``out[r, i]`` ← ``scale`` × how often redraw r takes test row i. Rows sorted by class are ``order`` (class c
    from ``starts[c]``, ``available[c]`` rows); resample r holds ``counts[r, i]`` copies of row i. Slot s of the set
    (class ``classes[s]``) takes, of resample r's copies of its class listed in that order, the one at
    ⌊``uniforms[r, s]`` · (their number)⌋; where the resample holds no row of the class, each of its rows counts
    once (the class is drawn from its rows uniformly)."""
    longest = 0
    for r in range(counts.shape[0]):
        longest = max(longest, counts[r].sum())
    copies = np.empty(longest + order.size + 3, dtype=np.int64)  # a resample's copies, its missed classes' rows
    first, totals = np.empty(available.size, dtype=np.int64), np.empty(available.size, dtype=np.int64)
    for r in range(counts.shape[0]):
        end = 0
        for c in range(available.size):  # the resample's copies, by class, each row as often as it was drawn
            first[c] = end
            for q in range(starts[c], starts[c] + available[c]):
                row, drawn = order[q], counts[r, order[q]]
                copies[end], copies[end + 1], copies[end + 2] = row, row, row  # the next row overwrites the rest
                for m in range(3, drawn):
                    copies[end + m] = row
                end += drawn
            if end == first[c]:  # no row of the class in the resample: each row once
                for q in range(starts[c], starts[c] + available[c]):
                    copies[end] = order[q]
                    end += 1
            totals[c] = end - first[c]
        for s in range(classes.size):
            c = classes[s]
            offset = min(np.int64(math.floor(uniforms[r, s] * totals[c])), totals[c] - 1)  # u · n rounded up to n
            out[r, copies[first[c] + offset]] += 1.0
        for i in range(out.shape[1]):
            out[r, i] *= scale


@njit(cache=True, nogil=True, error_model="numpy")
def _csr(weights, indptr, cols, vals):
    """The non-zeros of ``weights`` into ``cols`` and ``vals`` (one entry longer: every entry is written, and kept
    where it is not 0, without a branch to mispredict)."""
    t = 0
    for r in range(weights.shape[0]):
        for i in range(weights.shape[1]):
            cols[t], vals[t] = i, weights[r, i]
            t += np.int64(weights[r, i] != 0)
        indptr[r + 1] = t


def sparse_rows(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr [R + 1], column of each non-zero [nnz], its weight [nnz]) of row weights ``weights`` [R, n], the
    non-zeros of each redraw in the order of its columns."""
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    nnz = int(np.count_nonzero(weights))
    indptr, cols, vals = np.zeros(weights.shape[0] + 1, dtype=np.int64), np.empty(nnz + 1, np.int64), np.empty(nnz + 1)
    _csr(weights, indptr, cols, vals)
    return indptr, cols[:nnz], vals[:nnz]


@njit(cache=True, nogil=True, error_model="numpy")
def _block_sum(x, low, n):
    """Σ x[low:low + n] for n ≤ 128 as numpy sums a block: in turn below 8 terms, else eight running sums."""
    if n < 8:
        total = 0.0
        for i in range(low, low + n):
            total += x[i]
        return total
    r0, r1, r2, r3 = x[low], x[low + 1], x[low + 2], x[low + 3]
    r4, r5, r6, r7 = x[low + 4], x[low + 5], x[low + 6], x[low + 7]
    i = low + 8
    while i < low + n - n % 8:
        r0, r1, r2, r3 = r0 + x[i], r1 + x[i + 1], r2 + x[i + 2], r3 + x[i + 3]
        r4, r5, r6, r7 = r4 + x[i + 4], r5 + x[i + 5], r6 + x[i + 6], r7 + x[i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < low + n:
        total += x[i]
        i += 1
    return total


@njit(cache=True, nogil=True, error_model="numpy")
def _pairwise_sum(x):
    """Σ x in numpy's order (``np.add.reduce``'s pairwise summation: blocks of at most 128 terms, :func:`_block_sum`,
    longer runs split in halves of a multiple of 8 and their sums added), so that a norm equals
    ``np.linalg.norm``'s to the bit. The halves are walked with a stack (numba does not cache recursive
    functions)."""
    lows, sizes, combine = np.empty(128, np.int64), np.empty(128, np.int64), np.empty(128, np.bool_)
    sums = np.empty(64)
    lows[0], sizes[0], combine[0], tasks, done = 0, x.size, False, 1, 0
    while tasks:
        tasks -= 1
        low, n = lows[tasks], sizes[tasks]
        if combine[tasks]:  # both halves summed: left + right
            done -= 1
            sums[done - 1] = sums[done - 1] + sums[done]
        elif n <= 128:
            sums[done] = _block_sum(x, low, n)
            done += 1
        else:  # the left half first, then the right, then their sum
            half = n // 2 - (n // 2) % 8
            lows[tasks], sizes[tasks], combine[tasks] = low, n, True
            lows[tasks + 1], sizes[tasks + 1], combine[tasks + 1] = low + half, n - half, False
            lows[tasks + 2], sizes[tasks + 2], combine[tasks + 2] = low, half, False
            tasks += 3
    return sums[0]


@njit(cache=True, nogil=True, error_model="numpy")
def _norm(x, work):
    for j in range(x.size):
        work[j] = x[j] * x[j]
    return math.sqrt(_pairwise_sum(work[:x.size]))


@njit(cache=True, nogil=True, error_model="numpy")
def _em_step(rows, weights, total, priors, out, sums, mixes, work, likelihood):
    """``out`` ← the EM step from ``priors`` over ``rows`` (s of the redraw's rows) weighted by ``weights``; returns
    the weighted mean log-likelihood at ``priors`` where ``likelihood`` (else 0)."""
    k, size = priors.size, weights.size
    sums[:] = 0.0
    for t in range(size):
        mix = 0.0
        for j in range(k):
            mix += rows[t, j] * priors[j]
        ratio = weights[t] / mix
        for j in range(k):
            sums[j] += ratio * rows[t, j]
        mixes[t] = max(mix, 1e-300)
    for j in range(k):
        out[j] = priors[j] * sums[j] / total
    if likelihood:
        return log_dot(mixes[:size], weights, work[:size]) / total
    return 0.0


@njit(cache=True, nogil=True, error_model="numpy")
def _floored(prior, source, floor):
    """max(π/π_s, floor) as ``np.maximum`` takes it (NaN stays NaN)."""
    weight = prior / source
    return weight if weight >= floor or weight != weight else floor


@njit(cache=True, nogil=True, error_model="numpy")
def em_redraws(scaled, safe, indptr, cols, vals, totals, start, floor, tol, max_iter, out, steps, changes):
    """For each redraw r (CSR ``indptr``, ``cols``, ``vals``; weight sum ``totals[r]``) of the rows s = ``scaled``:
    ``out[r]`` ← EM's priors from ``start``, by SQUAREM cycles (three steps each) until no floored weight
    max(π/``safe``, ``floor``) changes by more than ``tol`` relative (or ``max_iter`` steps); ``steps[r]`` ← its
    steps, ``changes[r]`` ← the last cycle's relative change. The cycle is
    :func:`calbench.metrics.label_shift.em_priors`'s (Varadhan & Roland 2008, S3)."""
    k = scaled.shape[1]
    longest = np.max(indptr[1:] - indptr[:-1])
    rows, mixes, work = np.empty((longest, k)), np.empty(longest), np.empty(max(longest, k))
    priors, first, second, jump, new, sums = (np.empty(k), np.empty(k), np.empty(k), np.empty(k), np.empty(k),
                                              np.empty(k))
    r_, v_ = np.empty(k), np.empty(k)
    for r in range(indptr.size - 1):
        begin, size, total = indptr[r], indptr[r + 1] - indptr[r], totals[r]
        for t in range(size):  # the redraw's rows, contiguous for its every step
            for j in range(k):
                rows[t, j] = scaled[cols[begin + t], j]
        table, weights = rows[:size], vals[begin:begin + size]
        priors[:] = start
        count, change = 0, 0.0
        while count < max_iter:
            loglik = _em_step(table, weights, total, priors, first, sums, mixes, work, True)
            _em_step(table, weights, total, first, second, sums, mixes, work, False)
            for j in range(k):
                r_[j] = first[j] - priors[j]
                v_[j] = (second[j] - 2.0 * first[j]) + priors[j]
            norm_v = _norm(v_, work)
            alpha = -_norm(r_, work) / (norm_v if norm_v >= 1e-300 or norm_v != norm_v else 1e-300)
            alpha = -1.0 if alpha > -1.0 else alpha  # NaN stays NaN, as np.minimum keeps it
            plain = False
            for j in range(k):
                jump[j] = (priors[j] - (2.0 * alpha) * r_[j]) + (alpha * alpha) * v_[j]
                plain = plain or jump[j] <= 0
            if not plain:  # (a jump that left the simplex keeps the plain steps' π₂ without a step from it)
                plain = _em_step(table, weights, total, jump, new, sums, mixes, work, True) < loglik
            if plain:  # the jump left the simplex or lowered the likelihood: the plain steps' π₂
                new[:] = second
                jump[:] = first
            change = 0.0
            for j in range(k):
                before = _floored(jump[j], safe[j], floor)
                relative = abs(_floored(new[j], safe[j], floor) - before) / before
                if relative > change or relative != relative:  # the maximum, NaN as np.max takes it
                    change = relative if change == change else change
            count += 3
            priors[:] = new
            if not change > tol:
                break
        out[r] = priors
        steps[r], changes[r] = count, change


@njit(cache=True, nogil=True, error_model="numpy")
def adapted_pairs(probs, labels, ratios, indptr, cols, hits, label_probs):
    """For each redraw r and each of its rows i (CSR ``indptr``, ``cols``): p ⊙ ``ratios[r]`` renormalised, or p
    where the ratios zero the row (:func:`calbench.metrics.label_shift.reweight`), reduced to ``hits[t]`` (1 where
    its first largest entry is the row's label, as ``np.argmax`` picks it) and ``label_probs[t]`` (its entry at the
    label). Dividing by a positive sum keeps the order of the entries but can round two of them to one value, so
    the first largest entry is sought among the products and, before it, among those within 10⁻¹⁵ of it divided
    (two products that round to one quotient ≥ 1/k differ by at most 2⁻⁵² relative)."""
    k = probs.shape[1]
    row = np.empty(k)
    for r in range(indptr.size - 1):
        for t in range(indptr[r], indptr[r + 1]):
            i, label = cols[t], labels[cols[t]]
            total = 0.0
            for j in range(k):
                row[j] = probs[i, j] * ratios[r, j]
                total += row[j]
            if 0 < total < np.inf:
                best, largest = 0, row[0]
                for j in range(1, k):  # without branches: the largest entry is where it falls
                    above = row[j] > largest
                    best, largest = (j if above else best), (row[j] if above else largest)
                threshold = largest - 1e-15 * largest if largest >= 1e-300 else 0.0
                near = 0
                for j in range(k):  # entries before it that may round to its quotient: counted without branches
                    near += np.int64(row[j] >= threshold) * np.int64(j < best)
                if near:
                    top = largest / total
                    for j in range(best):
                        if row[j] / total == top:
                            best = j
                            break
                label_probs[t] = row[label] / total
            else:  # as np.argmax takes the divided row or p (a NaN first)
                best = 0
                for j in range(k):
                    row[j] = row[j] / total if total > 0 else probs[i, j]
                    if row[j] > row[best] or (row[j] != row[j] and row[best] == row[best]):
                        best = j
                label_probs[t] = row[label]
            hits[t] = 1.0 if best == label else 0.0


@njit(cache=True, nogil=True, error_model="numpy")
def redraw_sums(indptr, vals, terms, out):
    """``out[r]`` ← Σ ``vals[t]`` · ``terms[t]`` over redraw r's entries, in their order (``np.bincount``'s)."""
    for r in range(indptr.size - 1):
        total = 0.0
        for t in range(indptr[r], indptr[r + 1]):
            total += vals[t] * terms[t]
        out[r] = total


@njit(cache=True, nogil=True, error_model="numpy")
def class_sums(indptr, cols, vals, labels, out):
    """``out[r, c]`` ← Σ ``vals[t]`` over redraw r's entries of rows of class c (``labels[cols[t]]``), in their
    order."""
    out[:] = 0.0
    for r in range(indptr.size - 1):
        for t in range(indptr[r], indptr[r + 1]):
            out[r, labels[cols[t]]] += vals[t]


@njit(cache=True, nogil=True, error_model="numpy")
def reweighted_rows(probs, ratios, sets, rows, out):
    """``out[t]`` ← ``probs[rows[t]] ⊙ ratios[sets[t]]`` renormalised, or ``probs[rows[t]]`` where the ratios zero the
    row (:func:`calbench.metrics.label_shift.reweight` on each (redraw, row) pair, without the gathered copies)."""
    k = probs.shape[1]
    for t in range(sets.size):
        r, i = sets[t], rows[t]
        total = 0.0
        for j in range(k):
            out[t, j] = probs[i, j] * ratios[r, j]
            total += out[t, j]
        for j in range(k):
            out[t, j] = out[t, j] / total if total > 0 else probs[i, j]


@njit(cache=True, nogil=True, error_model="numpy")
def positive_definite(matrices, out):
    """``out[m]`` ← whether the Cholesky factorisation of the symmetric ``matrices[m]`` (its lower triangle read)
    runs to the end with positive pivots (RLLS's test of its Newton Hessians, :func:`calbench.metrics.rlls.solve`)."""
    k = matrices.shape[1]
    factor = np.empty((k, k))
    for m in range(matrices.shape[0]):
        out[m] = True
        for j in range(k):
            pivot = matrices[m, j, j]
            for q in range(j):
                pivot -= factor[j, q] * factor[j, q]
            if not pivot > 0:
                out[m] = False
                break
            factor[j, j] = math.sqrt(pivot)
            for i in range(j + 1, k):
                entry = matrices[m, i, j]
                for q in range(j):
                    entry -= factor[i, q] * factor[j, q]
                factor[i, j] = entry / factor[j, j]


def warm_up() -> None:
    """Compile (or load from the cache) the kernels for float64 tables and int64 indices."""
    scaled, weights = np.array([[1.0, 2.0], [3.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 2.0]])
    priors, out, labels = np.full((2, 2), 0.5), np.empty((2, 2)), np.array([0, 1])
    indptr, cols, vals = sparse_rows(weights)
    em_redraws(scaled, np.ones(2), indptr, cols, vals, weights.sum(axis=1), np.full(2, 0.5), 1e-3, 1e-6, 30, out,
               np.empty(2, dtype=np.int64), np.empty(2))
    adapted_pairs(scaled, labels, priors, indptr, cols, np.empty(cols.size), np.empty(cols.size))
    reweighted_rows(scaled, priors, labels, labels, out)
    redraw_sums(indptr, vals, vals, np.empty(2))
    class_sums(indptr, cols, vals, labels, np.empty((2, 2)))
    positive_definite(np.eye(2)[None], np.empty(1, dtype=np.bool_))
    redraw_counts(np.ones((2, 2), dtype=np.int64), labels, labels, np.ones(2, dtype=np.int64), labels,
                  np.full((2, 2), 0.5), 1.0, np.zeros((2, 2)))
