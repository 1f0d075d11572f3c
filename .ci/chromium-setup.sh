#!/usr/bin/env bash
# Headless Chromium (Debian's package `chromium`) for tests/workflow/test_report_browser.py, which opens the HTML report in
# it (called by .ci/run). Exit status 0 only when chromium is in place; .ci/run tolerates a failure, and the test
# then skips with a message.
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
if [[ $(id -u) -ne 0 ]]; then
    echo "chromium-setup: chromium is missing and not root: cannot apt-get install" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q chromium
command -v chromium >/dev/null 2>&1
