"""Region spellings of every provider map to a continent, or to None when they cannot be told."""

from __future__ import annotations

import pytest

from app.regions import continent_for_region


@pytest.mark.parametrize(
    ("region", "continent"),
    [
        ("Texas, US, NA", "North America"),
        (", US, NA", "North America"),
        ("France, FR, EU", "Europe"),
        ("Québec, CA, NA", "North America"),
        ("us-east-1", "North America"),
        ("eastus", "North America"),
        ("westeurope", "Europe"),
        ("europe-central-1", "Europe"),
        ("eu-north1", "Europe"),
        ("asia-south-1", "Asia"),
        ("ap-northeast-1", "Asia"),
        ("australia-east-1", "Oceania"),
        ("me-west-1", "Middle East"),
        ("US/us-midwest-1", "North America"),
        ("AU/australia-east-1", "Oceania"),
        ("East Coast (NY2)", "North America"),
        ("FIN-03", "Europe"),
        ("ca-montreal-3", "North America"),
        ("tor1", "North America"),
        ("UTAH_USA", "North America"),
        ("CANADA", "North America"),
        ("IN2", "Asia"),
        ("it-fr2", "Europe"),
        ("unspecified", None),
        ("", None),
    ],
)
def test_continent(region: str, continent: str | None) -> None:
    assert continent_for_region(region) == continent
