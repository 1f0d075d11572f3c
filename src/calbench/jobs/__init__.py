"""The workflow's jobs as plain functions, one module per stage: Snakemake's scripts call them, so does
``python -m calbench job dump|calibrate|evaluate``. Each job takes its spec (:mod:`~calbench.jobs.spec`: a frozen
dataclass of the files it reads and writes and the settings it depends on, built by the stage's
``spec(config, **wildcards)`` from the resolved config), reads the files of the stage before it and writes its outputs
atomically; :mod:`~calbench.jobs.paths` holds the output path templates, and the rules declare their files and params
from the same spec.

* :mod:`~calbench.jobs.sources`: ``dump_source_job`` (synthetic, imported and downloaded sources), ``draw_split_job``,
  ``dump_source_shifts_job``;
* :mod:`~calbench.jobs.image_manifest`: ``image_manifest_job`` (the images of an ``imagefolder`` source);
* :mod:`~calbench.jobs.models`: ``train_job``; :mod:`~calbench.jobs.model_dump`: ``dump_model_job``;
  :mod:`~calbench.jobs.model_shifts`: ``dump_model_shifts_job`` (train/pretrained sources, torch; their specs in
  :mod:`~calbench.jobs.model_specs`, without torch);
* :mod:`~calbench.jobs.perturbed_cal`: ``dump_perturbed_cal_job`` (the perturbed calibration set, torch);
* :mod:`~calbench.jobs.calibrate`: ``calibrate_job``; :mod:`~calbench.jobs.evaluate`: ``evaluate_job``;
* :mod:`~calbench.jobs.tables`: ``aggregate_job``, ``write_runtime_table``, ``write_paper_comparison``;
* :mod:`~calbench.jobs.reliability`: ``reliability_job``; :mod:`~calbench.jobs.simplex`: ``simplex_job``;
  :mod:`~calbench.jobs.critical_difference`: ``critical_difference_job`` (figures, one module each so that a
  figure job's code inputs are what it draws);
* :mod:`~calbench.jobs.studies`: ``learning_curve_job``, ``learning_curve_summary_job``;
* :mod:`~calbench.jobs.shift`, :mod:`~calbench.jobs.ood`, :mod:`~calbench.jobs.ood_model`,
  :mod:`~calbench.jobs.label_shift`: the shifted, out-of-distribution and label-shifted sets' jobs.

The computing and drawing these jobs call is in :mod:`calbench.report`.
"""
