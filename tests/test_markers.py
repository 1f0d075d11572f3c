"""The guard of tests/conftest.py that keeps ``make test-fast`` fast: a test that starts snakemake or a browser, or
compares with a peer library, without its marker fails before anything starts, naming the marker."""

import json
import subprocess

import pytest

from conftest import SNAKEMAKE, reference


def test_starting_snakemake_without_the_workflow_marker_fails_before_it_starts():
    with pytest.raises(pytest.fail.Exception, match=r"starts snakemake: mark it @pytest.mark.workflow"):
        subprocess.run([SNAKEMAKE, "--version"], capture_output=True)
    with pytest.raises(pytest.fail.Exception, match=r"mark it @pytest.mark.workflow"):
        subprocess.run(f"{SNAKEMAKE} --version", shell=True, capture_output=True)


def test_starting_a_browser_without_the_browser_marker_fails():
    with pytest.raises(pytest.fail.Exception, match=r"starts chromium: mark it @pytest.mark.browser"):
        subprocess.run(["chromium", "--version"], capture_output=True)


def test_a_peer_comparison_without_the_peers_marker_fails():
    with pytest.raises(pytest.fail.Exception, match=r"compares with netcal: mark it @pytest.mark.peers"):
        reference("netcal.binning", "netcal")


@pytest.mark.peers
def test_a_marked_test_reaches_the_peer_library():
    assert reference("json", "json") is json
