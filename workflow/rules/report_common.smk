# Config sections and target builders of the figure and study rules (figures.smk, studies.smk);
# config keys `figures` and `studies` (docs/figures_and_studies.md).
import calbench.report as _calbench_report
from calbench.config import load_schema
from calbench.metrics import check_metric_ids

_SCHEMA = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")


def config_section(*keys):
    """config[k1][k2]… with the schema's defaults filled in, or None where the key is absent."""
    node, schema = config, _SCHEMA
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return None
        node, schema = node[key] or {}, schema["properties"][key]
    return {**{k: v["default"] for k, v in schema.get("properties", {}).items() if "default" in v}, **node}


def _check_names(where, names, known, what):
    unknown = [n for n in names if n not in known]
    if unknown:
        raise WorkflowError(f"calbench: invalid config: config key {where}: {unknown} not in the config's {what} "
                            f"({', '.join(known)})")


RELIABILITY = config_section("figures", "reliability")
SIMPLEX = config_section("figures", "simplex")
CRITICAL_DIFFERENCE = config_section("figures", "critical_difference")
for _key, _section in (("reliability", RELIABILITY), ("simplex", SIMPLEX)):
    if _section is not None:
        _section.setdefault("sources", list(SOURCES))
        _section.setdefault("methods", list(METHODS))
        _check_names(f"figures.{_key}.sources", _section["sources"], SOURCES, "sources")
        _check_names(f"figures.{_key}.methods", _section["methods"], METHODS, "methods")
if CRITICAL_DIFFERENCE is not None:
    CRITICAL_DIFFERENCE.setdefault("metrics", list(METRICS))
    _check_names("figures.critical_difference.metrics", CRITICAL_DIFFERENCE["metrics"], METRICS, "metrics")


def figure_seed(source):
    """Figures show the first seed of each source (the LECE paper draws seed 0)."""
    return source_seeds(source)[0]


def figure_methods(section, source):
    return [m for m in section["methods"] if method_runs_on(m, source)]


def figure_calibrated(section, source):
    seed = figure_seed(source)
    return [f"results/calibrated/{source}/{m}/seed{seed}.h5" for m in figure_methods(section, source)]


def reliability_inputs(wildcards):
    return figure_calibrated(RELIABILITY, wildcards.source)


def reliability_methods(wildcards):
    return figure_methods(RELIABILITY, wildcards.source)


def simplex_inputs(wildcards):
    return figure_calibrated(SIMPLEX, wildcards.source)


def simplex_methods(wildcards):
    return figure_methods(SIMPLEX, wildcards.source)


def figure_seed_of(wildcards):
    return figure_seed(wildcards.source)


def cd_figure_paths():
    return {m: f"results/figures/critical_difference/{m}.png" for m in CRITICAL_DIFFERENCE["metrics"]}


def figure_files():
    files = []
    if RELIABILITY is not None:
        files += [f"results/figures/reliability/{s}/{t}.{ext}" for s in RELIABILITY["sources"]
                  for t in RELIABILITY["targets"] for ext in ("png", "csv")]
    if SIMPLEX is not None:
        files += [f"results/figures/simplex/{s}.png" for s in SIMPLEX["sources"]]
    if CRITICAL_DIFFERENCE is not None:
        files += list(cd_figure_paths().values()) + ["results/tables/friedman.md", "results/tables/friedman.csv"]
    return files


LEARNING_CURVE = config_section("studies", "learning_curve")
if LEARNING_CURVE is not None:
    _check_names("studies.learning_curve.sources", LEARNING_CURVE["sources"], SOURCES, "sources")
    try:
        for _method in LEARNING_CURVE["methods"]:
            split_chain(_method)
        check_metric_ids(LEARNING_CURVE["metrics"])
    except ValueError as err:
        raise WorkflowError(f"calbench: invalid config: config key studies.learning_curve: {err}") from None


def learning_curve_jobs():
    return [(s, m) for s in LEARNING_CURVE["sources"] for m in LEARNING_CURVE["methods"] if method_runs_on(m, s)]


def learning_curve_figures():
    return [f"results/figures/learning_curve/{s}.png" for s in LEARNING_CURVE["sources"]]


def study_files():
    if LEARNING_CURVE is None:
        return []
    return ["results/studies/learning_curve/summary.csv", "results/studies/learning_curve/summary.md"] + (
        learning_curve_figures()
    )
