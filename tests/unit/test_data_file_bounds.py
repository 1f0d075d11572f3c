"""Data files that declare more than they hold end in a one-line error, not a traceback or an allocation: an
``.npy`` header declaring 2⁴⁰ rows, an ``.npz`` member declaring 128 TB, an NN_calibration pickle whose shared
lists expand to 2³⁴ entries; a CSV with a byte-order mark keeps its first row; concurrent writers of one path
keep their temporary files."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import numpy.lib.format as npy_format
import pytest

from calbench.atomic import atomic_path
from calbench.cli.arrays import read_array
from calbench.data.importers import read_files


def _header_only(fp, shape, data_bytes=48):
    npy_format.write_array_header_1_0(fp, {"descr": "<f8", "fortran_order": False, "shape": shape})
    fp.write(b"\0" * data_bytes)


def test_an_npy_declaring_more_than_it_holds_is_refused_before_allocating(tmp_path):
    path = tmp_path / "logits.npy"
    with open(path, "wb") as fp:
        _header_only(fp, (2**40, 3))
    assert path.stat().st_size < 200
    with pytest.raises(ValueError, match=r"logits.npy: its header declares an array of 26,388,279,066,624 bytes, but "
                                         r"it holds 48 bytes"):
        read_array(path)
    np.save(tmp_path / "labels.npy", np.zeros(2**40 % 7, dtype=np.int64))
    with pytest.raises(ValueError, match=r"logits.npy: its header declares"):
        read_files("npy", {"logits": str(path), "labels": str(tmp_path / "labels.npy")}, "logits", "sources.s")


def test_an_npz_member_declaring_terabytes_is_refused_before_allocating(tmp_path):
    member = io.BytesIO()
    _header_only(member, (2**44,), 64)
    path = tmp_path / "scores.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("logits.npy", member.getvalue())
        archive.writestr("labels.npy", member.getvalue())
    for read in (lambda: read_array(path), lambda: read_files("npz", {"archive": str(path)}, "logits", "sources.s")):
        with pytest.raises(ValueError, match=r"scores.npz: member '(logits|labels).npy': its header declares an array "
                                             r"of 140,737,488,355,328 bytes"):
            read()


def test_a_pickle_of_shared_lists_is_refused_by_its_expanded_size(tmp_path):
    """12 KB in the reproduction; here 256 bytes: each list names the one below twice."""
    lists = [0.5, 0.5]
    for _ in range(34):
        lists = [lists, lists]
    path = tmp_path / "bomb.p"
    path.write_bytes(pickle.dumps(((lists, [0]), (lists, [0]))))
    with pytest.raises(ValueError, match=r"bomb.p: .*its lists expand to 68,719,476,738 entries, more than 16 per"):
        read_files("pickle", {"archive": str(path)}, "logits", "sources.s")


def test_a_csv_with_a_byte_order_mark_keeps_its_first_row_and_a_header_is_all_text(tmp_path, capsys):
    rows = np.arange(12.0).reshape(4, 3)
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + "\n".join(",".join(map(str, r)) for r in rows).encode())
    np.testing.assert_array_equal(read_array(tmp_path / "bom.csv"), rows)
    (tmp_path / "named.csv").write_text("\ufeffa,b,c\n" + "\n".join(",".join(map(str, r)) for r in rows))
    np.testing.assert_array_equal(read_array(tmp_path / "named.csv"), rows)
    assert "named.csv: first line read as column names, not a row: a,b,c" in capsys.readouterr().err
    (tmp_path / "mixed.csv").write_text("1.0,x,2.0\n" + "\n".join(",".join(map(str, r)) for r in rows))
    with pytest.raises(ValueError, match="mixed.csv: cannot read"):
        read_array(tmp_path / "mixed.csv")


@pytest.mark.workflow  # starts a process (the other writer)
def test_a_writer_keeps_the_temporary_file_of_another_live_writer(tmp_path):
    """Two writers of one path at once: neither removes the other's temporary file (a dead writer's is removed)."""
    target = tmp_path / "cal.safetensors"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = os.uname().nodename.replace(".", "_")
        live = tmp_path / f".cal.safetensors.{host}-{sleeper.pid}.abc.tmp"
        live.write_text("being written")
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        gone = tmp_path / f".cal.safetensors.{host}-{int(dead.stdout)}.def.tmp"
        gone.write_text("left by a killed writer")
        with atomic_path(target) as tmp:
            tmp.write_text("mine")
        assert live.exists() and not gone.exists() and target.read_text() == "mine"
    finally:
        sleeper.kill()
        sleeper.wait()
