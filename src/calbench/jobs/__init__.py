"""The workflow's jobs as plain functions, one module per stage: Snakemake's scripts call them, so does
``python -m calbench dump|calibrate|evaluate``. Each job reads the files of the stage before it and writes
its output atomically; :mod:`~calbench.jobs.paths` holds the output path templates.

* :mod:`~calbench.jobs.sources`: ``dump_source_job`` (synthetic, imported and downloaded sources);
* :mod:`~calbench.jobs.models`: ``train_job``, ``dump_model_job`` (train/pretrained sources, torch);
* :mod:`~calbench.jobs.calibrate`: ``calibrate_job``; :mod:`~calbench.jobs.evaluate`: ``evaluate_job``;
* :mod:`~calbench.jobs.tables`: ``aggregate_job``; the figure, study, comparison and runtime jobs live
  beside their code in :mod:`calbench.report`.
"""
