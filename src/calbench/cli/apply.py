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
