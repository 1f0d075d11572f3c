"""A dump holds its own bytes: a dataset whose data HDF5 would read from elsewhere (external raw storage, a virtual
dataset) is refused by every reader, as soft and external links are (test_config_and_file_mistakes.py), naming the
dataset."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from calbench.data import store


def _dump(tmp_path):
    path = tmp_path / "dump.h5"
    labels = np.arange(6) % 3
    store.write_dump(path, {"cal": {"logits": np.eye(3)[labels], "labels": labels}}, {})
    return path, labels


def _external(tmp_path, f):
    """``test/logits`` whose bytes lie in another local file (external raw storage)."""
    other = tmp_path / "elsewhere.bin"
    other.write_bytes(np.arange(18, dtype=np.float64).tobytes())
    f.create_dataset("test/logits", shape=(6, 3), dtype=np.float64, external=[(str(other), 0, 18 * 8)])


def _virtual(tmp_path, f):
    """``test/logits`` mapped from a dataset of another file (a virtual dataset)."""
    other = tmp_path / "elsewhere.h5"
    with h5py.File(other, "w") as g:
        g["logits"] = np.arange(18, dtype=np.float64).reshape(6, 3)
    layout = h5py.VirtualLayout(shape=(6, 3), dtype=np.float64)
    layout[:] = h5py.VirtualSource(str(other), "logits", shape=(6, 3))
    f.create_virtual_dataset("test/logits", layout)


@pytest.mark.parametrize("plant, what", [(_external, "has external raw storage"), (_virtual, "is a virtual dataset")])
def test_a_dataset_stored_elsewhere_is_refused(tmp_path, plant, what):
    path, labels = _dump(tmp_path)
    np.testing.assert_array_equal(store.read_group(path, "cal")["labels"], labels)
    with h5py.File(path, "a") as f:
        plant(tmp_path, f)
        f["test/labels"] = labels
    with h5py.File(path, "r") as f:  # HDF5 itself reads the other file's bytes
        assert f["test/logits"][0, 1] == 1.0
    for read, args in ((store.read_group, (path, "test")), (store.list_groups, (path,)), (store.read_attrs, (path,))):
        with pytest.raises(ValueError, match=rf"dump.h5: test/logits {what} \(HDF5 would read .* in its place\); the "
                                             "files calbench writes hold none"):
            read(*args)
