"""Scenario validation: good inputs load, bad ones are rejected naming the field and the rule."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from mots.economics import ErrorModel, Scenario


def _base() -> dict[str, Any]:
    return {
        "types": [
            {"name": "small", "count": 10, "data_size": 50, "cost": 0.1},
            {"name": "large", "count": 5, "data_size": 300, "cost": 0.6},
        ],
        "error_model": {"d_gamma2": 2000.0, "sigma2": 0.0, "eps0": 0.0},
        "utility": {"kind": "power", "scale": 40, "exponent": 16},
        "eps_req": 1.35,
    }


def test_issue_form_loads() -> None:
    """The form in the issue loads, with arrays in type order."""
    sc = Scenario.model_validate(_base())
    np.testing.assert_array_equal(sc.counts, [10, 5])
    np.testing.assert_allclose(sc.sizes, [50, 300])
    np.testing.assert_allclose(sc.costs, [0.1, 0.6])
    assert sc.n_clients == 15 and sc.n_types == 2 and sc.eps_req == 1.35


def test_d_and_gamma2_are_combined() -> None:
    """{d, gamma2} is accepted as d·γ²."""
    assert ErrorModel.model_validate({"d": 784, "gamma2": 2.5}).d_gamma2 == pytest.approx(1960.0)


def test_absent_or_infinite_requirement_means_none() -> None:
    """No ε_req and ε_req = +∞ both mean no requirement."""
    data = _base()
    del data["eps_req"]
    assert math.isinf(Scenario.model_validate(data).eps_req_value)
    data["eps_req"] = float("inf")
    assert Scenario.model_validate(data).eps_req is None


def test_utility_defaults_to_paper_power_law() -> None:
    """Without a utility, U = 40·ε^−16 (Section 4.A.2)."""
    data = _base()
    del data["utility"]
    u = Scenario.model_validate(data).utility
    assert u.value(2.0) == pytest.approx(40 * 2.0**-16)


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (("types", 0, "data_size"), 0, "types.0.data_size"),
        (("types", 0, "data_size"), -5, "types.0.data_size"),
        (("types", 1, "count"), 0, "types.1.count"),
        (("types", 0, "cost"), float("nan"), "types.0.cost"),
        (("types", 0, "cost"), -1.0, "types.0.cost"),
        (("error_model", "d_gamma2"), 0.0, "error_model.d_gamma2"),
        (("error_model", "sigma2"), -0.1, "error_model.sigma2"),
        (("error_model", "eps0"), float("nan"), "error_model.eps0"),
        (("eps_req",), float("nan"), "eps_req"),
        (("eps_req",), -1.0, "eps_req"),
        (("utility", "exponent"), 0, "utility.power.exponent"),
    ],
)
def test_bad_values_name_field(path: tuple[Any, ...], value: Any, needle: str) -> None:
    """Each bad value is rejected with its field in the error location."""
    data = _base()
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValidationError) as info:
        Scenario.model_validate(data)
    locs = [".".join(str(p) for p in e["loc"]) for e in info.value.errors()]
    assert any(needle in loc for loc in locs), locs


def test_types_out_of_size_order() -> None:
    """D_i must be non-decreasing in type order (Section 2.A.2)."""
    data = _base()
    data["types"].reverse()
    with pytest.raises(ValidationError, match="non-decreasing data size"):
        Scenario.model_validate(data)


def test_duplicate_names_and_empty_types() -> None:
    """Names are unique; at least one type."""
    data = _base()
    data["types"][1]["name"] = "small"
    with pytest.raises(ValidationError, match="used twice"):
        Scenario.model_validate(data)
    data["types"] = []
    with pytest.raises(ValidationError, match="types"):
        Scenario.model_validate(data)


def test_unknown_fields_and_mixed_error_forms() -> None:
    """Typos are not silently ignored; d_gamma2 with d/gamma2 is ambiguous."""
    data = _base()
    data["types"][0]["datasize"] = 3
    with pytest.raises(ValidationError, match="datasize"):
        Scenario.model_validate(data)
    with pytest.raises(ValidationError, match="not both"):
        ErrorModel.model_validate({"d_gamma2": 1.0, "d": 2, "gamma2": 3})
    with pytest.raises(ValidationError, match="together"):
        ErrorModel.model_validate({"d": 2})
