"""Browser-test configuration: register the `browser` marker (select with -m browser)."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: end-to-end tests in headless Chromium")
