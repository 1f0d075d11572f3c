# The HTML report's first page (`snakemake --report`, `calbench report`): the answer of the finished run (the
# recommendation per source, the summary table, the key figures; calbench.cli.report.front_page_rst), then
# workflow/report/workflow.rst. Written to .snakemake/ only when a report is being made.
import sys

from calbench.cli.report import front_page_rst

REPORT_DESCRIPTION = Path(workflow.basedir) / "workflow" / "report" / "workflow.rst"

if "--report" in sys.argv:
    _front_page = Path(".snakemake") / "calbench_front_page.rst"
    _front_page.parent.mkdir(exist_ok=True)
    _front_page.write_text(front_page_rst(Path.cwd(), REPORT_DESCRIPTION.read_text()))

    report: str(_front_page.resolve())

else:

    report: str(REPORT_DESCRIPTION)
