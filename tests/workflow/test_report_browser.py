"""A run from the user's own folder as a new user makes it: the console of the default profile (one short line per
finished job with the time left), then ``calbench report`` and the report in real headless Chromium (loads without
errors, every embedded image decodes, the first page shows the answer, a few MB)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from browser import chromium, load_page
from conftest import REPO, SNAKEMAKE
from workflow_helpers import tiny_config

pytestmark = [pytest.mark.workflow, pytest.mark.xdist_group("report_browser")]


@pytest.fixture(scope="module")
def own_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("my_experiment")
    config = tiny_config(seeds=(0, 1))
    del config["figures"]  # as a new user writes it: the default figures
    (folder / "my.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    run = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--cores", "2", "--configfile", "my.yaml"],
                         cwd=folder, capture_output=True, text=True, timeout=900, env={**os.environ})
    assert run.returncode == 0, run.stderr[-4000:]
    return folder, run.stdout + run.stderr


def test_the_console_prints_a_short_line_per_job_with_the_time_left(own_folder):
    _, console = own_folder
    lines = console.splitlines()
    assert max(map(len, lines)) <= 1000
    progress = [line for line in lines if line.startswith("[") and " done in " in line]
    assert len(progress) >= 10 and any("left" in line for line in progress)
    assert not any(line.strip().startswith("input:") for line in lines)  # no job headers listing code files


def test_the_report_from_the_own_folder_renders_in_headless_chromium(own_folder):
    folder, _ = own_folder
    if chromium() is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/chromium-setup.sh): the report "
                    "is not checked in a browser")
    made = subprocess.run([sys.executable, "-m", "calbench", "report", "my.yaml"], cwd=folder, capture_output=True,
                          text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-4000:]
    html = folder / "results" / "report.html"
    assert html.stat().st_size < 8e6
    assert "The answer" in html.read_text() and "Key figures" in html.read_text()
    page = load_page(html)
    assert page["errors"] == []
    assert page["embedded"] >= 3 and page["decoded"] == page["embedded"]  # the key figure and both diagrams
    assert all(complete and width > 0 for complete, width in page["shown"])
