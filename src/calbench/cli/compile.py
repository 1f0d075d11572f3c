"""``calbench compile``: compile the numba kernels into their on-disk cache once (`make` runs it after installing),
so that no calibrate job pays the compilation (README states its cost)."""

from __future__ import annotations


def add_parser(sub) -> None:
    sub.add_parser("compile", help="compile the numba kernels once (make does it after installing)"
                   ).set_defaults(handler=run)


def run(args) -> int:
    """Each module of :mod:`calbench.kernels` compiles its own signatures (its ``warm_up``)."""
    from time import perf_counter

    from calbench import kernels

    for module in kernels.modules():
        start = perf_counter()
        module.warm_up()
        name = module.__name__.rsplit(".", 1)[-1]
        print(f"{name}: kernels compiled or loaded from the cache in {perf_counter() - start:.1f} s")
    return 0
