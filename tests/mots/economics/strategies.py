"""Hypothesis strategies for random market instances, shared by the economics tests."""

from __future__ import annotations

from hypothesis import strategies as st

from mots.economics import ClientType, ErrorModel, PowerUtility, Scenario
from mots.economics.utility import ExponentialUtility

sizes_st = st.floats(min_value=5.0, max_value=5000.0, allow_nan=False, allow_infinity=False)
d_gamma2_st = st.floats(min_value=10.0, max_value=1e5, allow_nan=False, allow_infinity=False)
sigma2_st = st.one_of(
    st.just(0.0), st.floats(min_value=1e-4, max_value=50.0, allow_nan=False, allow_infinity=False)
)


@st.composite
def error_models(draw: st.DrawFn, with_offset: bool = True) -> ErrorModel:
    """Random (dγ², σ², ε0)."""
    eps0 = draw(st.floats(min_value=0.0, max_value=2.0)) if with_offset else 0.0
    return ErrorModel(d_gamma2=draw(d_gamma2_st), sigma2=draw(sigma2_st), eps0=eps0)


@st.composite
def coalitions(draw: st.DrawFn, n_types: int, max_count: int = 30) -> list[int]:
    """A non-empty participation vector over ``n_types`` types."""
    k = draw(st.lists(st.integers(0, max_count), min_size=n_types, max_size=n_types))
    if sum(k) == 0:
        k[draw(st.integers(0, n_types - 1))] = draw(st.integers(1, max_count))
    return k


@st.composite
def scenarios(draw: st.DrawFn, max_types: int = 3, max_count: int = 6) -> Scenario:
    """A small random scenario (sizes sorted), any utility family, optional ε_req."""
    n = draw(st.integers(1, max_types))
    sizes = sorted(draw(st.lists(sizes_st, min_size=n, max_size=n)))
    per_sample = draw(st.floats(min_value=0.0, max_value=0.05))
    types = [
        ClientType(
            name=f"t{i}", count=draw(st.integers(1, max_count)), data_size=d, cost=per_sample * d
        )
        for i, d in enumerate(sizes)
    ]
    utility = draw(
        st.one_of(
            st.builds(
                PowerUtility,
                scale=st.floats(1.0, 100.0),
                exponent=st.floats(0.5, 16.0),
            ),
            st.builds(ExponentialUtility, scale=st.floats(1.0, 100.0), rate=st.floats(0.1, 5.0)),
        )
    )
    return Scenario(types=types, error_model=draw(error_models()), utility=utility)
