"""Every service's OpenAPI document says everything a client needs (issue 17).

Each route answers a named schema (or a file), documents 401 where it takes a token and 422 where
it takes parameters or a body, every refusal's body is the problem+json schema, and every schema
property carries an example (its own, or one of the schema it belongs to).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from mots.platform.problems import PROBLEM_JSON
from services.market.core.config import Settings as MarketSettings
from services.market.main import create_app as market_app
from services.orchestration.core.config import Settings as OrchestrationSettings
from services.orchestration.main import create_app as orchestration_app
from services.pricing.core.config import Settings as PricingSettings
from services.pricing.main import create_app as pricing_app

METHODS = {"get", "post", "put", "delete", "patch"}
FILES = {"application/octet-stream"}
PROBLEM = {"$ref": "#/components/schemas/Problem"}


def _app(service: str, tmp: Path) -> FastAPI:
    if service == "market":
        db = f"sqlite:///{tmp / 'market.db'}"
        return market_app(MarketSettings(database_url=db, artifact_dir=str(tmp)))
    if service == "orchestration":
        return orchestration_app(OrchestrationSettings(database_url=f"sqlite:///{tmp / 'o.db'}"))
    return pricing_app(PricingSettings())


def _operations(openapi: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", op)
        for path, item in openapi["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def route_problems(openapi: dict[str, Any]) -> list[str]:
    """What each route leaves undocumented (empty: nothing)."""
    out = []
    for name, op in _operations(openapi):
        responses = op["responses"]
        ok = [code for code in responses if code.startswith("2")]
        if len(ok) != 1:
            out.append(f"{name}: {len(ok)} 2xx responses")
            continue
        content = responses[ok[0]].get("content", {})
        schema = content.get("application/json", {}).get("schema", {})
        no_content = ok[0] == "204" and not content
        if not ("$ref" in schema or FILES & set(content) or no_content):
            out.append(f"{name}: the {ok[0]} answer is not a named schema: {schema}")
        for code in ("401", "403"):
            if op.get("security") and code not in responses:
                out.append(f"{name}: takes a token but does not document {code}")
        if (op.get("parameters") or op.get("requestBody")) and "422" not in responses:
            out.append(f"{name}: takes input but does not document 422")
        for code, response in responses.items():
            if code[0] in "45" and response.get("content") != {PROBLEM_JSON: {"schema": PROBLEM}}:
                out.append(f"{name}: {code} is not documented as problem+json")
            if code[0] in "45" and len(response.get("description", "")) < 12:
                out.append(f"{name}: {code} does not say when it is answered")
    return out


def _has_examples(schema: dict[str, Any]) -> bool:
    return "examples" in schema or "example" in schema


def _documented(spec: dict[str, Any]) -> bool:
    """An example of its own, an enum, or a named schema (checked on its own) that it holds."""
    if _has_examples(spec) or "$ref" in spec or spec.get("enum") or "const" in spec:
        return True
    inner = [spec.get("items"), spec.get("additionalProperties"), *spec.get("anyOf", [])]
    return any(isinstance(s, dict) and "$ref" in s for s in inner)


def example_problems(openapi: dict[str, Any]) -> list[str]:
    """Schema properties with no example of their own or of their schema."""
    out = []
    for name, schema in openapi["components"]["schemas"].items():
        if _has_examples(schema) or schema.get("enum"):
            continue
        for prop, spec in schema.get("properties", {}).items():
            if not _documented(spec):
                out.append(f"{name}.{prop}")
    return out


@pytest.mark.parametrize("service", ["market", "pricing", "orchestration"])
def test_every_route_documents_its_answer_and_its_refusals(service: str, tmp_path: Path) -> None:
    openapi = _app(service, tmp_path).openapi()
    assert route_problems(openapi) == []


@pytest.mark.parametrize("service", ["market", "pricing", "orchestration"])
def test_every_schema_property_has_an_example(service: str, tmp_path: Path) -> None:
    openapi = _app(service, tmp_path).openapi()
    assert example_problems(openapi) == []


def _example_models() -> list[type[BaseModel]]:
    import mots.economics.scenario
    import mots.economics.utility
    import mots.platform.api
    import mots.platform.api.rounds
    import mots.platform.problems
    import services.orchestration.products

    modules = [
        mots.economics.scenario,
        mots.economics.utility,
        mots.platform.problems,
        mots.platform.api,
        mots.platform.api.rounds,
        services.orchestration.products,
    ]
    found = {
        cls
        for module in modules
        for cls in vars(module).values()
        if isinstance(cls, type)
        and issubclass(cls, BaseModel)
        and isinstance(cls.model_config.get("json_schema_extra"), dict)
    }
    return sorted(found, key=lambda c: c.__name__)


@pytest.mark.parametrize("model", _example_models(), ids=lambda c: c.__name__)
def test_every_example_is_a_valid_instance(model: type[BaseModel]) -> None:
    """A documented example validates as its model (examples do not drift from the schema)."""
    extra = model.model_config.get("json_schema_extra")
    assert isinstance(extra, dict)
    for example in extra["examples"]:
        model.model_validate(example)


def test_the_market_spec_shows_a_task_wherever_a_body_names_one(tmp_path: Path) -> None:
    """Issue 36: the task bodies carry a task file as their example, and each body that names a
    task (an enrolment, a registration, a bulk type) has an example in a task other than the
    default one, so a reader of the spec sees how to act in a second task."""
    schemas = _app("market", tmp_path).openapi()["components"]["schemas"]
    assert "name: digits" in schemas["TaskIn"]["examples"][0]["content"]
    assert "task" in schemas["BulkType"]["properties"]

    def tasks_of(examples: list[dict[str, Any]]) -> set[str]:
        named = {e.get("task") for e in examples}
        named |= {t.get("task") for e in examples for t in e.get("types", [])}
        return {t for t in named if t}

    for name in ("EnrolmentIn", "ClientRegistration", "BulkRegistration"):
        assert tasks_of(schemas[name]["examples"]) - {"fashion-mnist"}, name
    assert not tasks_of([{"name": "pi-07"}])  # the check can fail
