"""Every listing of the command line names every registered item, run as a user runs it: in a fresh process, where
nothing has filled a lazily filled registry before the listing reads it."""

import subprocess
import sys

import pytest


def _registered_methods() -> set[str]:
    from calbench.methods import available

    return set(available())


def _registered_metrics() -> set[str]:
    from calbench.metrics import definitions  # noqa: F401  (registers every metric id)
    from calbench.metrics.registry import described_ids

    return {usage.split()[0] for usage, _, _ in described_ids()}  # "ece.{conf|cw}...   e.g. ece.conf.ew15.l1"


#: Each listing subcommand and the registry it lists.
LISTINGS = {"methods": _registered_methods, "metrics": _registered_metrics}


@pytest.mark.workflow
@pytest.mark.parametrize("listing", sorted(LISTINGS))
def test_a_listing_names_every_registered_item_in_a_fresh_process(listing):
    run = subprocess.run([sys.executable, "-m", "calbench", listing], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    listed = {line.split()[0] for line in run.stdout.splitlines() if line.strip() and not line.startswith(" ")}
    registered = LISTINGS[listing]()
    assert registered, f"nothing is registered for {listing}"
    assert listed == registered, f"calbench {listing}: missing {sorted(registered - listed)}, " \
                                 f"unknown {sorted(listed - registered)}"
