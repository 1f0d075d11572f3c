"""calbench's ACE, MMCE, calibration tests, calibration/refinement split and risk-coverage curve equal netcal's,
MAPIE's, probmetrics' and torch-uncertainty's on the CIFAR logits of ../shared/data, uncalibrated and after TS
(:mod:`calbench.perf.peers_metrics`, whose tolerances say why each is not 0). The peers are pyproject's `reference`
extra: where one is not importable the test skips, naming it, or fails under .ci/run (``conftest.reference``)."""

import pytest

from calbench.perf.peers_metrics import NETWORKS, PEERS, compare
from conftest import reference_missing, shared_data


@pytest.mark.peers
@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("peer", sorted(PEERS))
def test_metrics_equal_the_peer_library(peer, network):
    shared_data("logits", network)
    record = compare(peer, network)
    if "absent" in record:
        reference_missing(record["absent"])
    worst = max(record["values"].items(), key=lambda item: abs(item[1][0] - item[1][1]))
    assert record["max_abs_diff"] <= record["tolerance"], worst
