"""The output paths of the workflow's jobs, one template each: the rules (workflow/rules/*.smk) and
``python -m calbench dump|calibrate|evaluate`` both fill them (``DUMP.format(source=...)``)."""

DUMP = "results/dumps/{source}.h5"
SHIFTS = "results/shifts/{source}.h5"
PERTURBED_CAL = "results/perturbed_cal/{source}.h5"
MODEL = "results/models/{source}/model.pt"
SPLIT = "results/splits/{source}/seed{seed}.test_rows.npy"
CALIBRATED = "results/calibrated/{source}/{method}/seed{seed}.h5"
CALIBRATOR = "results/calibrators/{source}/{method}/seed{seed}.safetensors"
METRICS = "results/metrics/{source}/{method}/seed{seed}.json"
CALIBRATE_BENCHMARK = "benchmarks/calibrate/{source}/{method}/seed{seed}.tsv"
EVALUATE_BENCHMARK = "benchmarks/evaluate/{source}/{method}/seed{seed}.tsv"
METRICS_LONG = "results/tables/metrics_long.csv"
