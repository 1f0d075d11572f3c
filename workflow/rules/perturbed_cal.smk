# The perturbed calibration set of a model source and seed (docs/shift.md; Tomani et al. 2021): the model's
# outputs on the seed's calibration images perturbed at increasing strengths → results/perturbed_cal/, read by the
# calibrate jobs of the methods whose `needs` name `perturbed_cal` (calbench.jobs.calibrate.calibrate_arguments).
from calbench.jobs import paths


rule dump_perturbed_cal:
    input:
        code=script_code("dump_perturbed_cal"),
        weights=model_weights,
        split=source_split_file,
        data=source_data,
    output:
        paths.PERTURBED_CAL,
    params:
        entry=source_entry,
        perturb=config["perturbed_cal"],  # levels and clipping: changing them reruns the perturbed dumps
        cache_dir=config["downloads_dir"],
    wildcard_constraints:
        source=_alternatives(MODEL_SOURCES),
    threads: model_threads
    log:
        "logs/perturbed_cal/{source}/seed{seed}.log",
    benchmark:
        "benchmarks/perturbed_cal/{source}/seed{seed}.tsv"
    conda:
        "../../envs/torch.yaml"
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=120,
    script:
        "../scripts/dump_perturbed_cal.py"


