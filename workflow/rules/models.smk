# Model-backed sources (docs/architecture.md §1, docs/models_and_kcal.md): train a torchvision/timm
# model, or load a published or local one, and dump logits, labels and penultimate-layer embeddings of train/cal/test to
# results/dumps/{source}.h5. These are the only rules that load torch. A job reserves a GPU (resource `gpu`)
# only where the source's `device` names one (cuda, cuda:N); `auto` (the default) runs on a GPU when the
# machine it lands on has one and reserves none, so that the default config's small models train on the CPU.
# Each job declares the source's `threads`, which torch uses and SLURM grants as CPUs.
# An imagefolder source's images are listed and digested when the DAG is built (calbench.data.digests), a param of
# its `image_manifest` job (each image's path, size and SHA-256 → results/manifests/{source}.tsv, no torch), which its
# model rules read: an image changed in content (whatever its modification time), added or removed reruns them, an
# untouched or only touched folder nothing.
# lint accepted (Mixed rules and functions in same snakefile): a rule file's own helpers live beside its rules
# (common.smk holds only those several rule files share), so that each file reads as one stage
from calbench.data.digests import content_digest
from calbench.data.image_folder import dataset_folder, image_files
from calbench.jobs import paths

TRAIN_SOURCES = [s for s in MODEL_SOURCES if SOURCES[s]["type"] == "train"]


def model_weights(wildcards):
    """The trained weights a dump needs: the train job's output for `train`, none for `pretrained`."""
    if SOURCES[wildcards.source]["type"] == "train":
        return paths.MODEL.format(source=wildcards.source)
    return []


def model_threads(wildcards):
    return SOURCES[wildcards.source]["threads"]


def model_gpus(wildcards):
    """1 where the source's device is a CUDA GPU, else 0 (calbench.models.training.resolve_device)."""
    return int(SOURCES[wildcards.source]["device"].startswith("cuda"))


def source_images(wildcards):
    """Every image an imagefolder source reads (calbench.data.image_folder), the inputs of its manifest."""
    return image_files(image_folder(wildcards), f"sources.{wildcards.source}")


def image_folder(wildcards):
    return str(dataset_folder(SOURCES[wildcards.source], config["downloads_dir"]))


rule image_manifest:
    input:
        code=script_code("image_manifest"),
    output:
        paths.IMAGE_MANIFEST,
    params:
        data_dir=image_folder,
        images=source_images,
        content=lambda wildcards: content_digest(source_images(wildcards)),
    wildcard_constraints:
        source=_alternatives(IMAGEFOLDER_SOURCES),
    log:
        "logs/manifests/{source}.log",
    benchmark:
        "benchmarks/manifests/{source}.tsv"
    conda:
        "../../envs/calbench.yaml"
    resources:
        mem_mb=500,
        runtime=30,
    script:
        "../scripts/image_manifest.py"


rule train_model:
    input:
        code=script_code("train_model"),
        data=source_data,
    output:
        paths.MODEL,
    params:
        entry=source_entry,
        cache_dir=config["downloads_dir"],
    wildcard_constraints:
        source=_alternatives(TRAIN_SOURCES),
    threads: model_threads
    priority: 10  # the longest jobs of a run, and everything of their source waits for them: start them first
    log:
        "logs/train/{source}.log",
    benchmark:
        "benchmarks/train/{source}.tsv"
    conda:
        "../../envs/torch.yaml"
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=720,
    script:
        "../scripts/train_model.py"


rule dump_model:
    input:
        code=script_code("dump_model"),
        weights=model_weights,
        data=source_data,
    output:
        paths.DUMP,
    params:
        entry=source_entry,
        cache_dir=config["downloads_dir"],
    wildcard_constraints:
        source=_alternatives(MODEL_SOURCES),
    threads: model_threads
    priority: 10
    log:
        "logs/dump/{source}.log",
    benchmark:
        "benchmarks/dump/{source}.tsv"
    conda:
        "../../envs/torch.yaml"
    resources:
        gpu=model_gpus,
        mem_mb=8000,
        runtime=120,
    script:
        "../scripts/dump_model.py"
