"""The report's page (calbench.report.page): the decision per source from recommendation records (a method, or
"keep the model as is" where none beats uncal), its notes, the recommendations' figures one at a time in one place
(a source's name shows its figure), the tables' Markdown as HTML, and the out-of-date box."""

from __future__ import annotations

import re

from calbench.report.page import KEEP, NOTE_SHOWN, answer_html, chooser_html, decisions, markdown_html, page


def _record(source, method, estimate, low, high, tied, **extra):
    return {"source": source, "metric": "nll", "method": method, "estimate": estimate, "low": low, "high": high,
            "best": tied is None, "tied_with_best": tied, "p_value": None if tied is None else 0.01, "note": None,
            "acc_change": 0.0, "calibrator": f"results/calibrators/{source}/{method}/seed0.safetensors", **extra}


RECORDS = [
    _record("a", "ts", 0.61, 0.60, 0.63, None, acc_flag="lowers", acc_change=-0.021),
    _record("a", "vs", 0.62, 0.60, 0.64, True),
    _record("a", "uncal", 0.85, 0.83, 0.88, False),
    _record("b", "irm", 0.50, 0.48, 0.52, None),
    _record("b", "uncal", 0.51, 0.49, 0.53, True),
    _record("c", "uncal", 0.30, 0.29, 0.31, None),
    _record("c", "ts", 0.31, 0.30, 0.32, False),
]
WARNINGS = [{"source": "a", "method": "ts", "seed": "0", "stage": "calibrate", "category": "GridEdgeWarning",
             "message": "the best lambda is the last of the grid"},
            {"source": "a", "method": "ts", "seed": "1", "stage": "calibrate", "category": "GridEdgeWarning",
             "message": "the best lambda is the last of the grid"},
            {"source": "a", "method": "vs", "seed": "0", "stage": "calibrate", "category": "UserWarning",
             "message": "not about the recommendation"}]


def test_the_decision_is_the_best_method_unless_uncal_is_tied_with_it():
    a, b, c = decisions(RECORDS, "nll", WARNINGS)
    assert (a.method, a.keep, a.ties, a.value) == ("ts", False, ["vs"], "0.610 [0.600, 0.630]")
    assert a.calibrator == "results/calibrators/a/ts/seed0.safetensors"
    assert any("lowers accuracy by 2.1 points" in note for note in a.notes)
    # the recommended method's warning, once over the seeds; not the other method's
    assert [n for n in a.notes if n.startswith("warning")] == [
        "warning (ts, seed 0): the best lambda is the last of the grid"]
    assert (b.method, b.keep, b.best, b.calibrator) == ("uncal", True, "irm", None)  # irm does not beat uncal
    assert any("no method beats uncal" in note for note in b.notes)
    assert (c.method, c.keep, c.notes, c.runner_up) == ("uncal", True, [], "ts")  # ts: beside uncal in the figure


def test_the_answer_is_one_row_per_source_with_its_notes_beneath_long_ones_opening_in_place():
    html = answer_html(decisions(RECORDS, "nll", WARNINGS), "nll", "lower")
    assert html.count("<tbody class='decision'") == 3 and html.count(KEEP) == 2
    assert "results/calibrators/a/ts/seed0.safetensors" in html
    notes = re.findall(r"<tr class='notes'><td colspan='5'><ul>(.*?)</ul></td></tr>", html)
    assert len(notes) == 2  # a (accuracy, warning) and b (no method beats uncal); c has none
    # the accuracy note (190 characters) shows its first 160 and opens for the rest; the text is whole in the page
    summary, rest = re.search(r"<details><summary>(.*?) …</summary><span class='rest'>… (.*?)</span>",
                              notes[0]).groups()
    assert len(html_text(summary)) <= NOTE_SHOWN and summary.startswith("ts lowers accuracy by 2.1 points")
    assert html_text(summary + " " + rest) == decisions(RECORDS, "nll", WARNINGS)[0].notes[0]
    assert "<li class='note'>warning (ts, seed 0): the best lambda is the last of the grid</li>" in notes[0]  # short


def html_text(fragment: str) -> str:
    import html

    return html.unescape(fragment)


def test_the_tables_markdown_becomes_html_with_bold_lists_and_tables():
    text = ("### nll (lower is better)\n\n| source | uncal | ts |\n|---|---|---|\n| tiny | 0.85 ± 0.01 | **0.64 ± "
            "0.02** |\n\nNoise floors:\n- ece.conf.em15.l1: 1.2\n- ece.cw.em15.l1: 0.8\nFloored outputs:\n"
            "- irm: 1e-12\n")
    html = markdown_html(text)
    assert "**" not in html and "<strong>0.64 ± 0.02</strong>" in html
    assert html.count("<ul>") == 2 and html.count("<li>") == 3
    assert "<div class='wide'><table>" in html and "<h4>nll (lower is better)</h4>" in html


def test_each_source_name_shows_its_figure_in_one_place_the_first_when_the_page_opens():
    figures = [("a", "data:image/png;base64,AAAA", "a: confidence reliability"),
               ("c", "data:image/png;base64,BBBB", "c: confidence reliability")]
    answer = answer_html(decisions(RECORDS, "nll", WARNINGS), "nll", "lower", with_figures=["a", "c"])
    assert "<label class='pick' for='figure-0' title='show its reliability figure'>a</label>" in answer
    assert "<label class='pick' for='figure-1' title='show its reliability figure'>c</label>" in answer
    assert "<td class='method'>b</td>" in answer  # no figure, no switch
    chooser = chooser_html(figures)
    assert re.findall(r"<input type='radio' name='figure' id='(figure-\d)'( checked)?>", chooser) == [
        ("figure-0", " checked"), ("figure-1", "")]
    assert "#figure-1:checked ~ #figure-1-shown { display: contents; }" in chooser
    assert re.findall(r"<figure class='recommended' id='(figure-\d)-shown' data-source='(\w)'><img src='([^']+)'",
                      chooser) == [("figure-0", "a", figures[0][1]), ("figure-1", "c", figures[1][1])]
    assert chooser_html([]) == ""


def test_an_out_of_date_run_is_said_in_a_red_box_above_the_answer():
    html = page(title="calbench report: my.yaml", sources=["a", "b"], facts=["seeds: 0, 1"],
                details=["methods: uncal, ts"], stale="Out of date: 3 jobs would rerun",
                answer="<table id='answer'></table>", chooser="<section id='recommended'></section>", warnings="",
                tables=[("summary.md", "| a |\n|---|\n| 1 |\n")], figures=[("figures/x.png", "x")])
    assert re.search(r"<div class='stale' id='stale'>Out of date: 3 jobs would rerun</div>\s*<h2 id='the-answer'>",
                     html)
    assert re.search(r"<table id='answer'></table>\s*<section id='recommended'>", html)  # the figure under it
    assert "sources: <b>a, b</b>" in html and "<img src='figures/x.png'" in html
    assert "<li>methods: uncal, ts</li>" in html
