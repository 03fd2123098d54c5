import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def testdata():
    return ROOT / "testdata"


@pytest.fixture
def cli():
    path = os.environ.get("TSJOIN_CLI", str(ROOT / "target" / "debug" / "tsjoin-cli"))
    if not os.path.exists(path):
        pytest.skip("tsjoin-cli not built (cargo build -p tsjoin-cli)")
    return path


@pytest.fixture
def readme():
    return (ROOT / "README.md").read_text()
