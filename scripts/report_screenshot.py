"""The report's first screen as a reader sees it: ``results/report.html`` (or the page given) in headless Chromium at
1,400 × 900, saved as ``docs/report_first_screen.png`` (or the path given). ``make report`` runs it after
``calbench report``; where Chromium is missing it says so and leaves the picture as it is.

    python scripts/report_screenshot.py [results/report.html] [docs/report_first_screen.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the DevTools driver the browser test uses

from browser import chromium, look  # noqa: E402


def main(argv: list[str]) -> int:
    page = Path(argv[0]) if argv else Path("results/report.html")
    picture = Path(argv[1]) if len(argv) > 1 else REPO / "docs" / "report_first_screen.png"
    if chromium() is None:
        print("report_screenshot: chromium is not installed (Debian: apt-get install chromium): the screenshot "
              f"{picture} is left as it is", file=sys.stderr)
        return 0
    if not page.is_file():
        print(f"report_screenshot: {page}: no report; run calbench report first", file=sys.stderr)
        return 1
    picture.write_bytes(look(page, 1400, 900)["screenshot"])
    print(f"report_screenshot: {picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
