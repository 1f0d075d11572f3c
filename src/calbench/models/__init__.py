"""Train or load CNN/ViT models and dump their logits and embeddings (torch-only package).

The `train` and `pretrained` sources of the workflow: :mod:`~calbench.models.datasets` loads an
image dataset and splits it into train/cal/test, :mod:`~calbench.models.architectures` builds a
torchvision or timm model and reads its penultimate-layer embeddings, :mod:`~calbench.models.training`
trains it with a per-epoch checkpoint, and :mod:`~calbench.jobs.models` (train), :mod:`~calbench.jobs.model_dump`
and :mod:`~calbench.jobs.model_shifts` hold the job functions the Snakemake scripts call. Only the model rules
import this package; calibration jobs never do.
"""
