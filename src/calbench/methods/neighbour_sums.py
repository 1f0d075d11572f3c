"""Cache-blocked sums of pool rows over each query's neighbours, cumulative by rank band (LECE, issue 12).

LECE's grid needs, for every query, the sums of the pool's targets (p̂ − y, or y) over its k nearest
for several nested k: ``out[i, j] = Σ_{r < ends[j]} targets[nearest[i, r]]``. A plain gather reads each
neighbour's whole row from memory (25,000 queries × 4,500 neighbours × 1,000 classes at ImageNet size:
memory-bound). Here the pool is stored as column chunks (:func:`chunk_columns`) and each query's neighbour
list is sorted by pool row; the compiled kernel walks a block of queries over one tile of pool rows of
one chunk at a time, so the tile and the block's per-band accumulators stay in cache while every
query of the block adds its neighbours from it. Same sums as the gather, in another order (rounding,
~1e-15 relative).

The kernels are compiled with ``numba`` (``nogil``: fold threads run them in parallel).
"""

from __future__ import annotations

import numba
import numpy as np

#: Columns per chunk, a constant of the compiled kernel (its inner loop unrolled): 64 float64 = 512 bytes
#: per pool row of a chunk; fewer columns are zero-padded.
CHUNK_COLUMNS = 64
#: Pool rows per tile (512 × 64 float64 = 256 KiB: a tile stays in a core's L2 cache).
TILE_ROWS = 512
#: Queries walked together over a tile (their accumulators: 64 × bands × 64 float64).
QUERY_BLOCK = 64


def empty_chunks(n: int, columns: int) -> np.ndarray:
    """Zeros ``[chunks, n, CHUNK_COLUMNS]`` holding an ``[n, columns]`` array by column chunks."""
    return np.zeros((-(-columns // CHUNK_COLUMNS), n, CHUNK_COLUMNS))


def put_rows(chunks: np.ndarray, start: int, block: np.ndarray) -> None:
    """Write the rows ``block`` ``[b, columns]`` at rows ``start …`` of ``chunks`` (:func:`empty_chunks`)."""
    for c in range(chunks.shape[0]):
        part = block[:, c * CHUNK_COLUMNS:(c + 1) * CHUNK_COLUMNS]
        chunks[c, start:start + block.shape[0], :part.shape[1]] = part


def chunk_columns(targets: np.ndarray) -> np.ndarray:
    """``[chunks, n, CHUNK_COLUMNS]`` float64 copy of ``targets`` ``[n, T]``, the last chunk zero-padded."""
    chunks = empty_chunks(*targets.shape)
    put_rows(chunks, 0, targets)
    return chunks


def cumulative_band_sums(chunks: np.ndarray, columns: int, nearest: np.ndarray, ends) -> np.ndarray:
    """``[b, len(ends), columns]``: per query, the sums of the pool rows ``nearest[i, :ends[j]]``.

    ``chunks`` is :func:`chunk_columns` of the pool's ``[n, columns]`` targets; ``nearest`` ``[b, ends[-1]]``
    lists each query's neighbours by rank (pool row indices); ``ends`` are increasing.
    """
    ends = np.asarray(ends, dtype=np.int64)
    bands = ends.size
    shift = max(1, int(bands - 1).bit_length())  # key = pool row << shift | band
    band_of_rank = np.searchsorted(ends, np.arange(ends[-1]), side="right")
    keys = np.sort((nearest[:, :ends[-1]].astype(np.int64) << shift) | band_of_rank, axis=1)  # by pool row
    out = np.empty((nearest.shape[0], bands, chunks.shape[0] * chunks.shape[2]))
    _kernel(chunks, keys, bands, shift, TILE_ROWS, QUERY_BLOCK, out)
    return out[:, :, :columns]


@numba.njit(nogil=True, cache=True, boundscheck=False)
def _kernel(chunks, keys, bands, shift, tile_rows, query_block, out):  # pragma: no cover (compiled)
    n_chunks, n, _ = chunks.shape
    width = CHUNK_COLUMNS  # a compile-time constant
    queries, listed = keys.shape
    position = np.empty(query_block, np.int64)
    mask = (1 << shift) - 1
    for first in range(0, queries, query_block):
        block = min(queries, first + query_block) - first
        for c in range(n_chunks):
            chunk = chunks[c]
            acc = np.zeros((block, bands, width))
            position[:] = 0
            for tile_end in range(tile_rows, n + tile_rows, tile_rows):
                for i in range(block):
                    p = position[i]
                    listing = keys[first + i]
                    while p < listed:
                        key = listing[p]
                        row = key >> shift
                        if row >= tile_end:
                            break
                        a = acc[i, key & mask]
                        values = chunk[row]
                        for j in range(width):
                            a[j] += values[j]
                        p += 1
                    position[i] = p
            for i in range(block):
                for j in range(width):
                    running = 0.0
                    for e in range(bands):
                        running += acc[i, e, j]
                        out[first + i, e, c * width + j] = running


def float32_error_bound(columns: int, eps: float) -> tuple[float, float]:
    """(relative, absolute) bound on |s₃₂ − s| for s = Σⱼ aⱼ Lⱼ with aⱼ, Lⱼ ≥ 0 and Lⱼ ≤ −ln eps computed as a
    float32 matrix product in any summation order: the rounding of a and L to float32, then γ_C of the
    products and sums (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1), plus the float64
    score's own γ_C; the absolute part covers entries of a below float32's smallest normal (flushed)."""
    unit = 2.0**-24
    relative = 1.01 * ((columns + 3) * unit / (1 - (columns + 3) * unit)) + 1e-12
    absolute = 2.0 * columns * float(np.finfo(np.float32).tiny) * (1.0 - np.log(eps))
    return relative, absolute


def nearest_kl_by_band(queries: np.ndarray, log_rows32: np.ndarray, logits: np.ndarray, log_norm: np.ndarray, ends,
                       eps: float, logit_scale: float) -> np.ndarray:
    """``[b, ends[-1]]`` pool rows nearest to each query in d_KL, positions ``ends[j−1]:ends[j]`` holding the
    neighbours of ranks ``ends[j−1] … ends[j] − 1`` (ties broken by pool row), in the order of the float64
    scores Σⱼ aⱼ·(−ln max(p̂ⱼ, eps)) with −ln p̂ⱼ = ``log_norm`` − ``logits``ⱼ (``log_rows32``: those
    −ln max(p̂, eps) in float32, ``[n, C]``; ``logit_scale``: the largest finite |logit| + |log_norm|).

    The scores are a float32 matrix product (half the time of float64); a pool row is placed by them
    only where :func:`float32_error_bound` proves its side of every rank boundary, and the few rows within
    the bound of a boundary are scored again in float64 and ranked by that score.
    """
    ends = np.asarray(ends, dtype=np.int64)
    scores = queries.astype(np.float32) @ log_rows32.T
    nearest_scores = np.partition(scores, ends[-1] - 1, axis=1)[:, :ends[-1]]  # the float32 score at each boundary
    if ends.size > 1:  # sorting these is faster than numpy's partition at several kth
        nearest_scores.sort(axis=1)
    boundaries = nearest_scores[:, ends - 1].astype(np.float64)
    relative, absolute = float32_error_bound(queries.shape[1], eps)
    # the float64 score from logits differs from Σ a·(−ln p̂) by the rounding of log_norm − logits
    absolute += 4 * np.finfo(np.float64).eps * logit_scale * np.abs(queries).sum(axis=1).max(initial=0.0)
    out = np.empty((queries.shape[0], ends[-1]), dtype=np.int64)
    _select(scores, boundaries, np.ascontiguousarray(queries, dtype=np.float64), logits, log_norm, -np.log(eps),
            ends, relative, absolute, out)
    return out


@numba.njit(nogil=True, cache=True, boundscheck=False)
def _select(scores, boundaries, queries, logits, log_norm, cap, ends, relative, absolute, out):  # pragma: no cover
    queries_n, n = scores.shape
    bands = ends.size
    certain_in = np.empty(bands)  # s₃₂ below: the exact score is below the exact ends[e]-th one
    certain_out = np.empty(bands)  # s₃₂ above: the exact score is above it
    unsure_rows = np.empty(n, np.int64)
    unsure_exact = np.empty(n)
    unsure_first = np.empty(n, np.int64)
    unsure_last = np.empty(n, np.int64)
    sure_in = np.empty(bands, np.int64)
    taken = np.empty(bands, np.int64)
    fill = np.empty(bands, np.int64)
    for i in range(queries_n):
        for e in range(bands):
            v = boundaries[i, e]
            certain_in[e] = (v * (1 - relative) - 2 * absolute) / (1 + relative)
            certain_out[e] = (v * (1 + relative) + 2 * absolute) / (1 - relative)
            sure_in[e] = 0
            taken[e] = 0
            fill[e] = 0 if e == 0 else ends[e - 1]
        unsure = 0
        for j in range(n):
            s = scores[i, j]
            if s > certain_out[bands - 1]:
                continue
            first_in = bands
            for e in range(bands):
                if s < certain_in[e]:
                    first_in = e
                    break
            first_open = 0
            while s > certain_out[first_open]:
                first_open += 1
            if first_in < bands:
                sure_in[first_in] += 1
            if first_open < first_in:  # undecided at boundaries first_open … first_in − 1
                exact = 0.0
                for c in range(queries.shape[1]):
                    exact += queries[i, c] * min(log_norm[j] - logits[j, c], cap)
                unsure_rows[unsure] = j
                unsure_exact[unsure] = exact
                unsure_first[unsure] = first_open
                unsure_last[unsure] = first_in
                unsure += 1
            else:
                if fill[first_in] >= ends[first_in]:
                    raise RuntimeError("nearest_kl_by_band: a rank band overflowed (error bound violated)")
                out[i, fill[first_in]] = j
                fill[first_in] += 1
        for e in range(1, bands):
            sure_in[e] += sure_in[e - 1]
        order = np.argsort(unsure_exact[:unsure], kind="mergesort")  # stable: ties by pool row
        for u in order:
            band = unsure_last[u]
            for e in range(unsure_first[u], unsure_last[u]):
                if taken[e] < ends[e] - sure_in[e]:
                    taken[e] += 1
                    band = min(band, e)
            if band < bands:
                if fill[band] >= ends[band]:
                    raise RuntimeError("nearest_kl_by_band: a rank band overflowed (error bound violated)")
                out[i, fill[band]] = unsure_rows[u]
                fill[band] += 1
        for e in range(bands):
            if fill[e] != ends[e]:
                raise RuntimeError("nearest_kl_by_band: a rank band is not full (error bound violated)")
