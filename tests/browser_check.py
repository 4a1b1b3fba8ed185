"""Say plainly, before pytest runs, whether the browser tests will run or be skipped."""

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")

if CHROMIUM.exists():
    print(f"browser tests: will run with {CHROMIUM}")
else:
    print(
        "browser tests: SKIPPED, Chromium is not installed at /usr/bin/chromium "
        "(apt-get install chromium chromium-driver; .ci/run installs it)"
    )
