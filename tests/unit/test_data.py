"""Sources → dumps: synthetic tasks, imports, downloads, splits and the HDF5 store."""

import hashlib
import pickle

import h5py
import numpy as np
import pytest
import yaml

from calbench.config import complete_source
from calbench.data import download, sources, splits, store, synthetic
from calbench.scores import PROB_FLOOR
from conftest import DOWNLOADS, PlantedFile


def groups_of(name: str, entry: dict, seeds) -> dict:
    """The dump groups of a source entry, filled as calbench.config.load fills it."""
    return sources.build_groups(name, complete_source(entry), seeds, DOWNLOADS)


def dump_of(name: str, entry: dict, seeds, path, cache_dir=DOWNLOADS) -> None:
    """Write the dump of a source entry, filled as calbench.config.load fills it."""
    sources.make_dump(name, complete_source(entry), seeds, path, cache_dir)


def _logits(n=60, c=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, c)).astype(np.float32), rng.integers(c, size=n)


def test_lece3_task_matches_the_paper_definition():
    data = synthetic.lece3(50_000, np.random.default_rng(0))
    p = np.exp(data["logits"])
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-9)
    np.testing.assert_allclose(data["true_probs"], synthetic.lece_true_map(p))
    # LECE paper §4.1.1: c(p) = (p1^0.8 + p1 p2/5, p2 + p1 p3/3, p3 + p1 p2/10) / Z, hand-computed at one point.
    c = synthetic.lece_true_map(np.array([[0.5, 0.3, 0.2]]))[0]
    raw = np.array([0.5**0.8 + 0.03, 0.3 + 0.1 / 3, 0.2 + 0.015])
    np.testing.assert_allclose(c, raw / raw.sum())
    # Labels follow c(p̂): empirical class frequencies match the mean of the true map.
    np.testing.assert_allclose(np.bincount(data["labels"]) / 50_000, data["true_probs"].mean(0), atol=0.01)
    # Dirichlet(½,½,½) predictions: the top-label accuracy is ~0.67 (LECE paper Table 1, "true" accuracy 0.671).
    assert np.mean(p.argmax(1) == data["labels"]) == pytest.approx(0.67, abs=0.01)


def test_synthetic_data_is_reproducible_from_the_seed():
    a, b = (synthetic.generate("lece3", 7, 100, 200) for _ in range(2))
    np.testing.assert_array_equal(a["cal"]["logits"], b["cal"]["logits"])
    assert not np.array_equal(a["cal"]["logits"][:100], a["test"]["logits"][:100])
    c = synthetic.generate("lece3", 8, 100, 200)
    assert not np.array_equal(a["cal"]["logits"], c["cal"]["logits"])


def test_pool_split_is_reproducible_disjoint_and_stratified():
    labels = np.repeat(np.arange(4), 250)
    cal, test = splits.split_pool(labels, seed=3, cal_size=400)
    cal2, test2 = splits.split_pool(labels, seed=3, cal_size=400)
    np.testing.assert_array_equal(cal, cal2)
    assert len(cal) == 400 and len(test) == 600 and not set(cal) & set(test)
    assert np.bincount(labels[cal]).tolist() == [100] * 4
    other, _ = splits.split_pool(labels, seed=4, cal_size=400)
    assert not np.array_equal(cal, other)
    cal_f, _ = splits.split_pool(labels, seed=3, cal_fraction=0.25)
    assert len(cal_f) == 250
    with pytest.raises(ValueError, match="exactly one of cal_size"):
        splits.split_pool(labels, seed=0)
    with pytest.raises(ValueError, match=r"split.cal_size: must lie in \(0, 1000\)"):
        splits.split_pool(labels, seed=0, cal_size=1000)


def test_calibrate_job_reads_only_the_fields_its_method_needs_in_one_read(tmp_path, monkeypatch):
    """A calibrate job reads logits and labels, embeddings only for a method that needs them, and never the true
    probabilities (at 1,000 classes × 25,000 rows, 380 MB of float64 per split that the evaluate job alone uses);
    it opens the dump once, and its data come checked from that one read (store.read_split)."""
    import h5py

    from calbench.jobs.calibrate import CalibrateSpec, calibrate_job

    rng = np.random.default_rng(0)
    parts = {}
    for name, n in (("cal", 300), ("test", 40), ("train", 600)):
        z, y = _logits(n, seed=len(parts))
        parts[name] = {"logits": z, "labels": y, "embeddings": rng.normal(size=(n, 5)).astype(np.float32),
                       "true_probs": np.full((n, 3), 1 / 3)}
    store.write_dump(tmp_path / "d.h5", parts, {})
    read, opened = [], []
    real_read_split, real_file = store.read_split, h5py.File

    def recording_read_split(path, seed, fields=None, **options):
        arrays = real_read_split(path, seed, fields, **options)
        read.append({part: sorted(arrays[part]) for part in ("cal", "test", "train") if part in arrays})
        return arrays

    def recording_file(name, mode="r", **options):
        opened.append((str(name), mode))
        return real_file(name, mode, **options)

    monkeypatch.setattr(store, "read_split", recording_read_split)
    monkeypatch.setattr(h5py, "File", recording_file)
    calibrate_job(spec=CalibrateSpec(source="d", method="ts", seed=0, method_settings={"ts": {}}, input_kind="logits",
                                     dump=tmp_path / "d.h5", calibrated=tmp_path / "ts.h5"))
    assert read == [{"cal": ["labels", "logits"], "test": ["labels", "logits"]}]
    assert opened.count((str(tmp_path / "d.h5"), "r")) == 1
    read.clear(), opened.clear()
    calibrate_job(spec=CalibrateSpec(source="d", method="kcal", seed=0, method_settings={"kcal": {"max_epochs": 1}},
                                     input_kind="logits", dump=tmp_path / "d.h5", calibrated=tmp_path / "kcal.h5"))
    assert read == [{group: ["embeddings", "labels", "logits"] for group in ("cal", "test", "train")}]
    assert opened.count((str(tmp_path / "d.h5"), "r")) == 1


def test_dump_round_trip_and_load_split_for_each_layout(tmp_path):
    z, y = _logits(100)
    store.write_dump(tmp_path / "pool.h5", {"all": {"logits": z, "labels": y}}, {"source": {"type": "import"}})
    part = splits.load_split(tmp_path / "pool.h5", 1, {"cal_size": 40})
    assert part["cal"]["logits"].dtype == np.float32 and part["cal"]["labels"].dtype == np.int64
    np.testing.assert_array_equal(part["cal"]["logits"], z[part["cal_index"]])
    assert len(part["cal_index"]) == 40 and len(part["test_index"]) == 60
    with pytest.raises(ValueError, match="the source needs a split"):
        splits.load_split(tmp_path / "pool.h5", 1, None)
    known = splits.load_split(tmp_path / "pool.h5", 1, {"cal_size": 40}, test_index=part["test_index"])
    for key in ("cal_index", "test_index"):  # the stored test rows give back the same split, without redrawing it
        np.testing.assert_array_equal(known[key], part[key])
    np.testing.assert_array_equal(known["test"]["logits"], part["test"]["logits"])
    # The draw_split job's file holds the same test rows (calibrate jobs of pooled sources read it).
    splits.write_test_index(tmp_path / "pool.h5", 1, {"cal_size": 40}, tmp_path / "splits" / "seed1.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "splits" / "seed1.npy"), part["test_index"])
    store.write_dump(tmp_path / "fixed.h5", {"cal": {"logits": z[:30], "labels": y[:30]},
                                             "test": {"logits": z[30:], "labels": y[30:]}}, {})
    part = splits.load_split(tmp_path / "fixed.h5", 5, None)
    np.testing.assert_array_equal(part["test"]["labels"], y[30:])
    assert store.read_attrs(tmp_path / "fixed.h5")["num_classes"] == 3


def test_dump_rejects_bad_arrays_and_leaves_no_file(tmp_path):
    z, y = _logits()
    z[3, 1] = np.nan
    with pytest.raises(ValueError, match="all/logits: contains NaN or infinite values"):
        store.write_dump(tmp_path / "bad.h5", {"all": {"logits": z, "labels": y}}, {})
    assert list(tmp_path.iterdir()) == []


def test_corrupted_dump_is_a_clear_error(tmp_path):
    z, y = _logits()
    store.write_dump(tmp_path / "d.h5", {"all": {"logits": z, "labels": y}}, {})
    data = (tmp_path / "d.h5").read_bytes()
    (tmp_path / "d.h5").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match=r"d.h5: not a readable HDF5 file .* delete it and rerun"):
        store.list_groups(tmp_path / "d.h5")


def test_import_npy_pool_and_fixed_splits(tmp_path):
    z, y = _logits(50)
    np.save(tmp_path / "z.npy", z)
    np.save(tmp_path / "y.npy", y)
    groups = groups_of("s", {"type": "import", "format": "npy",
                             "files": {"logits": str(tmp_path / "z.npy"), "labels": str(tmp_path / "y.npy")}}, [0])
    np.testing.assert_allclose(groups["all"]["logits"], z)
    fixed = {"cal": {"logits": str(tmp_path / "z.npy"), "labels": str(tmp_path / "y.npy")},
             "test": {"logits": str(tmp_path / "z.npy"), "labels": str(tmp_path / "y.npy")}}
    groups = groups_of("s", {"type": "import", "format": "npy", "files": fixed}, [0])
    assert set(groups) == {"cal", "test"}


def test_import_npz_with_split_prefixes(tmp_path):
    z, y = _logits(50)
    np.savez(tmp_path / "a.npz", cal_logits=z[:20], cal_labels=y[:20], test_logits=z[20:], test_labels=y[20:])
    groups = groups_of("s", {"type": "import", "format": "npz", "files": {"archive": str(tmp_path / "a.npz")}}, [0])
    np.testing.assert_array_equal(groups["test"]["labels"], y[20:])
    np.savez(tmp_path / "b.npz", logits=z, labels=y)
    assert set(groups_of("s", {"type": "import", "format": "npz",
                               "files": {"archive": str(tmp_path / "b.npz")}}, [0])) == {"all"}
    np.savez(tmp_path / "c.npz", validation_logits=z)
    with pytest.raises(ValueError, match="is not named {split}_{field}"):
        groups_of("s", {"type": "import", "format": "npz", "files": {"archive": str(tmp_path / "c.npz")}}, [0])


def test_import_nn_calibration_pickle(tmp_path):
    """The layout of github.com/markus93/NN_calibration: ((logits_val, y_val), (logits_test, y_test))."""
    z, y = _logits(80, c=10)
    with open(tmp_path / "probs_model_c10_logits.p", "wb") as fh:
        pickle.dump(((z[:30], y[:30].reshape(-1, 1)), (z[30:], y[30:].reshape(-1, 1))), fh)
    entry = {"type": "import", "format": "pickle", "files": {"archive": str(tmp_path / "probs_model_c10_logits.p")}}
    dump_of("m", entry, [0], tmp_path / "m.h5")
    part = splits.load_split(tmp_path / "m.h5", 0, None)
    np.testing.assert_allclose(part["cal"]["logits"], z[:30])
    np.testing.assert_array_equal(part["test"]["labels"], y[30:])
    (tmp_path / "junk.p").write_bytes(pickle.dumps({"not": "a tuple"}))
    with pytest.raises(ValueError, match="expected the NN_calibration pickle"):
        groups_of("m", {**entry, "files": {"archive": str(tmp_path / "junk.p")}}, [0])


@pytest.mark.workflow
def test_a_crafted_pickle_is_refused_without_running_it_by_validate_and_a_dry_run(tmp_path):
    """A `format: pickle` source is read by an unpickler that builds only numpy arrays, tuples, lists and numbers:
    a pickle that names anything else (here a function that creates a file) is refused by `calbench validate`
    and `snakemake -n` with the file and the reason, and nothing runs. Real arrays (protocols 2 and 5) load."""
    import subprocess
    import sys

    from conftest import run_snakemake

    z, y = _logits(80, c=10)
    for protocol in (2, 5):
        with open(tmp_path / "ok.p", "wb") as fh:
            pickle.dump(((z[:30], y[:30].reshape(-1, 1)), (z[30:], y[30:])), fh, protocol=protocol)
        groups = groups_of("m", {"type": "import", "format": "pickle", "files": {"archive": str(tmp_path / "ok.p")}},
                           [0])
        np.testing.assert_array_equal(groups["cal"]["logits"], z[:30])
    planted = tmp_path / "planted"
    with open(tmp_path / "crafted.p", "wb") as fh:
        pickle.dump(((z[:30], PlantedFile(planted)), (z[30:], y[30:])), fh)
    crafted = {"type": "import", "format": "pickle", "files": {"archive": str(tmp_path / "crafted.p")}}
    config = {"seeds": [0], "methods": ["ts"], "metrics": ["nll"], "sources": {"m": crafted}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    validate = subprocess.run([sys.executable, "-m", "calbench", "validate", str(tmp_path / "config.yaml")],
                              capture_output=True, text=True, cwd=tmp_path)
    dry = run_snakemake(tmp_path / "run", config, "-n", check=False)
    for result in (validate, dry):
        assert result.returncode != 0
        assert "crafted.p" in result.stdout + result.stderr
        assert "pathlib" in result.stdout + result.stderr and "nothing in a data file may run code" in (
            result.stdout + result.stderr).replace("\n", " ")
    assert not planted.exists()


def test_probabilities_import_as_floored_log_probabilities_and_mismatches_are_errors(tmp_path):
    z, y = _logits(40)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    p[0] = [1.0, 0.0, 0.0]
    np.save(tmp_path / "p.npy", p)
    np.save(tmp_path / "z.npy", z)
    np.save(tmp_path / "y.npy", y)
    files = {"logits": str(tmp_path / "p.npy"), "labels": str(tmp_path / "y.npy")}
    groups = groups_of("s", {"type": "import", "format": "npy", "scores": "probs", "files": files}, [0])
    np.testing.assert_allclose(groups["all"]["logits"][0], np.log([1.0, PROB_FLOOR, PROB_FLOOR]))
    with pytest.raises(ValueError, match="declared `scores: logits` but every row is a probability vector"):
        groups_of("s", {"type": "import", "format": "npy", "scores": "logits", "files": files}, [0])
    files["logits"] = str(tmp_path / "z.npy")
    with pytest.raises(ValueError, match="declared `scores: probs` but rows are not probability vectors"):
        groups_of("s", {"type": "import", "format": "npy", "scores": "probs", "files": files}, [0])
    with pytest.raises(FileNotFoundError, match="sources.s.files: .*missing.npy does not exist"):
        groups_of("s", {"type": "import", "format": "npy",
                        "files": {"logits": str(tmp_path / "missing.npy"), "labels": files["labels"]}}, [0])


def test_download_checks_sha256_and_caches(tmp_path):
    src = tmp_path / "z.npy"
    np.save(src, _logits()[0])
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    path = download.fetch(src.as_uri(), digest, cache)
    assert path.read_bytes() == src.read_bytes()
    assert download.fetch(src.as_uri(), digest, cache) == path  # cached
    with pytest.raises(ValueError, match="sha256 mismatch: expected 0{64}, got .* Nothing was cached"):
        download.fetch(src.as_uri(), "0" * 64, tmp_path / "cache2")
    assert not any((tmp_path / "cache2").iterdir())
    with pytest.raises(OSError, match="download failed .* place the file at"):
        download.fetch((tmp_path / "absent.npy").as_uri(), digest, tmp_path / "cache3")


def test_download_source_builds_the_same_dump_as_an_import(tmp_path):
    z, y = _logits(30)
    np.save(tmp_path / "z.npy", z)
    np.save(tmp_path / "y.npy", y)
    files = {k: {"url": (tmp_path / f"{k[0]}.npy").as_uri(),
                 "sha256": hashlib.sha256((tmp_path / f"{k[0]}.npy").read_bytes()).hexdigest()}
             for k in ("z", "y")}
    entry = {"type": "download", "format": "npy", "files": {"logits": files["z"], "labels": files["y"]}}
    dump_of("d", entry, [0], tmp_path / "d.h5", cache_dir=tmp_path / "cache")
    with h5py.File(tmp_path / "d.h5", "r") as f:
        np.testing.assert_allclose(f["all/logits"][()], z)
    with pytest.raises(ValueError, match="a download source needs {url, sha256}"):
        groups_of("d", {**entry, "files": {"logits": "plain/path.npy"}}, [0])


IMAGENET_SMALL = {"num_classes": 40, "embedding_dim": 24, "accuracy": 0.7, "temperature": 1.5, "imbalance": 1.0}


def test_imagenet_like_network_is_overconfident_linear_in_its_embeddings_and_fixed_across_seeds():
    """The ImageNet-sized task (1,000 classes at full size), scaled down: logits = T·(β·h·Mᵀ + ln π), accuracy as
    configured."""
    parts = synthetic.generate("imagenet_like", 0, 3000, 3000, **IMAGENET_SMALL)
    test = parts["test"]
    # E[max σ(s)] = accuracy of the calibrated network; the observed accuracy matches within sampling error.
    assert abs(test["true_probs"].max(1).mean() - 0.7) < 0.02
    assert abs((test["logits"].argmax(1) == test["labels"]).mean() - 0.7) < 0.03
    reported = np.exp(test["logits"] - test["logits"].max(1, keepdims=True))
    reported /= reported.sum(1, keepdims=True)
    assert reported.max(1).mean() > test["true_probs"].max(1).mean() + 0.05  # temperature 1.5: overconfident
    # The logits are an affine map of the embeddings (a final layer): least squares leaves no residual.
    h = np.hstack([test["embeddings"].astype(np.float64), np.ones((3000, 1))])
    coef = np.linalg.lstsq(h, test["logits"].astype(np.float64), rcond=None)[0]
    assert np.abs(h @ coef - test["logits"]).max() < 1e-3
    # Imbalance 1: class 0 is about 40 / H(40) ≈ 9 times as frequent as the mean class.
    assert np.bincount(test["labels"], minlength=40)[0] > 4 * 3000 / 40
    # One network: another seed redraws the data, not the map from embeddings to logits.
    other = synthetic.generate("imagenet_like", 1, 500, 10, **IMAGENET_SMALL)["cal"]
    h1 = np.hstack([other["embeddings"].astype(np.float64), np.ones((500, 1))])
    assert np.abs(h1 @ coef - other["logits"]).max() < 1e-3
    assert not np.array_equal(other["labels"], parts["cal"]["labels"][:500])


def test_imagenet_like_embeddings_cluster_by_class_as_penultimate_features_do():
    """The classes of a real network's embeddings cluster (neural collapse, Papyan et al. 2020), and so do the
    task's, so KCal's low-dimensional projection can keep the accuracy. The nearest class mean of the training split
    reaches most of the network's accuracy (before the class-signal scale r = 3·√dim: 40 % of it here)."""
    options = {**IMAGENET_SMALL, "num_classes": 100, "embedding_dim": 128}
    train = synthetic.generate_train("imagenet_like", 3000, **options)
    test = synthetic.generate("imagenet_like", 0, 10, 3000, **options)["test"]
    means = np.zeros((100, 128))
    np.add.at(means, train["labels"], train["embeddings"])
    means /= np.maximum(np.bincount(train["labels"], minlength=100), 1)[:, None]
    nearest = (test["embeddings"] @ means.T - (means**2).sum(axis=1) / 2).argmax(axis=1)  # min ‖h − μ‖
    network = (test["logits"].argmax(1) == test["labels"]).mean()
    assert (nearest == test["labels"]).mean() > 0.8 * network


def test_imagenet_like_dump_has_a_training_split_and_bad_options_are_named(tmp_path):
    entry = {"type": "synthetic", "task": "imagenet_like", "n_cal": 50, "n_test": 30, "n_train": 80, **IMAGENET_SMALL}
    dump_of("inet", entry, [0, 1], tmp_path / "inet.h5")
    assert store.list_groups(tmp_path / "inet.h5") == ["seed0/cal", "seed0/test", "seed1/cal", "seed1/test", "train"]
    assert store.read_group(tmp_path / "inet.h5", "train")["embeddings"].shape == (80, 24)
    with pytest.raises(ValueError, match="imagenet_like.*signal"):
        groups_of("inet", {**entry, "signal": 3.0}, [0])
    with pytest.raises(ValueError, match="n_train.*planted_temperature"):
        groups_of("p", {"type": "synthetic", "task": "planted_temperature", "n_cal": 5, "n_test": 5,
                        "n_train": 9}, [0])


def test_calibrated_outputs_store_the_calibration_split_only_on_request_and_old_files_stay_readable(tmp_path):
    """Disk per job stays small at 1,000 classes: nothing reads cal/probs, so they are written only when given; files of
    earlier versions (float64 probs, float32 logprobs) stay readable."""
    probs = np.array([[0.2, 0.8], [0.6, 0.4]])
    store.write_calibrated(tmp_path / "lean.h5", None, probs, [3, 4], [0, 1], [1, 0], {})
    assert store.read_group(tmp_path / "lean.h5", "cal") == {"index": pytest.approx(np.array([3, 4]))}
    with pytest.raises(KeyError, match="lean.h5: holds no calibration-split outputs.*keep_cal_outputs=True"):
        store.read_calibrated(tmp_path / "lean.h5", "cal")
    store.write_calibrated(tmp_path / "full.h5", probs[::-1], probs, [3, 4], [0, 1], [1, 0], {})
    np.testing.assert_array_equal(store.read_calibrated(tmp_path / "full.h5", "cal")["probs"], probs[::-1])
    with h5py.File(tmp_path / "old.h5", "w") as f:
        f["cal/probs"], f["cal/index"], f["test/logprobs"] = probs, [3, 4], np.log(probs).astype(np.float32)
    np.testing.assert_array_equal(store.read_calibrated(tmp_path / "old.h5", "cal")["probs"], probs)
    np.testing.assert_allclose(store.read_calibrated(tmp_path / "old.h5", "test")["probs"], probs, rtol=1e-7)


def test_calibrated_outputs_are_the_predictions_bit_for_bit(tmp_path):
    """The tables must be what the calibrator computes: ties (isotonic, histogram outputs), exact zeros and
    every digit survive the store (a float32 copy changed the argmax of tied rows)."""
    test = synthetic.generate("imagenet_like", 0, 10, 2000, **IMAGENET_SMALL)["test"]
    from calbench.scores import Scores

    probs = Scores(test["logits"]).probs
    probs[:5, 1] = 0.0
    probs[:5] /= probs[:5].sum(1, keepdims=True)
    probs[5, :2] = [0.3, np.nextafter(0.3, 1)]  # a near tie that a float32 copy merges
    probs[5] /= probs[5].sum()
    store.write_calibrated(tmp_path / "c.h5", None, probs, [], np.arange(2000), test["labels"], {})
    back = store.read_calibrated(tmp_path / "c.h5", "test")["probs"]
    assert back.dtype == np.float64
    np.testing.assert_array_equal(back, probs)


def test_job_memory_grows_with_the_size_of_the_source(tmp_path):
    """rules' mem_mb, so that a 1,000-class synthetic dump fits its job's memory: base + copies of the
    [rows, classes] data and the embeddings."""
    entry = {"type": "synthetic", "task": "imagenet_like", "n_cal": 50, "n_test": 30, "n_train": 80, **IMAGENET_SMALL}
    dump_of("inet", entry, [0], tmp_path / "inet.h5")
    assert store.split_sizes(tmp_path / "inet.h5", 0) == {"rows": 80, "train_rows": 80, "classes": 40,
                                                          "embedding_dim": 24}
    base, copies, emb = store.MEMORY_MODEL["calibrate"]
    assert store.job_memory_mb(tmp_path / "inet.h5", 0, "calibrate") == int(
        base + (copies * 80 * 40 + emb * 160 * 24) * 8 / 2**20)
    with pytest.raises(FileNotFoundError):  # Snakemake evaluates the resource again once the dump exists
        store.job_memory_mb(tmp_path / "missing.h5", 0, "evaluate")
    from calbench.data.sources import dump_memory_mb

    big = {**entry, "n_cal": 25000, "n_test": 25000, "n_train": 25000, "num_classes": 1000, "embedding_dim": 768}
    assert dump_memory_mb(big, [0, 1]) == int(1000 + 2 * 125_000 * (12 * 1000 + 4 * 768) / 2**20)
    assert dump_memory_mb({"type": "import"}, [0]) == 2000
