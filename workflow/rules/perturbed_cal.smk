# The perturbed calibration set of a model source and seed (docs/shift.md; Tomani et al. 2021): the model's
# outputs on the seed's calibration images perturbed at increasing strengths → results/perturbed_cal/, read by the
# calibrate jobs of the methods whose `needs` name `perturbed_cal` (calbench.jobs.calibrate.spec).


rule dump_perturbed_cal:
    input:
        unpack(spec_input("dump_perturbed_cal")),
        code=script_code("dump_perturbed_cal"),
    output:
        output=paths.PERTURBED_CAL,
    log:
        "logs/perturbed_cal/{source}/seed{seed}.log",
    benchmark:
        "benchmarks/perturbed_cal/{source}/seed{seed}.tsv"
    wildcard_constraints:
        source=_alternatives(MODEL_SOURCES),
    conda:
        "../../envs/torch.yaml"
    threads: model_threads
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=120,
    params:
        settings=spec_params("dump_perturbed_cal"),  # levels and clipping: changing them reruns the perturbed dumps
    script:
        "../scripts/dump_perturbed_cal.py"
