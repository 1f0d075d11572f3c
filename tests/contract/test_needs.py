"""What a method reads (``needs``) is listed once, :data:`calbench.methods.base.NEEDS`: every registered method's
``needs`` is drawn from it, every value is read by some method, and a doc line that lists values of ``needs``
lists them all or points to that list."""

from __future__ import annotations

import pytest

from calbench.config import source_has_embeddings, source_has_train
from calbench.methods import available, method_class
from calbench.methods.base import NEEDS
from conftest import REPO


@pytest.mark.parametrize("name", available())
def test_every_registered_method_needs_only_listed_values(name):
    assert method_class(name).needs <= NEEDS.keys(), name


def test_every_listed_value_is_needed_by_some_method():
    assert set().union(*(method_class(name).needs for name in available())) == NEEDS.keys()


def test_every_value_beyond_the_logits_decides_where_a_method_runs():
    """calbench.config.method_runs_on reads each value: a method needing it does not run on a source without it."""
    from calbench.config import method_runs_on

    needing = {need: next(n for n in available() if need in method_class(n).needs) for need in NEEDS}
    logits_only = {"type": "synthetic", "task": "planted_temperature"}
    assert not source_has_embeddings(logits_only) and not source_has_train(logits_only)
    for need, name in needing.items():
        if need != "logits":
            assert not method_runs_on(name, logits_only), (need, name)


def test_doc_lines_listing_needs_list_them_all_or_point_to_the_list():
    for path in [REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            named = [need for need in NEEDS if f"`{need}`" in line]
            if "`needs`" in line and len(named) > 1:
                assert "NEEDS" in line or len(named) == len(NEEDS), f"{path.name}:{number}: {line}"
