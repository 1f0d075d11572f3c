"""``calbench methods``: the calibration methods in plain text (``--verbose``: settings, input, cost)."""

from __future__ import annotations

import inspect
import textwrap
import warnings

import numpy as np


def add_parser(sub) -> None:
    methods = sub.add_parser("methods", help="list calibration methods (--verbose: settings, input, cost)")
    methods.add_argument("-v", "--verbose", action="store_true")
    methods.add_argument("--json", action="store_true", help="print the list as JSON (with --verbose: every fact)")
    methods.set_defaults(handler=run)


def _plain(text: str) -> str:
    """Docstring text without Sphinx/reST markup (roles, double backquotes)."""
    import re

    text = re.sub(r":[a-z]+:`~?([^`]+)`", lambda m: m.group(1).rsplit(".", 1)[-1], text)
    return text.replace("``", "")


def method_facts(name: str) -> dict:
    """What ``calbench methods --verbose`` shows about one method."""
    from calbench.methods import method_class

    cls = method_class(name)
    signature = inspect.signature(cls.__init__) if cls.__init__ is not object.__init__ else None
    settings = {p.name: p.default for p in (signature.parameters.values() if signature else ())
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    inputs = " + ".join(sorted(set(cls.needs) - {"train"})) + (" (+ the classifier's training split)"
                                                                 if "train" in cls.needs else "")
    if "train" in cls.needs:
        cost = "trains a projection network on the training split (torch; minutes)"
    elif cls.default_grid is not None:
        from calbench.methods.tuning import GridSearch

        folds = inspect.signature(GridSearch).parameters["folds"].default  # the search's own default
        cv = {"folds": folds, **cls.default_cv}
        cost = f"tuned by {cv['folds']}-fold cross-validated grid search (seconds to minutes)"
    else:
        cost = "one fit (well under a second to seconds)"
    return {"summary": summary(cls), "settings": settings, "input": inputs,
            "keeps_argmax": bool(cls.preserves_argmax), "cost": cost, "grid": cls.default_grid}


def summary(cls) -> str:
    """The first sentence of a class docstring's first paragraph, as plain text: a sentence ends at a full stop
    followed by a capital letter outside parentheses ("(Alg. 1). Fitted: ..." ends after "(Alg. 1).")."""
    import re

    paragraph = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
    for end in re.finditer(r"\.(?=\s+[A-Z(])", paragraph):
        if paragraph.count("(", 0, end.start()) == paragraph.count(")", 0, end.start()):
            return _plain(paragraph[:end.end()])
    return _plain(paragraph)


def exports_to_torch(name: str) -> bool | None:
    """Whether ``calbench.torch`` turns a fitted ``name`` into a torch module (None without torch): the exporter
    is asked about an instance fitted on a few rows, so the answer is the exporter's own."""
    from calbench.methods import make, method_class

    try:
        from calbench.torch import calibration_module
    except ImportError:
        return None
    cls = method_class(name)
    if {"train", "embeddings"} & set(cls.needs):
        return False
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(60, 3)) * 2, np.arange(60) % 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = make(name, **({"grid": None} if cls.default_grid is not None else {})).fit(logits, labels)
    try:
        calibration_module(cal)
    except ValueError:
        return False
    return True


def as_json(name: str, verbose: bool) -> dict:
    """One method as ``calbench methods --json`` prints it (settings' defaults and a grid function as text)."""
    facts = method_facts(name)
    record = {"name": name, "summary": facts["summary"]}
    if verbose:
        grid = facts["grid"]
        record |= {"settings": {k: v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)
                                for k, v in facts["settings"].items()},
                   "grid": "a function of the number of classes" if callable(grid) else grid, "input": facts["input"],
                   "keeps_argmax": facts["keeps_argmax"], "cost": facts["cost"],
                   "exports_to_torch": exports_to_torch(name)}
    return record


def run(args) -> int:
    import json

    from calbench.methods import available

    if args.json:
        print(json.dumps([as_json(name, args.verbose) for name in available()], indent=1))
        return 0
    for name in available():
        facts = method_facts(name)
        print(textwrap.fill(facts["summary"], width=110, initial_indent=f"{name:14s} ", subsequent_indent=" " * 15,
                            break_on_hyphens=False))
        if not args.verbose:
            continue
        settings = ", ".join(f"{k}={v!r}" for k, v in facts["settings"].items()) or "none"
        grid = facts["grid"]
        grid_text = ("none" if grid is None else "a function of the number of classes" if callable(grid)
                     else ", ".join(f"{k} in {v}" for k, v in grid.items()))
        torch_export = {True: "yes (calbench.torch.calibrated)", False: "no (apply with predict_proba or "
                        "calbench apply)", None: "unknown: torch is not installed"}[exports_to_torch(name)]
        for label, value in (("settings", settings), ("default grid", grid_text), ("input", facts["input"]),
                             ("keeps argmax", "yes" if facts["keeps_argmax"] else "no"), ("cost", facts["cost"]),
                             ("exports to torch", torch_export)):
            print(textwrap.fill(f"{label}: {value}", width=110, initial_indent="    ", subsequent_indent="      "))
    return 0
