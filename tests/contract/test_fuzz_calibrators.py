"""Fuzzing saved calibrators (docs/saved_calibrators.md, "Guarantees"): forgeries drawn at random, with a fixed seed,
from every family of test_decode_budget.py and test_calibrator_files.py (widened references, chains of one shared
stage, wide class counts, values scaled, negated or zeroed, integers set to edge values, tensors recast
to other dtypes, settings and attributes removed or given as strings) over the saved file of every registered
method, the checksum recomputed. Each forgery is refused with CalibratorFileError naming the file, or loads to a
calibrator whose outputs are probability distributions (or are refused as not being ones), within the documented
memory and time and without opening another file. ``CALBENCH_FUZZ=N`` draws N forgeries (``make fuzz``: a long
run), ``CALBENCH_FUZZ_SEED`` another seed."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import calbench
from calbench.methods import available
from calbench.persist import CalibratorFileError
from calbench.persist.budget import PEAK_BASE, PEAK_PER_BYTE
from calbench.persist.format import checksum
from calbench.scores import NotDistributionsError, non_distributions
from test_decode_budget import SECONDS, load_cost
from test_persist import TEST, fitted

FORGERIES = int(os.environ.get("CALBENCH_FUZZ", "300"))
SEED = int(os.environ.get("CALBENCH_FUZZ_SEED", "0"))


def _nodes(tree, at=()):
    """(path, node) of every JSON value of ``tree``."""
    yield at, tree
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _nodes(value, at + (key,))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from _nodes(value, at + (i,))


def _at(tree, at):
    for step in at:
        tree = tree[step]
    return tree


def _put(tree, at, value):
    _at(tree, at[:-1])[at[-1]] = value


def _pairs(tree):
    """Paths of every ``$dict``'s list of pairs (settings, states, dicts)."""
    return [at for at, node in _nodes(tree) if isinstance(node, dict) and isinstance(node.get("$dict"), list)
            and node["$dict"]]


def widen(rng, header, arrays):
    """A reference list to one float32 tensor, widened, put in place of a random value of the state."""
    key = f"z{len(arrays)}"
    arrays[key] = rng.normal(size=int(rng.integers(1, 2**20))).astype(np.float32)
    at = _pairs(header["calibrator"])[int(rng.integers(len(_pairs(header["calibrator"]))))]
    pairs = _at(header["calibrator"], at)["$dict"]
    pairs[int(rng.integers(len(pairs)))][1] = [{"$array": key, "as": "<f8"}] * int(rng.integers(1, 300))


def chain_of_itself(rng, header, arrays):
    """A chain of many copies of the file's calibrator (each stage rebuilding what the calibrator rebuilds)."""
    tree = header["calibrator"]
    classes = header["num_classes"]
    stages = int(rng.integers(2, 400))
    header["calibrator"] = {"$calibrator": "chain", "params": {"$dict": [["steps", [tree] * stages]]},
                            "state": {"$dict": [["num_classes_", classes]]}}


def wide(rng, header, arrays):
    """Every class count set to one large count."""
    count = int(2 ** rng.uniform(8, 20))
    for at, node in list(_nodes(header["calibrator"])):
        if isinstance(node, list) and len(node) == 2 and node[0] == "num_classes_":
            node[1] = count


def scale_values(rng, header, arrays):
    """A random float tensor's entries (some or all) scaled, negated, zeroed or made huge."""
    floats = [k for k, a in arrays.items() if a.dtype.kind == "f"]
    if not floats:
        return edge_integers(rng, header, arrays)
    key = floats[int(rng.integers(len(floats)))]
    values = arrays[key].copy()
    factor = rng.choice([-1.0, 0.0, 5.0, -5.0, 1e30, 1e-30])
    mask = rng.uniform(size=values.shape) < rng.choice([0.05, 1.0])
    values[mask] = values[mask] * factor if factor else 0.0
    arrays[key] = values.astype(arrays[key].dtype)


def edge_integers(rng, header, arrays):
    """A random number of the header (int or float, outside the header fields) set to an edge value."""
    numbers = [at for at, node in _nodes(header["calibrator"]) if type(node) in (int, float)]
    if numbers:
        _put(header["calibrator"], numbers[int(rng.integers(len(numbers)))],
             [0, -1, 2**31, -0.5, 1e300, 2.5][int(rng.integers(6))])


def recast(rng, header, arrays):
    """A random tensor recast to another dtype kind."""
    key = list(arrays)[int(rng.integers(len(arrays)))] if arrays else None
    if key is None:
        return edge_integers(rng, header, arrays)
    arrays[key] = arrays[key].astype([np.int64, np.bool_, np.float16, np.uint8][int(rng.integers(4))])


def drop_or_stringify(rng, header, arrays):
    """A random setting or attribute removed, or its value given as a string."""
    places = _pairs(header["calibrator"])
    pairs = _at(header["calibrator"], places[int(rng.integers(len(places)))])["$dict"]
    i = int(rng.integers(len(pairs)))
    if rng.uniform() < 0.5:
        del pairs[i]
    else:
        pairs[i][1] = str(pairs[i][1])[:20]


FAMILIES = (widen, chain_of_itself, wide, scale_values, edge_integers, recast, drop_or_stringify)


def _forgeries():
    rng = np.random.default_rng(SEED)
    names = available()
    return [(names[int(rng.integers(len(names)))], FAMILIES[int(rng.integers(len(FAMILIES)))].__name__,
             int(rng.integers(2**31))) for _ in range(FORGERIES)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Every registered method's saved file, and each loaded once (imports and compiled kernels before watching)."""
    folder = tmp_path_factory.mktemp("fuzz")
    paths = {name: calbench.save(fitted(name), folder / f"{name}.safetensors") for name in available()}
    for path in paths.values():
        calbench.load(path)
    return paths


def test_random_forgeries_are_refused_or_give_distributions_within_the_bounds(saved, tmp_path):
    families = {family.__name__: family for family in FAMILIES}
    outcomes = {"refused": 0, "loaded": 0}
    for n, (name, family, seed) in enumerate(_forgeries()):
        from calbench.persist import read_header

        header, arrays = read_header(saved[name]), dict(load_file(str(saved[name])))
        families[family](np.random.default_rng(seed), header, arrays)
        header["checksum"] = checksum(header, arrays)
        path = tmp_path / f"f{n}.safetensors"
        save_file(arrays, str(path), metadata={"calbench": json.dumps(header)})
        where = f"forgery {n} ({family} of {name}, seed {seed})"
        result, events, peak, seconds = load_cost(path)
        assert not events, f"{where}: audit events {events}"
        assert peak <= PEAK_BASE + PEAK_PER_BYTE * path.stat().st_size, f"{where}: {peak / 2**20:.0f} MiB traced"
        assert seconds <= SECONDS, f"{where}: {seconds:.1f} CPU-s"
        if isinstance(result, Exception):
            assert isinstance(result, CalibratorFileError) and str(path) in str(result), f"{where}: {result!r}"
            outcomes["refused"] += 1
        else:
            try:
                probs = result.predict_proba(TEST[0] if "embeddings" in result.needs else TEST[0].logits)
            except NotDistributionsError as err:
                assert str(path) in str(err), where
            else:
                assert non_distributions(probs) == 0, where
            outcomes["loaded"] += 1
        path.unlink()
    assert outcomes["refused"] > FORGERIES // 4, outcomes  # the forgeries reach the checks
