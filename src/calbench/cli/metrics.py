"""``calbench metrics``: the metric ids, with a sentence each."""

from __future__ import annotations

import textwrap


def add_parser(sub) -> None:
    metrics = sub.add_parser("metrics", help="list metric ids with a sentence each")
    metrics.add_argument("--json", action="store_true", help="print [{id, description, direction}] as JSON")
    metrics.set_defaults(handler=run)


def run(args) -> int:
    import json

    from calbench.metrics import definitions  # noqa: F401  (registers every metric id)
    from calbench.metrics.registry import described_ids

    if args.json:
        print(json.dumps([{"id": usage, "description": description, "direction": family.direction}
                          for usage, description, family in described_ids()], indent=1))
        return 0
    for usage, description, family in described_ids():
        direction = family.direction
        print(usage)
        print(textwrap.fill(f"{description} ({direction})", width=110, initial_indent="    ",
                            subsequent_indent="    "))
    return 0
