"""The HTML report of a finished run (``calbench report``, docs/figures_and_studies.md): the decision first.

The first screen (1,400 × 900) holds the title, the config's sources and, per source, the recommendation (the best
method by the ranking metric with its interval, the methods tied with it, its change of accuracy, the warnings of
its jobs and the path of its saved calibrator, or "keep the model as is" where no method beats ``uncal``), one row
each with its notes beneath (a long note shows its start and opens in place); beneath them the reliability figure
of one source's recommendation, 900 px wide: the first source's when the page opens, any other's one click away in
the same place (its tab beside the figure, or its name in the answer), so that every source's figure is read
without scrolling (four such figures do not fit one screen). Then
the run's details and warnings, its tables (their Markdown rendered) and its figures (linked, not embedded, so that
the page stays small). Everything here is plain data in, HTML out: the command (:mod:`calbench.cli.report`)
gathers the recommendation records, the warnings and the config's own output paths.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

#: What the report says where no method beats the uncalibrated model.
KEEP = "keep the model as is"
REFERENCE = "uncal"

STYLE = """
body { font: 15px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 10px 24px; color: #1a1a1a; }
h1 { font-size: 22px; margin: 0 0 2px; } h2 { font-size: 19px; margin: 16px 0 4px; } #the-answer { margin-top: 8px; }
h3 { font-size: 17px; margin: 16px 0 4px; } h4 { font-size: 15px; margin: 12px 0 4px; }
p { margin: 4px 0; } .meta { color: #555; font-size: 13px; }
.stale { background: #fde2e1; border: 2px solid #c0392b; padding: 6px 10px; margin: 8px 0; font-weight: 600; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 10px; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.num, td, th { white-space: nowrap; }
table.answer { margin: 2px 0 4px; } table.answer th, table.answer td { padding: 2px 8px; }
table.answer td { white-space: normal; line-height: 1.3; }
table.answer td.num, table.answer td.method { white-space: nowrap; }
table.answer tr.notes td { font-size: 13px; line-height: 1.3; padding-top: 0; }
table.answer tr:has(+ tr.notes) td { border-bottom: 0; }
table.answer ul { margin: 0; padding-left: 16px; } table.answer summary { cursor: pointer; }
.method { font-weight: 700; font-size: 16px; }
.keep { color: #555; }
.note { color: #8a4b00; } .path { font-family: ui-monospace, monospace; font-size: 13px; word-break: break-all; }
.wide { overflow-x: auto; }
figure { margin: 8px 0 16px; } figure img { width: 1000px; max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 13px; }
ul { margin: 4px 0 8px; padding-left: 22px; }
label.pick { cursor: pointer; color: #0645ad; text-decoration: underline dotted; }
.chooser { display: grid; grid-template-columns: minmax(0, 900px) minmax(200px, 1fr); grid-template-rows: auto 1fr;
  column-gap: 16px; align-items: start; margin: 2px 0 12px; }
.chooser > input { position: absolute; opacity: 0; pointer-events: none; }
.chooser .tabs { grid-column: 2; grid-row: 1; font-size: 14px; }
.tabs label { display: inline-block; padding: 2px 10px; margin: 4px 4px 0 0; border: 1px solid #bbb;
  border-radius: 4px; cursor: pointer; background: #f7f7f7; }
.chooser figure.recommended { display: none; }
.chooser figure.recommended img { grid-column: 1; grid-row: 1 / span 2; width: 100%; max-height: 560px;
  object-fit: contain; object-position: left top; }
.chooser figure.recommended figcaption { grid-column: 2; grid-row: 2; margin-top: 12px; }
"""


@dataclass
class Decision:
    """One source's recommendation: ``method`` to deploy (``uncal`` with ``keep`` where no method beats it), the best
    method by the metric, its value and interval as the tables show them, the methods tied with the best, notes (the
    accuracy change, the interval's absence, the warnings of its jobs), the saved calibrator's path and the method
    ranked second (``runner_up``; None where only one method ran)."""

    source: str
    method: str
    keep: bool
    best: str
    value: str
    ties: list[str]
    notes: list[str] = field(default_factory=list)
    calibrator: str | None = None
    runner_up: str | None = None


def shown(value, scale: float, decimals: int) -> str:
    """``value`` as the tables show it (e.g. ECE ×100 with the table's decimals); ``n/a`` without one."""
    if value is None or value != value:
        return "n/a"
    return f"{value * scale:.{decimals}f}"


def decisions(records: list[dict], metric: str, warnings: list[dict] = ()) -> list[Decision]:
    """The decision per source from recommendation records (``calbench recommend --json``: per source, the
    metric's methods best first, each with ``estimate``, ``low``, ``high``, ``tied_with_best``, ``note``,
    ``acc_change``, ``calibrator`` and, on the best, ``acc_flag``) and the run's warnings (rows with ``source``,
    ``method``, ``message``): the recommended method's warnings become notes."""
    from calbench.metrics import lookup

    family, _ = lookup(metric)
    out = []
    for source in dict.fromkeys(r["source"] for r in records if r["metric"] == metric):
        ranked = [r for r in records if r["metric"] == metric and r["source"] == source]
        best = ranked[0]
        reference = next((r for r in ranked if r["method"] == REFERENCE), None)
        keep = reference is not None and (reference is best or bool(reference["tied_with_best"]))
        chosen = reference if keep else best
        interval = (f" [{shown(best['low'], family.scale, family.decimals)}, "
                    f"{shown(best['high'], family.scale, family.decimals)}]" if best["low"] is not None else "")
        notes = []
        if best["low"] is None and best.get("note"):
            notes.append(f"no interval: {best['note']}")
        if keep and best is not reference:
            notes.append(f"no method beats {REFERENCE}: a paired test cannot tell it from the best, {best['method']}")
        if not keep and best.get("acc_flag"):
            notes.append(f"{best['method']} {best['acc_flag']} accuracy by {100 * abs(best['acc_change']):.1f} "
                         f"points, beyond the interval of {REFERENCE}'s accuracy: it changes the classifier's "
                         "decisions, not only its probabilities; check that this is wanted before deploying it")
        notes += [f"warning ({w['method']}, seed {w['seed']}): {w['message']}" if w.get("seed") not in (None, "")
                  else f"warning ({w['method']}): {w['message']}"
                  for w in _distinct(warnings) if w.get("source") == source and w.get("method") == chosen["method"]]
        out.append(Decision(
            source=source, method=chosen["method"], keep=keep, best=best["method"],
            value=shown(best["estimate"], family.scale, family.decimals) + interval,
            ties=[r["method"] for r in ranked[1:] if r["tied_with_best"]], notes=notes,
            calibrator=None if keep else best.get("calibrator"),
            runner_up=ranked[1]["method"] if len(ranked) > 1 else None))
    return out


def _distinct(warnings) -> list[dict]:
    """The warnings without repeats of the same (source, method, message) over seeds (the first seed's row)."""
    seen, out = set(), []
    for w in warnings:
        key = (w.get("source"), w.get("method"), w.get("message"))
        if key not in seen:
            seen.add(key)
            out.append(w)
    return out


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _slot(i: int) -> str:
    """The id of the ``i``-th recommendation figure's switch (a radio input) in the page."""
    return f"figure-{i}"


#: The characters of a note the first screen shows; a longer note shows them and opens in place for the rest.
NOTE_SHOWN = 160


def note_html(note: str) -> str:
    """A note in full where it is short, else its first :data:`NOTE_SHOWN` characters (cut at a word) as the summary
    of a ``<details>`` that holds the rest, so that no note takes more than one line of the first screen."""
    if len(note) <= NOTE_SHOWN:
        return f"<li class='note'>{_e(note)}</li>"
    cut = note.rfind(" ", 0, NOTE_SHOWN)
    cut = cut if cut > NOTE_SHOWN // 2 else NOTE_SHOWN
    return (f"<li class='note'><details><summary>{_e(note[:cut])} …</summary>"
            f"<span class='rest'>… {_e(note[cut:].lstrip())}</span></details></li>")


def answer_html(rows: list[Decision], metric: str, direction: str, with_figures: list[str] = ()) -> str:
    """The answer: per source a row (the recommendation, its value and interval, the methods tied with it, the saved
    calibrator) and, where it has notes, a line for each beneath it, across the table (:func:`note_html`); the
    name of a source in ``with_figures`` (the sources of :func:`chooser_html`, in its order) shows its figure when
    clicked."""
    head = (f"<p class='meta'>Per source, the calibrator to deploy, ranked by <b>{_e(metric)}</b> ({_e(direction)} is "
            "better; values as in the tables, [95 % paired-bootstrap interval]; tied: a paired test cannot tell it "
            "from the best, Holm α = 0.05); beneath a source, its notes.</p>")
    lines = ["<table class='answer' id='answer'><thead><tr><th>source</th><th>recommendation</th>"
             f"<th>{_e(metric)} of the best</th><th>tied with the best</th><th>saved calibrator</th></tr></thead>"]
    shown = list(with_figures)
    for d in rows:
        what = (f"<span class='method keep'>{KEEP}</span>" if d.keep else f"<span class='method'>{_e(d.method)}</span>")
        name = (f"<label class='pick' for='{_slot(shown.index(d.source))}' title='show its reliability figure'>"
                f"{_e(d.source)}</label>" if d.source in shown else _e(d.source))
        notes = ("<tr class='notes'><td colspan='5'><ul>" + "".join(map(note_html, d.notes)) + "</ul></td></tr>"
                 if d.notes else "")
        lines.append(
            f"<tbody class='decision' data-source='{_e(d.source)}'><tr><td class='method'>{name}</td>"
            f"<td class='recommendation method'>{what}</td>"
            f"<td class='num'>{_e(d.best)} {_e(d.value)}</td><td>{_e(', '.join(d.ties) or 'none')}</td>"
            f"<td class='path'>{_e(d.calibrator) if d.calibrator else '–'}</td></tr>{notes}</tbody>")
    return head + "\n".join(lines) + "</table>"


def chooser_html(figures: list[tuple[str, str, str]]) -> str:
    """The recommendations' reliability figures ``(source, src, caption)`` in one place: the first shown, each
    other one click away (its tab, or its source's name in the answer), without script: a radio input per figure
    and a CSS rule that shows the figure of the checked one. The tabs and the caption stand to the right of the
    figure, in the width its 900 px leave on a 1,400 px window."""
    if not figures:
        return ""
    inputs = "".join(f"<input type='radio' name='figure' id='{_slot(i)}'{' checked' if i == 0 else ''}>"
                     for i in range(len(figures)))
    tabs = "".join(f"<label for='{_slot(i)}' data-source='{_e(source)}'>{_e(source)}</label>"
                   for i, (source, _, _) in enumerate(figures)) if len(figures) > 1 else _e(figures[0][0])
    rules = "".join(f"#{_slot(i)}:checked ~ #{_slot(i)}-shown {{ display: contents; }} "
                    f"#{_slot(i)}:checked ~ .tabs label[for={_slot(i)}] {{ background: #1a5fb4; color: white; "
                    "border-color: #1a5fb4; }\n" for i in range(len(figures)))
    shown = "".join(f"<figure class='recommended' id='{_slot(i)}-shown' data-source='{_e(source)}'>"
                    f"<img src='{_e(src)}' alt='{_e(caption)}'><figcaption>{_e(caption)}</figcaption></figure>"
                    for i, (source, src, caption) in enumerate(figures))
    where = "" if len(figures) == 1 else " (one source at a time: choose another here or click its name above)"
    return (f"<style>{rules}</style><section class='chooser' id='recommended'>{inputs}"
            f"<div class='tabs'><b>Reliability of the recommendation</b>{_e(where)}:<br>{tabs}</div>{shown}</section>")


def warnings_html(warnings: list[dict]) -> str:
    """The run's warnings, each distinct message once with the jobs it came from."""
    if not warnings:
        return ""
    groups: dict[tuple, list[dict]] = {}
    for w in warnings:
        groups.setdefault((w.get("category", ""), w.get("message", "")), []).append(w)
    items = []
    for (category, message), rows in groups.items():
        where = sorted({f"{r.get('source')}/{r.get('method')}" for r in rows})
        shown_where = ", ".join(where[:6]) + (f" and {len(where) - 6} more" if len(where) > 6 else "")
        items.append(f"<li><b>{_e(category)}</b>: {_e(message)} <span class='meta'>({_e(shown_where)})</span></li>")
    return (f"<h2 id='warnings'>Warnings of the run</h2><p class='meta'>{len(warnings)} warnings in the jobs' logs, "
            f"{len(groups)} distinct (results/tables/warnings.csv):</p><ul>" + "".join(items) + "</ul>")


def markdown_html(text: str) -> str:
    """The tables' Markdown as HTML (pipe tables, bold, lists), each table in a box that scrolls sideways rather
    than wrapping its numbers."""
    import markdown

    body = markdown.markdown(_lists_apart(text), extensions=["tables"])
    body = re.sub(r"<(/?)h[1-6]>", r"<\1h4>", body)  # a table's headings sit beneath the page's own
    return body.replace("<table>", "<div class='wide'><table>").replace("</table>", "</table></div>")


def _lists_apart(text: str) -> str:
    """A blank line wherever a list starts or ends next to a paragraph line (Markdown would otherwise run a list into
    the paragraph before it, or the line after a list into its last item; the tables' notes leave none)."""
    out = []
    for line in text.splitlines():
        item = line.startswith(("- ", "* "))
        if out and out[-1].strip() and item != out[-1].startswith(("- ", "* ")) and not line.startswith(" "):
            out.append("")
        out.append(line)
    return "\n".join(out) + "\n"


def figure_html(src: str, caption: str) -> str:
    return (f"<figure><img src='{_e(src)}' alt='{_e(caption)}' loading='lazy'>"
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def page(*, title: str, sources: list[str], facts: list[str], details: list[str], stale: str | None, answer: str,
         chooser: str, warnings: str, tables: list[tuple[str, str]], figures: list[tuple[str, str]]) -> str:
    """The whole page: ``answer`` (:func:`answer_html`) and ``chooser`` (:func:`chooser_html`) on the first screen,
    under the title, the sources with the short ``facts`` and, where the results are out of date, ``stale`` in a
    red box; then the run's ``details``, the warnings, ``tables`` (``(name, Markdown)``) and ``figures``
    (``(src, caption)``)."""
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>",
             f"<p class='meta'>sources: <b>{_e(', '.join(sources))}</b> · " + " · ".join(map(_e, facts)) + "</p>"]
    if stale:
        parts.append(f"<div class='stale' id='stale'>{_e(stale)}</div>")
    parts += ["<h2 id='the-answer'>The answer</h2>", answer, chooser]
    if details:
        parts.append("<h2 id='the-run'>The run</h2><ul>" + "".join(f"<li>{_e(d)}</li>" for d in details) + "</ul>")
    parts.append(warnings)
    if tables:
        parts.append("<h2 id='tables'>Tables</h2>")
        parts += [f"<h3>{_e(name)}</h3>" + markdown_html(text) for name, text in tables]
    if figures:
        parts.append("<h2 id='figures'>Figures</h2>")
        parts += [figure_html(src, caption) for src, caption in figures]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
