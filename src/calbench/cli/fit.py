"""``calbench fit``: fit a method on your calibration scores and save it (:mod:`calbench.persist`)."""

from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager

from calbench.cli.arrays import read_array, read_scores


def add_parser(sub) -> None:
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
    fit.set_defaults(handler=run)


def parse_settings(method: str, pairs) -> dict:
    """``["q=0.05", "lece.t=0"]`` → settings for :func:`calbench.methods.make` (values read as YAML);
    in a chain, ``stage.setting=value``."""
    from calbench.config import read_yaml
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
            settings.setdefault(stage, {})[name] = read_yaml(value)
        else:
            settings[key] = read_yaml(value)
    return settings


def run(args) -> int:
    from calbench.methods import make
    from calbench.persist import save

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
    print(f"calbench fit: fitting {args.method} on {scores.n} x {scores.num_classes} {kind}", file=sys.stderr)
    started = time.perf_counter()
    with _progress_on_stderr():
        cal.fit(scores, labels, train=train)
    print(f"calbench fit: {args.method} fitted in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    save(cal, args.output, input_kind=kind)
    print(f"fitted {args.method} on {scores.n} x {scores.num_classes} {kind} -> {args.output}")
    return 0


@contextmanager
def _progress_on_stderr():
    """calbench's INFO messages on stderr with the time since the start, while fitting: the grid search logs each
    finished fold (points, time), so that a fit of many seconds shows its progress."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("calbench fit: %(relativeCreated)6.0f ms  %(message)s"))
    logger = logging.getLogger("calbench")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
