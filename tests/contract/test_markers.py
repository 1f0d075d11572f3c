"""The guard of tests/conftest.py that keeps ``make test-fast`` fast: a test that starts snakemake or a browser, or
compares with a peer library, without its marker fails before anything starts, naming the marker. (The guard is
called here on a stand-in for ``subprocess.Popen.__init__``: nothing starts.)"""

import json

import pytest

import conftest
from conftest import SNAKEMAKE, reference


def _start(args, **options):
    """What ``subprocess.Popen(args, **options)`` does under the guard, with a stand-in that starts nothing."""
    started = []
    conftest.guarded_popen(lambda self, args, *rest, **options: started.append(args))(None, args, **options)
    return started


def test_starting_snakemake_without_the_workflow_marker_fails_before_it_starts():
    for args in ([SNAKEMAKE, "--version"], f"{SNAKEMAKE} --version", ["python", "-m", "snakemake"]):
        with pytest.raises(pytest.fail.Exception, match=r"starts snakemake: mark it @pytest.mark.workflow"):
            _start(args)


def test_starting_a_browser_without_the_browser_marker_fails():
    with pytest.raises(pytest.fail.Exception, match=r"starts chromium: mark it @pytest.mark.browser"):
        _start(["/usr/bin/chromium", "--headless"])


def test_other_processes_start():
    assert _start(["git", "status"]) == [["git", "status"]]


def test_a_peer_comparison_without_the_peers_marker_fails():
    with pytest.raises(pytest.fail.Exception, match=r"compares with netcal: mark it @pytest.mark.peers"):
        reference("netcal.binning", "netcal")


@pytest.mark.peers
def test_a_marked_test_reaches_the_peer_library():
    assert reference("json", "json") is json
