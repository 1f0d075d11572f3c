# Model-backed sources (docs/architecture.md §1, docs/models_and_kcal.md): train a torchvision/timm
# model, or load a published or local one, and dump logits, labels and penultimate-layer embeddings of train/cal/test to
# results/dumps/{source}.h5. These are the only rules that load torch. A job reserves a GPU (resource `gpu`)
# only where the source's `device` names one (cuda, cuda:N); `auto` (the default) runs on a GPU when the
# machine it lands on has one and reserves none, so that the default config's small models train on the CPU.
# Each job declares the source's `threads`, which torch uses and SLURM grants as CPUs.
# An imagefolder source's images are listed and digested when the DAG is built (calbench.data.digests), params of
# its `image_manifest` job (each image's path, size and SHA-256 → results/manifests/{source}.tsv, no torch), which its
# model rules read: an image changed in content (whatever its modification time), added or removed reruns them, an
# untouched or only touched folder nothing.


rule image_manifest:
    input:
        unpack(spec_input("image_manifest")),
        code=script_code("image_manifest"),
    output:
        manifest=paths.IMAGE_MANIFEST,
    log:
        "logs/manifests/{source}.log",
    benchmark:
        "benchmarks/manifests/{source}.tsv"
    wildcard_constraints:
        source=_alternatives(IMAGEFOLDER_SOURCES),
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=500,
        runtime=30,
    params:
        settings=spec_params("image_manifest"),
    script:
        "../scripts/image_manifest.py"


rule train_model:
    input:
        unpack(spec_input("train_model")),
        code=script_code("train_model"),
    output:
        model=paths.MODEL,
    log:
        "logs/train/{source}.log",
    benchmark:
        "benchmarks/train/{source}.tsv"
    wildcard_constraints:
        source=_alternatives(TRAIN_SOURCES),
    priority: 10  # the longest jobs of a run, and everything of their source waits for them: start them first
    conda:
        "../../envs/torch.yaml"
    threads: model_threads
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=720,
    params:
        settings=spec_params("train_model"),
    script:
        "../scripts/train_model.py"


rule dump_model:
    input:
        unpack(spec_input("dump_model")),
        code=script_code("dump_model"),
    output:
        output=paths.DUMP,
    log:
        "logs/dump/{source}.log",
    benchmark:
        "benchmarks/dump/{source}.tsv"
    wildcard_constraints:
        source=_alternatives(MODEL_SOURCES),
    priority: 10
    conda:
        "../../envs/torch.yaml"
    threads: model_threads
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=120,
    params:
        settings=spec_params("dump_model"),
    script:
        "../scripts/dump_model.py"
