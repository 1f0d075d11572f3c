# The HTML report's first page (`calbench report`, `snakemake --report`): `calbench report` writes the answer of the
# finished run (the recommendation per source, the summary table, the key figures; calbench.cli.report.front_page_rst)
# followed by workflow/report/workflow.rst into the run's .snakemake/ folder and names that file in the environment
# variable CALBENCH_FRONT_PAGE; without it (a plain `snakemake --report`) the page is workflow/report/workflow.rst.
# Nothing is written while the workflow is parsed.
import os


report: os.environ.get("CALBENCH_FRONT_PAGE") or str(Path(workflow.basedir) / "workflow" / "report" / "workflow.rst")
