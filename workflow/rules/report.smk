# The description of Snakemake's own report (`snakemake --report`); calbench's report, the decision first, is
# `calbench report CONFIG` (calbench.cli.report), which reads the run's files directly.
REPORT_DESCRIPTION = Path(workflow.basedir) / "workflow" / "report" / "workflow.rst"


report: str(REPORT_DESCRIPTION)
