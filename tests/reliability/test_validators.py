"""Property test of the argument validators (reliability-matrix P4): `wardian.protocol.app.parse_params`
never raises anything but a typed WardianError, and whatever it accepts satisfies the schema, unchanged.

For the seven MCP tools the schema is the tool's published `inputSchema` (plus the server-supplied
`session`); for the other app methods it is the params model's own JSON Schema.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wardian import errors
from wardian.model import MAX_MESSAGE_BYTES
from wardian.protocol.app import METHODS, parse_params
from wardian.protocol.tools import TOOLS, ToolSpec

EDGE_STRINGS = ["", " ", "\t\n", "*", "all", "@everyone", "a,b", "a b", "x?", "lead", "Lead", "wardian",
                "\x00", "a\x00b", "\ud800", "x" * 257, "x" * (MAX_MESSAGE_BYTES + 1), "é" * (MAX_MESSAGE_BYTES // 2),
                "é" * (MAX_MESSAGE_BYTES // 2) + "e", "ask_0000000000000000000000000000", "msg_1", "cur1_AAAA",
                "done", "DONE", "blocked", "failed", "success", "background", "attached", "k=v", "=v",
                "12345678-1234-1234-1234-123456789abc", "wsn1_abcd_1_secret", "\u202eevil", "✓ ok\r\n"]
scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.integers(-2, 60_002)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40) | st.sampled_from(EDGE_STRINGS))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
NULL_MEANS_DEFAULT = frozenset({"limit", "timeout_ms", "cursor", "ack_cursor"})
EXTRA_KEYS = ["sender", "from", "session_id", "broadcast", "params", ""]


def field_values(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values for one property: mostly plausible for its declared type (bounds, edges), else anything."""
    types = {prop.get("type")} | {alt.get("type") for alt in prop.get("anyOf", [])}
    plausible: st.SearchStrategy[Any] = st.none()
    if "integer" in types:
        lo, hi = prop.get("minimum", -5), prop.get("maximum", 100_000)
        plausible |= st.integers(lo - 2, hi + 2) | st.sampled_from([lo, hi, lo - 1, hi + 1, True, 1.5])
    if "string" in types or "enum" in prop:
        plausible |= st.sampled_from(EDGE_STRINGS + list(prop.get("enum", []))) | st.text(max_size=20)
    if "array" in types:
        plausible |= st.lists(st.sampled_from(EDGE_STRINGS) | st.text(max_size=10), max_size=3)
    return plausible | plausible | values


def arguments(props: dict[str, dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    known = st.fixed_dictionaries({}, optional={name: field_values(prop) for name, prop in props.items()})
    extra = st.dictionaries(st.sampled_from(EXTRA_KEYS) | st.text(max_size=8), values, max_size=1)
    return st.one_of(known, known, known, st.builds(lambda a, b: {**a, **b}, known, extra))


def session_values() -> st.SearchStrategy[Any]:
    return st.sampled_from(["wsn1_abcd_1_secret", "", "x" * 257]) | values


def check(method: str, params: Any, schema: dict[str, Any]) -> None:
    if params is None:
        params = {}  # JSON-RPC `params: null`: no arguments
    refused: errors.WardianError | None = None
    try:
        model = parse_params(method, params)
    except errors.WardianError as exc:
        refused = exc
    if refused is not None:
        assert refused.code != "internal_error"
        assert refused.delivery == errors.Delivery.NOT_ADMITTED
        return
    # Accepted: the value is what the schema allows, and nothing was coerced on the way. Two documented
    # leniencies of the validators against the published tool schemas: a null optional field means its
    # default (matrix §3.5), and an empty cursor passes validation to be refused by the store as
    # invalid_cursor (tests/mcp/test_mcp_bad_input.py); the schemas declare neither.
    validator(json.dumps(schema, sort_keys=True)).validate(
        {k: v for k, v in params.items()
         if not (k in NULL_MEANS_DEFAULT and (v is None or (k.endswith("cursor") and v == "")))})
    dumped = model.model_dump(exclude_unset=True)
    assert json.dumps(dumped, sort_keys=True) == json.dumps(params, sort_keys=True)
    for text_field in ("message",):
        if isinstance(params.get(text_field), str):
            text = params[text_field]
            assert text.strip()
            assert "\x00" not in text
            assert len(text.encode("utf-8")) <= MAX_MESSAGE_BYTES


@functools.cache
def validator(schema: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema))


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    schema = json.loads(json.dumps(spec.input_schema))
    if METHODS[spec.method].needs_session:
        schema["properties"]["session"] = {"type": "string", "minLength": 1, "maxLength": 256}
        schema["required"] = [*schema.get("required", []), "session"]
    else:  # list_agents: an operator may list without a session
        schema["properties"]["session"] = {"type": ["string", "null"], "minLength": 1, "maxLength": 256}
    return schema


@pytest.mark.parametrize("spec", TOOLS, ids=[t.name for t in TOOLS])
@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_tool_arguments_are_accepted_only_when_they_satisfy_the_published_schema(spec: ToolSpec,
                                                                                 data: st.DataObject) -> None:
    """reliability-matrix P4 [CI 500 examples per tool]."""
    args = data.draw(arguments(spec.input_schema["properties"]))
    args["session"] = data.draw(session_values())
    check(spec.method, args, tool_schema(spec))


OTHER_METHODS = sorted(set(METHODS) - {t.method for t in TOOLS})


@pytest.mark.parametrize("method", OTHER_METHODS)
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_app_method_params_are_accepted_only_when_they_satisfy_the_models_schema(method: str,
                                                                                 data: st.DataObject) -> None:
    """reliability-matrix P4 for the operator methods of the control socket (no MCP tool)."""
    schema = METHODS[method].params.model_json_schema()
    params: Any = data.draw(arguments(schema.get("properties", {})) | values)
    check(method, params, schema)


@settings(max_examples=300, deadline=None, database=None)
@given(method=st.text(max_size=30) | st.sampled_from(["send", "ask", "message/ask"]), params=values)
def test_unknown_and_retired_methods_fail_with_a_typed_error(method: str, params: Any) -> None:
    """Any method name: a known method validates, anything else is method_not_found or retired_operation."""
    if method in METHODS:
        return
    with pytest.raises(errors.WardianError) as exc:
        parse_params(method, params)
    assert exc.value.code in ("method_not_found", "retired_operation")
