"""The measured tables of the docs are what scripts/docs_blocks.py writes from the records of docs/measurements/
(the measurements are not repeated here), every record is shown and says how it was measured, and the block
mechanism that every docs generator shares (calbench.perf.docs_blocks) replaces only the blocks it is given."""

from __future__ import annotations

import json

import pytest

from calbench.perf.docs_blocks import block_names, replace_blocks, write_or_check
from conftest import REPO, load_script

docs_blocks = load_script("docs_blocks")
code_blocks = load_script("code_blocks")  # a page may also hold blocks of code_blocks (README.md's recommend-json)


def test_committed_blocks_are_the_generated_ones():
    stale = [str(path.relative_to(REPO)) for path, text in docs_blocks.pages().items() if path.read_text() != text]
    assert not stale, f"generated blocks out of date in {', '.join(stale)}: run python scripts/docs_blocks.py"


def test_every_block_of_those_pages_is_registered():
    """A block left in a page without a renderer would never be updated again."""
    for page in {b.page for b in docs_blocks.BLOCKS.values()}:
        unknown = set(block_names((REPO / page).read_text())) - set(docs_blocks.BLOCKS) - set(
            code_blocks.BLOCKS.get(page, {}))
        assert not unknown, f"{page}: generated blocks {sorted(unknown)} have no entry in scripts/docs_blocks.py BLOCKS"


def test_every_record_is_shown_and_says_how_it_was_measured():
    shown = {name for block in docs_blocks.BLOCKS.values() for name in block.records}
    files = {path.stem for path in docs_blocks.RECORDS.glob("*.json")}
    assert files == shown, f"records not shown: {sorted(files - shown)}; missing: {sorted(shown - files)}"
    for name in files:
        record = docs_blocks.load(name)  # raises naming the file and the missing field
        assert record["benchmarks"], name
        assert all("name" in e for e in record["benchmarks"]), name


def test_a_record_without_its_provenance_is_refused(tmp_path, monkeypatch):
    (tmp_path / "bad.json").write_text(json.dumps({"command": "x", "benchmarks": []}))
    monkeypatch.setattr(docs_blocks, "RECORDS", tmp_path)
    monkeypatch.setattr(docs_blocks, "REPO", tmp_path)
    with pytest.raises(ValueError, match=r"bad\.json: no field 'commit'"):
        docs_blocks.load("bad")


def test_numbers_show_no_more_digits_than_recorded():
    assert docs_blocks.number(0.8, 2) == "0.8"
    assert docs_blocks.number(0.611, 2) == "0.61"
    assert docs_blocks.number(1128, 1) == "1,128"
    assert docs_blocks.number(None) == "" and docs_blocks.number("35–53") == "35–53"


PAGE = """# Page
prose
<!-- begin generated: a -->
old a
<!-- end generated -->
middle
<!-- begin generated: b -->
old b
<!-- end generated -->
"""


def test_replace_blocks_replaces_only_the_named_blocks(tmp_path):
    assert block_names(PAGE) == ["a", "b"]
    new = replace_blocks(tmp_path / "p.md", PAGE, {"b": "new b\n| x |"})
    assert new == PAGE.replace("old b", "new b\n| x |")
    assert replace_blocks(tmp_path / "p.md", new, {"b": "old b"}) == PAGE
    with pytest.raises(ValueError, match=r"p\.md: no generated block named c"):
        replace_blocks(tmp_path / "p.md", PAGE, {"c": "text"})


def test_write_or_check_writes_or_reports(tmp_path, capsys):
    page = tmp_path / "p.md"
    page.write_text("old\n")
    assert write_or_check(page, "new\n", check=True, fix="make it") == 1
    assert page.read_text() == "old\n" and "p.md: generated text out of date; run make it" in capsys.readouterr().err
    assert write_or_check(page, "new\n", check=False, fix="make it") == 0
    assert page.read_text() == "new\n"
    assert write_or_check(page, "new\n", check=True, fix="make it") == 0


def test_only_selects_names_containing_a_text_or_a_full_name_alone():
    from calbench.perf.__main__ import selected

    names = ["scale_param_1000.ts", "scale_param_1000.ts+vs", "scale_param_1000.vs", "scale_metric.nll"]
    assert selected(names, "") == set(names)
    assert selected(names, "scale_param_1000.ts") == {"scale_param_1000.ts"}
    assert selected(names, "scale_param_1000.,scale_metric.nll") == set(names)
    assert selected(names, "ts+,nll") == {"scale_param_1000.ts+vs", "scale_metric.nll"}


def test_a_benchmark_run_records_how_where_and_when(tmp_path):
    """What ``python -m calbench.perf --out`` writes is a record that scripts/docs_blocks.py reads."""
    from calbench.perf.__main__ import main

    out = tmp_path / "core.json"
    assert main(["--only", "ts.fit", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["command"] == "python -m calbench.perf --only ts.fit"
    assert {"commit", "machine", "date", "load_average"} <= set(record) and record["commit"]
    assert [e["name"] for e in record["benchmarks"]] == ["ts.fit"] and record["benchmarks"][0]["seconds"] > 0
