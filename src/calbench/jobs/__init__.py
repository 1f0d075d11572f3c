"""The workflow's jobs as plain functions, one module per stage: Snakemake's scripts call them, so does
``python -m calbench dump|calibrate|evaluate``. Each job reads the files of the stage before it and writes
its output atomically; :mod:`~calbench.jobs.paths` holds the output path templates.

* :mod:`~calbench.jobs.sources`: ``dump_source_job`` (synthetic, imported and downloaded sources);
* :mod:`~calbench.jobs.image_manifest`: ``image_manifest_job`` (the images of an ``imagefolder`` source);
* :mod:`~calbench.jobs.models`: ``train_job``; :mod:`~calbench.jobs.model_dump`: ``dump_model_job``;
  :mod:`~calbench.jobs.model_shifts`: ``dump_model_shifts_job`` (train/pretrained sources, torch);
* :mod:`~calbench.jobs.calibrate`: ``calibrate_job``; :mod:`~calbench.jobs.evaluate`: ``evaluate_job``;
* :mod:`~calbench.jobs.tables`: ``aggregate_job``, ``write_runtime_table``, ``write_paper_comparison``;
* :mod:`~calbench.jobs.reliability`: ``reliability_job``; :mod:`~calbench.jobs.simplex`: ``simplex_job``;
  :mod:`~calbench.jobs.critical_difference`: ``critical_difference_job`` (figures, one module each so that a
  figure job's code inputs are what it draws);
* :mod:`~calbench.jobs.studies`: ``learning_curve_job``, ``learning_curve_summary_job``.

The computing and drawing these jobs call is in :mod:`calbench.report`.
"""
