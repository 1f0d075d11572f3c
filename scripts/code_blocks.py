"""The docs' blocks derived from the code, written by this script (never by hand) through the generated-blocks
mechanism of :mod:`calbench.perf.docs_blocks`:

* docs/developing.md ``layers``: the package map, its layer and module columns from the layer list that
  tests/contract/test_layers.py checks (:data:`HOLDS` says what each layer holds);
* docs/operations.md ``localrules``: the rules that run where Snakemake runs (``localrules``) and the cluster jobs;
* docs/architecture.md ``rules``: every rule with its rule file, where it runs, its conda env, threads and GPU, read
  from workflow/rules/*.smk (as snakefmt formats them);
* README.md ``recommend-json``: the fields of ``calbench recommend --json``'s records, from the declaration beside
  the code that builds them (:data:`calbench.jobs.recommendation.FIELDS` and ``BEST_FIELDS``).

    python scripts/code_blocks.py            # rewrite the blocks
    python scripts/code_blocks.py --check    # exit 1 when a committed block is not what the code gives
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

from calbench.perf.docs_blocks import replace_blocks, write_or_check

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "workflow" / "rules"

#: What each layer holds, by its first name in the layer list.
HOLDS = {
    "mnist_c": "the MNIST-C benchmark's corruptions at their published severities (Mu & Gilmer 2019), which "
               "`corruptions` registers as shift families",
    "atomic": "generic helpers: atomic file writes, the score container, the version (which lower layers read "
              "instead of the package root), k-fold splits, threads, warnings, import closures, image corruptions, "
              "the declared fitted state of every calibrator, the warnings a job records with its outputs (`caught`)",
    "kernels": "the numba-compiled kernels (vectorised exp and log, softmax row passes, LECE's neighbour sums, "
               "KCal's class sums, the PL/PL3 fits, BBQ's binning models, ENIR's near-isotonic path), each module "
               "with a `warm_up()` that `calbench compile` runs",
    "solvers": "numerical solvers: the affine-softmax fit `affine_softmax_fit` and its parts, one module each "
               "(`affine_penalty`, `affine_objective`, `affine_hessian`, `affine_preconditioners`, `affine_lbfgs`, "
               "`affine_newton`, `affine_truncated_newton`, `affine_path_state`; docs/solver.md), its grid path's "
               "warm starts (`warm_start_path`), the tied fits (`tied_affine_fit`), the temperature fit "
               "(`temperature_fit`)",
    "maps1d": "one-dimensional calibration maps shared by methods and metrics, and their one-vs-rest composition "
              "(`one_vs_rest`: per-class fits, renormalised rows)",
    "metrics": "calibration metrics, their registry and the log-loss floors",
    "data": "sources (`entry`: a source of the resolved config as a typed value), synthetic tasks, importers, image "
            "folders, the HDF5 store, splits, copied rows (`copies`)",
    "models": "torch classifiers and KCal's projection network",
    "methods": "the registered calibration methods, one module each (or a family), and their shared machinery: "
               "`base`, `registry`, `chain`, `tuning`, `constraints`, `torch_stages` (the one-vs-rest base class "
               "`OneVsRest` is in `binary_calibrators`)",
    "persist": "saving calibrators and exporting them to torch",
    "stats": "the statistics of the tables: what a resample draws (`resampling`), every method's paired resamples "
             "of a source (`draws`), intervals and tests (`paired`), the noise floor (`noise_floor`), Friedman and "
             "critical differences (`ranks`)",
    "config": "the config and its schema; tables, figures and the warnings list",
    "jobs": "the workflow's jobs, their specs (`jobs/spec.py`) and output paths (`jobs/paths.py`), the recommendation "
            "(`jobs/recommendation.py`, which `calbench recommend` and `calbench report` share)",
    "perf": "the performance benchmarks (some time the workflow's jobs) and the docs' generated blocks "
            "(`perf/docs_blocks.py`)",
    "cli": "the command line: one module per subcommand, one dispatch (`calbench.cli.main`)",
    "__main__": "`python -m calbench`",
}
_RULE = re.compile(r"^rule (\w+):\n((?:    .*\n|\n)*)", re.M)
_LOCAL = re.compile(r"^localrules:\n((?:    \w+,\n)+)", re.M)


def layers() -> list[set[str]]:
    """The layer list of tests/contract/test_layers.py, lowest first."""
    spec = importlib.util.spec_from_file_location("test_layers", REPO / "tests" / "contract" / "test_layers.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "tests"))  # its conftest import
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "tests"))
    return module.LAYERS


def layer_table() -> str:
    rows = ["| layer | package or module | holds |", "|---|---|---|"]
    package = REPO / "src" / "calbench"
    for depth, names in enumerate(layers(), 1):
        ordered = sorted(names, key=lambda n: (n not in HOLDS, n))
        first = next(n for n in ordered if n in HOLDS) if any(n in HOLDS for n in names) else None
        if first is None:
            raise ValueError(f"layer {depth} ({', '.join(sorted(names))}): add what it holds to HOLDS in {__file__}")
        shown = [f"`{n}/`" if (package / n).is_dir() else f"`{n}`" for n in [first, *sorted(set(names) - {first})]]
        rows.append(f"| {depth} | {', '.join(shown)} | {HOLDS[first]} |")
    return "\n".join(rows)


def rules() -> list[dict]:
    """Every rule of workflow/rules/*.smk: its name, file, directives, the script it runs (``script:``, or its shell
    command's ``job_command``: None for neither), local or not, conda env, threads, GPU."""
    found = []
    for path in sorted(RULES.glob("*.smk")):
        text = path.read_text()
        local = {name.strip().rstrip(",") for m in _LOCAL.finditer(text) for name in m[1].split()}
        for m in _RULE.finditer(text):
            body = m[2]
            conda = re.search(r"    conda:\n        (.+)\n", body)
            threads = re.search(r"    threads: ([^#\n]+)", body)
            script = re.search(r'script:\s*"\.\./scripts/(\w+)\.py"|shell:\s*job_command\("(\w+)"', body)
            found.append({"name": m[1], "file": path.name, "local": m[1] in local,
                          "directives": set(re.findall(r"^    (\w+):", body, re.M)),
                          "script": script and (script[1] or script[2]),
                          "conda": conda[1].strip('"').removeprefix("../../") if conda else None,
                          "threads": threads[1].strip() if threads else "1",
                          "gpu": "gpu=" in body})
    return found


def localrules_text() -> str:
    found = rules()
    local = [f"`{r['name']}`" for r in found if r["local"]]
    cluster = [f"`{r['name']}`" for r in found if not r["local"]]
    import textwrap

    return textwrap.fill(f"Rules that run where Snakemake runs (`localrules`, light: they read tables and write text "
                         f"or small figures): {', '.join(local)}. Every other rule is a cluster job with its "
                         f"`resources`: {', '.join(cluster)}.", width=118, break_on_hyphens=False,
                         break_long_words=False)


def rule_table() -> str:
    def conda(env):
        return "the method's (torch where it trains)" if env == "method_conda_env" else f"`{env}`"

    def threads(value):
        return {"model_threads": "the source's `threads`", 'config["calibrate_threads"]': "`calibrate_threads`"}.get(
            value, value)

    rows = ["| rule | file | runs | conda env | threads | GPU |", "|---|---|---|---|---|---|"]
    rows += [f"| `{r['name']}` | `{r['file']}` | {'locally' if r['local'] else 'cluster job'} | {conda(r['conda'])} | "
             f"{threads(r['threads'])} | {'where the source names cuda' if r['gpu'] else 'no'} |" for r in rules()]
    return "\n".join(rows)


def recommend_fields() -> str:
    from calbench.jobs.recommendation import BEST_FIELDS, FIELDS

    rows = ["| field | in | holds |", "|---|---|---|"]
    rows += [f"| `{name}` | every record | {text} |" for name, text in FIELDS.items()]
    rows += [f"| `{name}` | the best's | {text} |" for name, text in BEST_FIELDS.items()]
    return "\n".join(rows)


#: page → {block name: renderer}
BLOCKS = {
    "README.md": {"recommend-json": recommend_fields},
    "docs/developing.md": {"layers": layer_table},
    "docs/operations.md": {"localrules": localrules_text},
    "docs/architecture.md": {"rules": rule_table},
}


def pages() -> dict[Path, str]:
    """Each page with its blocks rendered."""
    out = {}
    for page, blocks in BLOCKS.items():
        path = REPO / page
        out[path] = replace_blocks(path, path.read_text(), {name: render() for name, render in blocks.items()})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where a committed block is out of date")
    args = parser.parse_args(argv)
    status = 0
    for path, text in pages().items():
        status |= write_or_check(path, text, args.check, "python scripts/code_blocks.py")
    return status


if __name__ == "__main__":
    sys.exit(main())
