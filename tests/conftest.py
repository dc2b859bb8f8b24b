import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SEEDS = sorted(FIXTURES.glob("*.json"))


@pytest.fixture
def seed_reports() -> list[Path]:
    return SEEDS


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
