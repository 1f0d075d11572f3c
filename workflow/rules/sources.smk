# Sources → results/dumps/{source}.h5 (docs/architecture.md §3). Model-backed sources (train, pretrained)
# have their own GPU rules (models.smk).


rule dump_source:
    input:
        unpack(spec_input("dump_source")),
        code=script_code("dump_source"),
    output:
        dump=paths.DUMP,
    log:
        "logs/dump/{source}.log",
    benchmark:
        "benchmarks/dump/{source}.tsv"
    wildcard_constraints:
        source=_alternatives(DATA_SOURCES),
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=dump_memory,
        runtime=30,
    params:
        settings=spec_params("dump_source"),
    script:
        "../scripts/dump_source.py"


# A pooled source's calibration/test split, drawn once per seed for its calibrate jobs (docs/architecture.md §3).


rule draw_split:
    input:
        unpack(spec_input("draw_split")),
        code=script_code("draw_split"),
    output:
        test_rows=paths.SPLIT,
    log:
        "logs/split/{source}/seed{seed}.log",
    benchmark:
        "benchmarks/split/{source}/seed{seed}.tsv"
    conda:
        "../../envs/calbench.yaml"
    params:
        settings=spec_params("draw_split"),
    script:
        "../scripts/draw_split.py"


# The content digests of a source's data files, computed when the DAG is built (calbench.data.digests): the files
# enter the DAG by content, so that a replaced file reruns its dump even with its old modification time, and a
# touched one nothing.


rule source_digest:
    input:
        code=script_code("source_digest"),
    output:
        table=paths.SOURCE_DIGEST,
    log:
        "logs/digests/{source}.log",
    benchmark:
        "benchmarks/digests/{source}.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=200,
        runtime=30,
    params:
        settings=spec_params("source_digest"),
    script:
        "../scripts/source_digest.py"
