# Shared fixtures for the libzs Python tests: the build directory (ZS_BUILD_DIR,
# set by python/run-tests.sh) for tests that need the zs binary or headers.
import os

import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def build_dir():
    d = os.environ.get("ZS_BUILD_DIR")
    if not d:
        lib = os.environ.get("LIBZS_LIBRARY", "")
        d = os.path.dirname(lib) if lib else ""
    if not d or not os.path.isfile(os.path.join(d, "zs")):
        pytest.skip("no build directory with zs (set ZS_BUILD_DIR)")
    return d
