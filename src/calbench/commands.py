"""The user-facing subcommands of ``calbench`` (``python -m calbench``): one function per subcommand.

``fit`` / ``apply`` work on the user's own arrays (npy, npz, csv) and saved calibrators
(:mod:`calbench.persist`); ``recommend`` reads a finished run; ``methods`` and ``metrics`` describe what
calbench offers in plain text.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import yaml

from calbench.scores import Scores

SCORE_KEYS = ("logits", "probs", "scores")


# -- reading and writing arrays ----------------------------------------------------------------------------
def read_array(path, keys=SCORE_KEYS) -> np.ndarray:
    """An array from ``.npy``, ``.npz`` (its only array, or one named in ``keys``) or ``.csv`` (comma-separated;
    a first line that is not numbers is a header and skipped)."""
    from calbench.data.where import shown

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{shown(path)}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                names = list(archive.files)
                chosen = names if len(names) == 1 else [k for k in keys if k in names][:1]
                if not chosen:
                    raise ValueError(f"holds arrays {names}; name the wanted one {' or '.join(keys)}")
                return archive[chosen[0]]
        if suffix == ".csv":
            return np.loadtxt(path, delimiter=",", ndmin=2, skiprows=int(_csv_has_header(path)))
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot read ({err})") from None
    raise ValueError(f"{path}: unknown file type {suffix!r}; use .npy, .npz or .csv")


def _csv_has_header(path: Path) -> bool:
    """True when the first line of a CSV file holds a field that is not a number (column names)."""
    with open(path) as f:
        first = f.readline()
    try:
        [float(field) for field in first.split(",") if field.strip()]
    except ValueError:
        return True
    return False


def write_array(path, array: np.ndarray) -> None:
    """Write ``.npy`` or ``.csv`` atomically (no half-written file on error)."""
    from calbench.atomic import atomic_path

    path = Path(path)
    if path.suffix.lower() not in (".npy", ".csv"):
        raise ValueError(f"{path}: output must end in .npy or .csv")
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        if path.suffix.lower() == ".npy":
            np.save(f, array)
        else:
            np.savetxt(f, array, delimiter=",", fmt="%.17g")


def read_scores(path, kind: str, embeddings=None, fix: str | None = None) -> Scores:
    """Scores from a file of logits or (``kind="probs"``) probabilities, checked against the declared kind;
    ``fix`` is the advice given when they do not look like that kind."""
    from calbench.scores import convert_scores

    logits = convert_scores(read_array(path), "probs" if kind == "probs" else "logits", str(path), fix)
    return Scores(logits, None if embeddings is None else read_array(embeddings, ("embeddings",)))


# -- fit / apply --------------------------------------------------------------------------------------------
def parse_settings(method: str, pairs) -> dict:
    """``["q=0.05", "lece.t=0"]`` → settings for :func:`calbench.methods.make` (values read as YAML);
    in a chain, ``stage.setting=value``."""
    from calbench.methods import split_chain

    parts = split_chain(method)
    settings: dict = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {pair!r}: expected NAME=VALUE, e.g. --set q=0.05")
        stage, dot, name = key.rpartition(".")
        if len(parts) > 1:
            if stage not in parts:
                raise ValueError(f"--set {pair!r}: in chain {method!r} write STAGE.NAME=VALUE with STAGE one of "
                                 f"{parts}")
            settings.setdefault(stage, {})[name] = yaml.safe_load(value)
        else:
            settings[key] = yaml.safe_load(value)
    return settings


def cmd_fit(args) -> int:
    import calbench
    from calbench.methods import make

    kind = "probs" if args.probs else "logits"
    fix = "drop --probs" if args.probs else "pass --probs so they are fitted as log-probabilities"
    scores = read_scores(args.scores, kind, args.embeddings, fix)
    labels = read_array(args.labels, ("labels", "y"))
    if labels.ndim == 2 and 1 in labels.shape:
        labels = labels.ravel()
    cal = make(args.method, **parse_settings(args.method, args.set))
    train = None
    if "train" in cal.needs:
        if not (args.train_scores and args.train_labels):
            raise ValueError(f"{args.method} learns from the classifier's training split: "
                             "pass --train-scores and --train-labels (and --train-embeddings for kcal)")
        train = (read_scores(args.train_scores, kind, args.train_embeddings, fix),
                 read_array(args.train_labels, ("labels", "y")).ravel())
    cal.fit(scores, labels, train=train)
    calbench.save(cal, args.output, input_kind=kind)
    print(f"fitted {args.method} on {scores.n} x {scores.num_classes} {kind} -> {args.output}")
    return 0


def cmd_apply(args) -> int:
    from calbench.persist import EXTENSION, load, read_header
    from calbench.scores import input_scores

    if Path(args.calibrator).suffix.lower() in (".npy", ".npz", ".csv") and args.scores.endswith(EXTENSION):
        raise ValueError(f"{args.calibrator} is a score file and {args.scores} a calibrator: the calibrator comes "
                         f"first: calbench apply {args.scores} {args.calibrator} -o {args.output}")
    header = read_header(args.calibrator)
    array = read_array(args.scores)
    if array.ndim == 2 and array.shape[1] != header["num_classes"]:
        raise ValueError(f"{args.scores}: has {array.shape[1]} columns, but {args.calibrator} was fitted on "
                         f"{header['num_classes']} classes; pass scores of the same classifier")
    cal = load(args.calibrator)
    embeddings = None if args.embeddings is None else read_array(args.embeddings, ("embeddings",))
    # the same conversion as the loaded calibrator's predict_proba on a plain array (Calibrator._check_scores)
    scores = input_scores(array, cal.input_kind_, embeddings, where=str(args.scores), owner=str(args.calibrator))
    probs = cal.predict_proba(scores)
    write_array(args.output, np.log(probs) if args.log else probs)
    print(f"{header['method']}: calibrated {scores.n} rows -> {args.output}")
    return 0


# -- recommend ----------------------------------------------------------------------------------------------
def cmd_recommend(args) -> int:
    import pandas as pd

    from calbench.jobs import paths
    from calbench.report.choice import compare, scale_note, shown

    results = Path(args.results)
    table = results / "tables" / "metrics_long.csv"
    if not table.is_file():
        raise FileNotFoundError(f"{table}: not found; run the workflow first (snakemake --cores N), or pass the "
                                "results directory of a finished run")
    from calbench.report.shift import ranking_rows

    long = ranking_rows(pd.read_csv(table), args.under_shift)
    available = sorted(m for m in long["metric"].unique() if not m.endswith((".ci_low", ".ci_high")))
    wanted = available if args.all_metrics else [args.metric]
    for metric in wanted:
        if metric not in available:
            raise ValueError(f"metric {metric!r} is not in {table}; it holds {', '.join(available)} "
                             "(`calbench metrics` explains each id)")

    def outputs(source, method, seed):
        return results / paths.CALIBRATED.removeprefix("results/").format(source=source, method=method, seed=seed)

    print(f"best method per source; interval: {args.level:.0%}, over seeds (t) where a source has several, else "
          f"over its test rows ({args.resamples} bootstrap resamples, the same for every method); a method is "
          f"'not significantly worse' when a two-sided paired test against the best gives p >= {args.alpha}")
    if args.under_shift:
        print("ranked by the mean over the shifted test sets of each seed (docs/shift.md); one-seed sources get "
              "no interval, since the bootstrap resamples the clean test rows")
    for metric in wanted:
        direction = "higher" if _higher_is_better(metric) else "lower"
        print(f"\n{metric}{scale_note(metric)}, {direction} is better, values as in the tables")
        for rec in compare(long, metric, None if args.under_shift else outputs, args.level, args.resamples):
            _print_choice(rec, args.alpha, shown)
            if not args.all_metrics:
                saved = results / "calibrators" / rec["source"] / rec["method"] / f"seed{rec['seed']}.safetensors"
                print(f"    saved calibrator: {saved}" + ("" if saved.is_file() else " (missing: rerun the workflow)"))
    return 0


def _print_choice(rec: dict, alpha: float, shown) -> None:
    """Two lines per source: the best method with its interval and the verdict against the runner-up; the
    methods not significantly worse than it."""
    metric = rec["metric"]
    line = f"{rec['source']}: {rec['method']} {shown(metric, rec['value'])}"
    if rec["basis"] is not None and np.isfinite(rec["low"]):
        line += f" [{shown(metric, rec['low'])}, {shown(metric, rec['high'])}] over {rec['basis']}"
    else:
        line += " (no interval: one seed and no calibrated outputs to resample)"
    if not rec["others"]:
        print(line + "; the only method")
        return
    method, value, p_value = rec["others"][0]
    if np.isnan(p_value):
        line += f"; runner-up {method} {shown(metric, value)}, no paired test"
    else:
        verdict = "significantly better than" if p_value < alpha else "not significantly better than"
        line += f"; {verdict} the runner-up {method} {shown(metric, value)} (p = {p_value:.3g})"
    print(line)
    close = [m for m, _, p in rec["others"] if np.isfinite(p) and p >= alpha]
    print(f"    not significantly worse: {', '.join(close) if close else 'none'}")


def _higher_is_better(metric: str) -> bool:
    from calbench.metrics import lookup

    return lookup(metric)[0].higher_is_better


# -- methods / metrics --------------------------------------------------------------------------------------
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
        cv = {"folds": 10, **cls.default_cv}
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


def cmd_methods(args) -> int:
    from calbench.methods import available

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


def cmd_metrics(args) -> int:
    from calbench.metrics.registry import described_ids

    for usage, description, family in described_ids():
        direction = "higher is better" if family.higher_is_better else "lower is better"
        print(usage)
        print(textwrap.fill(f"{description} ({direction})", width=110, initial_indent="    ",
                            subsequent_indent="    "))
    return 0


#: Methods that run numba-compiled kernels (maps1d/piecewise_kernel.py when fitting, methods/neighbour_sums.py
#: when predicting, methods/temperature.py and methods/softmax_residual.py both; ``ms`` stands for the vs/ms/dir
#: family): one fit and prediction each on tiny data compiles every kernel signature they use. KCal's kernel
#: (methods/kernel_sums.py) is compiled through its Eq. 3 function, since a KCal fit needs a training split, and
#: the affine-softmax solver's float32 passes through its own functions, since only fits of 17 classes or more
#: reach them.
COMPILED_METHODS = ("pl_conf", "pl3_conf", "lece", "ts", "ms")


def cmd_compile(args) -> int:
    """Compile the numba kernels into their on-disk cache (the package's ``__pycache__``), so that no
    calibrate job pays the compilation (about 15 CPU-s per kernel module); `make` runs it after installing."""
    from time import perf_counter

    from calbench.methods import make

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(200, 3)) * 3
    labels = rng.integers(0, 3, 200)
    wide = np.where(rng.random((200, 1)) < 0.5, 0.0, rng.normal(size=(200, 100)) * 8)
    for name in COMPILED_METHODS:
        start = perf_counter()
        make(name, grid=None).fit(logits, labels).predict_proba(logits)
        if name == "lece":  # its other signatures: flat predictions over 100 classes (bounds from the float32
            # product) and t > 0 (sums only at the classes with p̂ > t)
            make(name, grid=None, t=0.05).fit(wide, np.arange(200) % 100).predict_proba(wide)
        print(f"{name}: kernels compiled or loaded from the cache in {perf_counter() - start:.1f} s")
    from calbench.methods.kcal import kde_probs

    start = perf_counter()
    kde_probs(logits[:5], logits, labels, 3, 1.0)
    print(f"kcal: kernels compiled or loaded from the cache in {perf_counter() - start:.1f} s")
    start = perf_counter()
    _compile_affine_softmax(logits)
    print(f"affine_softmax: kernels compiled or loaded from the cache in {perf_counter() - start:.1f} s")
    return 0


def _compile_affine_softmax(x: np.ndarray) -> None:
    """The affine-softmax solver's float32 row pass (methods/softmax_residual.py): truncated Newton's
    Hessian-vector products, which only fits of 17 classes or more reach (``ms`` in :data:`COMPILED_METHODS`
    compiles the float64 objective and prediction)."""
    from scipy.special import softmax

    from calbench.methods.affine_softmax import Penalty, hessian_vector, pack

    k = x.shape[1]
    single = x.astype(np.float32)
    hessian_vector(single, softmax(single, axis=1), Penalty(), pack(np.eye(k), np.zeros(k), False))


# -- argument parsing ---------------------------------------------------------------------------------------
def add_subcommands(sub) -> None:
    """Register the subcommands of this module on an argparse subparsers object."""
    methods = sub.add_parser("methods", help="list calibration methods (--verbose: settings, input, cost)")
    methods.add_argument("-v", "--verbose", action="store_true")
    methods.set_defaults(handler=cmd_methods)
    sub.add_parser("metrics", help="list metric ids with a sentence each").set_defaults(handler=cmd_metrics)

    fit = sub.add_parser("fit", help="fit a method on your calibration scores and save it")
    fit.add_argument("method", help="a method name or chain (calbench methods), e.g. ts or ts+lece")
    fit.add_argument("--scores", required=True, help="calibration logits [N, C] (.npy/.npz/.csv)")
    fit.add_argument("--labels", required=True, help="calibration labels [N], integers 0..C-1")
    fit.add_argument("--probs", action="store_true", help="the scores are probabilities, not logits")
    fit.add_argument("--set", action="append", metavar="NAME=VALUE",
                     help="a setting (repeatable); in a chain STAGE.NAME=VALUE; grid=null switches tuning off")
    fit.add_argument("--embeddings", help="calibration embeddings [N, D] (kcal)")
    fit.add_argument("--train-scores", help="training-split scores (kcal, kcal_logits)")
    fit.add_argument("--train-labels", help="training-split labels (kcal, kcal_logits)")
    fit.add_argument("--train-embeddings", help="training-split embeddings (kcal)")
    fit.add_argument("-o", "--output", required=True, help="where to save the calibrator (.safetensors)")
    fit.set_defaults(handler=cmd_fit)

    apply = sub.add_parser("apply", help="calibrate new scores with a saved calibrator")
    apply.add_argument("calibrator", help="a saved calibrator (calbench fit, or results/calibrators/...)")
    apply.add_argument("scores", help="scores of the same kind as at fit time (.npy/.npz/.csv)")
    apply.add_argument("--embeddings", help="embeddings [N, D] (kcal)")
    apply.add_argument("--log", action="store_true", help="write log-probabilities instead of probabilities")
    apply.add_argument("-o", "--output", required=True, help="calibrated probabilities (.npy or .csv)")
    apply.set_defaults(handler=cmd_apply)

    rec = sub.add_parser("recommend", help="the best method per source of a finished run, with intervals and tests")
    rec.add_argument("results", nargs="?", default="results", help="results directory of a finished run")
    rec.add_argument("--metric", default="nll", help="metric id to rank by (default nll)")
    rec.add_argument("--all-metrics", action="store_true",
                     help="every metric of the run: the winner per metric and the methods not significantly worse")
    rec.add_argument("--level", type=float, default=0.95, help="confidence level of the interval")
    rec.add_argument("--alpha", type=float, default=0.05, help="significance level of the paired test")
    rec.add_argument("--resamples", type=int, default=1000,
                     help="bootstrap resamples of the test rows for one-seed sources (default 1000)")
    rec.add_argument("--under-shift", action="store_true",
                     help="rank by the mean over the shifted test sets instead of the clean test split")
    rec.set_defaults(handler=cmd_recommend)

    sub.add_parser("compile", help="compile the numba kernels once (make does it after installing)"
                   ).set_defaults(handler=cmd_compile)


def run(args) -> int:
    """Run a parsed subcommand of this module; user errors become one line on stderr and exit status 2."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            status = args.handler(args)
        except (ValueError, FileNotFoundError) as err:
            print(f"calbench {args.command}: error: {err}", file=sys.stderr)
            status = 2
    for message in dict.fromkeys(str(w.message) for w in caught):  # one line each, after the command's output
        print(f"calbench {args.command}: warning: {message}", file=sys.stderr)
    return status
