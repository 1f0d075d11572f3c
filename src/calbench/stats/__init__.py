"""The statistics of calbench's tables, ``calbench recommend`` and the figures, below :mod:`calbench.report` (which
draws and writes them): what a resample draws (:mod:`~calbench.stats.resampling`), every method's paired resamples
of one source (:mod:`~calbench.stats.draws`), intervals and tests against the best or a reference
(:mod:`~calbench.stats.paired`), the noise floor of calibration-error estimators (:mod:`~calbench.stats.noise_floor`)
and the Friedman test with critical differences over sources (:mod:`~calbench.stats.ranks`). Import the modules;
this package imports nothing."""
