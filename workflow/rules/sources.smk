# Sources → results/dumps/{source}.h5 (docs/architecture.md §3). Model-backed sources (train, pretrained)
# have their own GPU rules.
from calbench.data.digests import content_digest
from calbench.jobs import paths


rule dump_source:
    input:
        code=script_code("dump_source"),
        data=source_data,
    output:
        paths.DUMP,
    params:
        entry=source_entry,
        seeds=source_seed_list,
        cache_dir=config["downloads_dir"],
    wildcard_constraints:
        source=_alternatives(DATA_SOURCES),
    log:
        "logs/dump/{source}.log",
    benchmark:
        "benchmarks/dump/{source}.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=lambda wildcards: dump_memory_mb(SOURCES[wildcards.source], source_seed_list(wildcards)),
        runtime=30,
    script:
        "../scripts/dump_source.py"


# A pooled source's calibration/test split, drawn once per seed for its calibrate jobs (docs/architecture.md §3).


rule draw_split:
    input:
        dump=paths.DUMP,
        code=script_code("draw_split"),
    output:
        paths.SPLIT,
    params:
        split=source_split,
    log:
        "logs/split/{source}/seed{seed}.log",
    benchmark:
        "benchmarks/split/{source}/seed{seed}.tsv"
    conda:
        "../../envs/calbench.yaml"
    script:
        "../scripts/draw_split.py"


# The content digests of a source's data files, computed when the DAG is built (calbench.data.digests): the files
# enter the DAG by content, so that a replaced file reruns its dump even with its old modification time, and a
# touched one nothing.


rule source_digest:
    input:
        code=script_code("source_digest"),
    output:
        paths.SOURCE_DIGEST,
    params:
        files=lambda wildcards: source_files(SOURCES[wildcards.source]),
        content=lambda wildcards: content_digest(source_files(SOURCES[wildcards.source])),
    log:
        "logs/digests/{source}.log",
    benchmark:
        "benchmarks/digests/{source}.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=200,
        runtime=30,
    script:
        "../scripts/source_digest.py"
