from pathlib import Path

import pytest

from tests.helpers import SEEDS


@pytest.fixture
def seed_reports() -> list[Path]:
    return SEEDS


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
