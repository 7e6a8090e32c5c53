"""Keys that name a fact's field: the metadata keys of a key-value memory written as text,
and the facts-file keys of each extraction field (docs/reference.md#stores)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memdiag.text import normalize_key

# Metadata keys that name the fact a record holds (a key-value memory written as text), its
# value, and the broader category some libraries file it under.
SUBJECT_KEYS = ("key", "fact_key", "subject", "field", "attribute", "slot")
VALUE_KEYS = ("value", "fact_value", "object")
CATEGORY_KEYS = ("category", "categories", "topic")


def first_text(meta: Mapping[str, Any], keys: tuple[str, ...], numbers: bool = False) -> str | None:
    """The first usable string under ``keys`` (a list's first string; numbers if asked)."""
    if not meta:
        return None
    for k in keys:
        v = meta.get(k)
        if isinstance(v, (list, tuple)):
            v = next((x for x in v if isinstance(x, str) and x.strip()), None)
        if isinstance(v, str) and v.strip():
            return v.strip()
        if numbers and isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
    return None


# Facts-file keys (normalized) that name an extraction field.
FIELD_SYNONYMS: dict[str, tuple[str, ...]] = {
    "name": ("name", "full_name", "first_name", "username", "preferred_name", "姓名", "名字"),
    "birthday": ("birthday", "birth_date", "birthdate", "date_of_birth", "dob", "生日"),
    "allergy": ("allergy", "allergies", "food_allergy", "food_allergies", "allergic_to", "过敏"),
    "medical": ("medical", "medical_condition", "condition", "medication", "medications"),
    "prohibition": ("prohibition", "prohibitions", "never", "dont", "do_not", "禁止"),
    "timezone": ("timezone", "time_zone", "tz", "时区"),
    "units": ("units", "unit", "unit_system", "measurement_units", "单位"),
    "diet": ("diet", "dietary_restriction", "dietary_restrictions", "饮食"),
    "location": ("location", "city", "home_city", "lives_in", "home", "residence", "住址", "城市"),
    "job": ("job", "occupation", "profession", "role", "work", "职业", "工作"),
    "preference": ("preference", "preferences", "likes", "偏好"),
}
_FIELD_BY_KEY = {k: f for f, keys in FIELD_SYNONYMS.items() for k in keys}
_KEY_PREFIX = re.compile(r"^(user|profile|my|the_user|用户)_?")


def field_for_key(key: str) -> str:
    """The extraction field a facts-file or metadata key names (else the normalized key)."""
    norm = normalize_key(key)
    if norm in _FIELD_BY_KEY:
        return _FIELD_BY_KEY[norm]
    stripped = _KEY_PREFIX.sub("", norm)
    return _FIELD_BY_KEY.get(stripped, norm)
