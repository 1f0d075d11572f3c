"""The jobs a resolved config asks for: every calibrate job's ``(source, method, seed)`` and whether a method runs on
a source. Apart from :mod:`calbench.jobs.spec`, whose every importer (each job's script) would otherwise import the
method registry: a method's edit then reruns no dump (docs/operations.md)."""

from __future__ import annotations


def calibrate_keys(config: dict, *, having: str | None = None) -> list[tuple[str, str, int]]:
    """Every ``(source, method, seed)`` of a calibrate job the resolved config asks for (a method runs on the sources
    that have what it needs, :func:`runs_on`), of the sources that set ``having`` (as
    :func:`calbench.data.entry.sources`)."""
    from calbench.data.entry import sources

    return [(s.name, m, seed) for s in sources(config, having=having) for m in config["methods"] if runs_on(m, s)
            for seed in s.seeds]


def runs_on(method: str, source) -> bool:
    """Whether ``method`` runs on ``source`` (a :class:`~calbench.data.entry.Source`; it has what the method needs,
    :func:`calbench.methods.registry.runs_on`)."""
    from calbench.methods.registry import runs_on

    return runs_on(method, source.entry)
