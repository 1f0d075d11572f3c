"""``calbench metrics``: the metric ids, with a sentence each."""

from __future__ import annotations

import textwrap

#: What ``metrics`` says of a pattern whose metrics take their base metric's direction.
BASE_DIRECTION = "the direction of its base metric"


def add_parser(sub) -> None:
    metrics = sub.add_parser("metrics", help="list metric ids with a sentence each")
    metrics.add_argument("--json", action="store_true", help="print [{id, description, direction}] as JSON")
    metrics.set_defaults(handler=run)


def run(args) -> int:
    import json

    from calbench.metrics import definitions  # noqa: F401  (registers every metric id)
    from calbench.metrics.registry import described_ids

    def direction(family) -> str:  # an adapted or delta pattern: acc.em is higher-better, nll.em lower-better
        return BASE_DIRECTION if family.display_of is not None else family.direction

    if args.json:
        print(json.dumps([{"id": usage, "description": description, "direction": direction(family)}
                          for usage, description, family in described_ids()], indent=1))
        return 0
    for usage, description, family in described_ids():
        print(usage)
        print(textwrap.fill(f"{description} ({direction(family)})", width=110, initial_indent="    ",
                            subsequent_indent="    "))
    return 0
