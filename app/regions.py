"""Map a provider's region spelling to a continent, for grouping regions in filters."""

from __future__ import annotations

import re
from functools import lru_cache

CONTINENTS = (
    "North America",
    "South America",
    "Europe",
    "Asia",
    "Oceania",
    "Middle East",
    "Africa",
)

_CODE_TO_CONTINENT = {
    "NA": "North America",
    "SA": "South America",
    "EU": "Europe",
    "AS": "Asia",
    "OC": "Oceania",
    "AF": "Africa",
}

_COUNTRY_TO_CONTINENT = {
    **dict.fromkeys(["US", "CA", "MX", "USA"], "North America"),
    **dict.fromkeys(["BR", "AR", "CL", "CO"], "South America"),
    **dict.fromkeys(
        [
            "GB",
            "UK",
            "DE",
            "FR",
            "NL",
            "SE",
            "FI",
            "NO",
            "IS",
            "IT",
            "ES",
            "PL",
            "CH",
            "IE",
            "BE",
            "AT",
            "CZ",
            "PT",
            "DK",
            "RO",
            "BG",
            "HU",
            "UA",
            "RS",
            "LT",
            "LV",
            "EE",
            "GR",
            "HR",
            "SK",
            "SI",
            "LU",
        ],
        "Europe",
    ),
    **dict.fromkeys(
        ["JP", "KR", "CN", "HK", "TW", "SG", "IN", "ID", "TH", "VN", "MY", "PH", "KZ"], "Asia"
    ),
    **dict.fromkeys(["AU", "NZ"], "Oceania"),
    **dict.fromkeys(["AE", "IL", "SA", "QA", "TR", "BH"], "Middle East"),
    **dict.fromkeys(["ZA", "NG", "KE", "EG"], "Africa"),
}

# Ordered: the first pattern that matches the lower-cased region wins.
_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        r"\b(us|usa|na|northamerica|canada|ca|mx|virginia|ohio|oregon|texas|utah|iowa|"
        r"california|montreal|toronto|tor\d|nyc\d|sfo\d|atl\d|ny\d|east coast|west coast)\b|"
        r"^(us|ca|na|northamerica)[-_]|eastus|westus|centralus|southcentralus|northcentralus|"
        r"canada",
        "North America",
    ),
    (r"^(sa|southamerica)[-_]|brazil|chile|^br[-_]|saopaulo", "South America"),
    (r"^(me|il)[-_]|uae|qatar|israel|dubai|jeddah|riyadh|^me-|middle", "Middle East"),
    (r"^(af)[-_]|southafrica|johannesburg", "Africa"),
    (r"^(au|aus|oc)[-_]|australia|sydney|melbourne|newzealand", "Oceania"),
    (
        r"^(ap|asia|in|jp|kr|sg)[-_]|asia|japan|korea|india|singapore|tokyo|osaka|seoul|"
        r"mumbai|hongkong|taiwan|jakarta|\bin\d\b|\bin2\b",
        "Asia",
    ),
    (
        r"^(eu|europe|uk|fr|de|fin|it|no|nl|se|ch|pl|es|is)[-_]|europe|france|germany|"
        r"london|paris|frankfurt|amsterdam|stockholm|helsinki|finland|iceland|norway|"
        r"netherlands|sweden|switzerland|italy|spain|poland|ireland|uksouth|ukwest|"
        r"northeurope|westeurope|\bams\d|\blon\d|\bfra\d",
        "Europe",
    ),
)


@lru_cache(maxsize=4096)  # ingest asks for the same few hundred regions again and again
def continent_for_region(region: str) -> str | None:
    """Best-effort continent for a region name; None when it cannot be told."""
    text = region.strip()
    if not text:
        return None
    parts = [p.strip() for p in re.split(r"[,/]", text) if p.strip()]
    # vast: "State, CC, Continent"; primeintellect: "CC/site"
    if len(parts) >= 2 and parts[-1].upper() in _CODE_TO_CONTINENT:
        return _CODE_TO_CONTINENT[parts[-1].upper()]
    for part in parts:
        if part.upper() in _COUNTRY_TO_CONTINENT:
            return _COUNTRY_TO_CONTINENT[part.upper()]
    lowered = text.lower().replace("_", "-")  # "UTAH_USA": make words separable
    for pattern, continent in _PATTERNS:
        if re.search(pattern, lowered):
            return continent
    return None
