"""Run every registered benchmark (or those matching ``--only``) and write a JSON record: how and where it was
measured (:func:`calbench.perf.provenance`) and one entry per benchmark."""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from calbench.atomic import write_text_atomic
from calbench.perf import discover, provenance


def selected(names: list[str], only: str) -> set[str]:
    """The ``names`` that ``--only`` selects: each comma-separated text selects the names containing it, or only
    itself where it is a full name (``scale_param_1000.ts`` without ``scale_param_1000.ts+vs``)."""
    texts = [text for text in only.split(",") if text]
    if not texts:
        return set(names)
    return {name for name in names for text in texts if name == text or (text not in names and text in name)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calbench.perf", description=__doc__)
    parser.add_argument("--out", default="results/bench/bench.json")
    parser.add_argument("--only", default="", help="comma-separated texts: run only the benchmarks whose name "
                        "contains one of them (a benchmark's full name selects that benchmark alone)")
    args = parser.parse_args(argv)
    head = provenance(shlex.join(["python", "-m", "calbench.perf", *(["--only", args.only] if args.only else [])]))
    benchmarks = discover()
    results, chosen = [], selected([name for name, _, _ in benchmarks], args.only)
    for name, function, repeat in benchmarks:
        if name not in chosen:
            continue
        record = {"name": name, **function(repeat)}
        print(f"{name:55s} {record['seconds']:9.4f} s  " +
              " ".join(f"{k}={v}" for k, v in record.items() if k not in ("name", "seconds")), flush=True)
        results.append(record)
        # written after every benchmark too: a run that stops keeps what it measured (some take an hour)
        write_text_atomic(args.out, json.dumps({**head, "benchmarks": results}, indent=1) + "\n")
    write_text_atomic(args.out, json.dumps({**head, "benchmarks": results}, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
