"""Every workflow job is a fresh Python process, so what its module imports is paid by each of the ~250 jobs
of a run: heavy libraries are imported where they are used, not by the job modules."""

import subprocess
import sys

import pytest

# (what a job process imports, libraries it must not import at start-up)
JOBS = {
    "calibrate": ("import calbench.jobs.calibrate, calbench.methods as m; m.available()",
                  ["torch", "scipy.optimize", "scipy.stats", "sklearn", "matplotlib", "pandas"]),
    "evaluate": ("import calbench.jobs.evaluate", ["torch", "scipy.optimize", "scipy.stats", "sklearn", "matplotlib"]),
    "reliability": ("import calbench.jobs.reliability", ["torch", "scipy.stats", "sklearn"]),
    "simplex": ("import calbench.jobs.simplex", ["torch", "scipy.stats", "sklearn"]),
    "critical_difference": ("import calbench.jobs.critical_difference", ["torch", "scipy.stats", "sklearn"]),
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_job_module_does_not_import_heavy_libraries(job):
    statement, forbidden = JOBS[job]
    code = f"import sys; {statement}; print(' '.join(m for m in {forbidden!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], check=True, timeout=120, capture_output=True, text=True)
    assert result.stdout.split() == [], f"the {job} job imports {result.stdout.strip()} at start-up"
