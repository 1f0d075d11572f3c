"""Run every registered benchmark (or those matching ``--only``) and write a JSON list."""

from __future__ import annotations

import argparse
import json
import platform
import sys

from calbench.atomic import write_text_atomic
from calbench.perf import discover


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calbench.perf", description=__doc__)
    parser.add_argument("--out", default="results/bench/bench.json")
    parser.add_argument("--only", default="", help="run only benchmarks whose name contains this text")
    args = parser.parse_args(argv)
    results = []
    for name, function, repeat in discover():
        if args.only and args.only not in name:
            continue
        record = {"name": name, **function(repeat)}
        record["machine"] = f"{platform.machine()} {platform.processor() or ''}".strip()
        print(f"{name:55s} {record['seconds']:9.4f} s  " +
              " ".join(f"{k}={v}" for k, v in record.items() if k not in ("name", "seconds", "machine")),
              flush=True)
        results.append(record)
    write_text_atomic(args.out, json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
