"""``calbench apply``: calibrate new scores with a saved calibrator."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calbench.cli.arrays import read_array, write_array


def add_parser(sub) -> None:
    apply = sub.add_parser("apply", help="calibrate new scores with a saved calibrator")
    apply.add_argument("calibrator", help="a saved calibrator (calbench fit, or results/calibrators/...)")
    apply.add_argument("scores", help="scores of the same kind as at fit time (.npy/.npz/.csv)")
    apply.add_argument("--embeddings", help="embeddings [N, D] (kcal)")
    apply.add_argument("--log", action="store_true", help="write log-probabilities instead of probabilities")
    apply.add_argument("-o", "--output", required=True, help="calibrated probabilities (.npy or .csv)")
    apply.set_defaults(handler=run)


def run(args) -> int:
    from calbench.persist import EXTENSION, load, method_name
    from calbench.scores import input_scores

    if Path(args.calibrator).suffix.lower() in (".npy", ".npz", ".csv") and args.scores.endswith(EXTENSION):
        raise ValueError(f"{args.calibrator} is a score file and {args.scores} a calibrator: the calibrator comes "
                         f"first: calbench apply {args.scores} {args.calibrator} -o {args.output}")
    cal = load(args.calibrator)  # every header field checked against the calibrator it builds
    array = read_array(args.scores)
    if array.ndim == 2 and array.shape[1] != cal.num_classes_:
        raise ValueError(f"{args.scores}: has {array.shape[1]} columns, but {args.calibrator} was fitted on "
                         f"{cal.num_classes_} classes; pass scores of the same classifier")
    embeddings = None if args.embeddings is None else read_array(args.embeddings, ("embeddings",))
    width = getattr(cal, "embedding_dim_", None)
    if embeddings is not None and width is not None and embeddings.ndim == 2 and embeddings.shape[1] != width:
        raise ValueError(f"{args.embeddings}: has {embeddings.shape[1]} columns, but {args.calibrator} was fitted on "
                         f"embeddings of width {width}; pass the embeddings of the same classifier")
    # the same conversion as the loaded calibrator's predict_proba on a plain array (Calibrator._check_scores)
    scores = input_scores(array, cal.input_kind_, embeddings, where=str(args.scores), owner=str(args.calibrator))
    probs = cal.predict_proba(scores)
    write_array(args.output, np.log(probs) if args.log else probs)
    print(f"{method_name(cal)}: calibrated {scores.n} rows -> {args.output}")
    return 0
