"""Property test of the argument validators (docs/reliability.md row P4): a validator never raises anything but a
typed WardianError, and whatever it accepts satisfies the schema, unchanged.

For the eight MCP tools the validator is the MCP server's (`wardian.mcp._calls.tool_params`: the app's
`parse_params` plus the server-supplied session) and the schema is the tool's published `inputSchema`, exactly,
with no leniency; for every app method it is `parse_params` against the params model's own JSON Schema.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import ALL_HEALTH_CHECKS
from wardian import errors
from wardian.mcp._calls import tool_params
from wardian.model import MAX_MESSAGE_BYTES
from wardian.protocol.methods import METHODS, parse_params
from wardian.protocol.tools import TOOLS, TOOLS_BY_NAME, ToolSpec

EDGE_STRINGS = ["", " ", "\t\n", "*", "all", "@everyone", "a,b", "a b", "x?", "lead", "Lead", "wardian",
                "\x00", "a\x00b", "\ud800", "x" * 257, "x" * (MAX_MESSAGE_BYTES + 1), "é" * (MAX_MESSAGE_BYTES // 2),
                "é" * (MAX_MESSAGE_BYTES // 2) + "e", "ask_0000000000000000000000000000", "msg_1", "cur1_AAAA",
                "done", "DONE", "blocked", "failed", "success", "background", "attached", "k=v", "=v",
                "12345678-1234-1234-1234-123456789abc", "wsn1_abcd_1_secret", "\u202eevil", "✓ ok\r\n"]
scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.integers(-2, 60_002)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40) | st.sampled_from(EDGE_STRINGS))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
EXTRA_KEYS = ["sender", "from", "session_id", "broadcast", "params", ""]


def field_values(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values for one property: mostly plausible for its declared type (bounds, edges), else anything."""
    types: set[Any] = set()
    for declared in [prop.get("type"), *(alt.get("type") for alt in prop.get("anyOf", []))]:
        types |= set(declared) if isinstance(declared, list) else {declared}
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


def session_values() -> st.SearchStrategy[str]:
    """WARDIAN_SESSION_ID as the MCP server reads it from its environment: always a string."""
    return st.sampled_from(["wsn1_abcd_1_secret", "", "x" * 256, "x" * 257]) | st.text(max_size=10)


def check(method: str, params: Any, schema: dict[str, Any]) -> None:
    """`parse_params(method, params)` refuses with a typed error, or accepts a value `schema` admits, unchanged."""
    if params is None:
        params = {}  # JSON-RPC `params: null`: no arguments
    try:
        model = parse_params(method, params)
    except errors.WardianError as exc:
        assert_typed(exc)
        return
    validator(json.dumps(schema, sort_keys=True)).validate(params)
    assert_unchanged(model, params)


def check_tool(spec: ToolSpec, args: dict[str, Any], session: str) -> None:
    """The MCP server's validator refuses with a typed error, or accepts arguments the published inputSchema
    admits, unchanged (the session is the server's, never an argument)."""
    try:
        params, model = tool_params(spec, args, session)
    except errors.WardianError as exc:
        assert_typed(exc)
        return
    validator(json.dumps(spec.input_schema, sort_keys=True)).validate(args)
    assert params == {**args, "session": session}
    assert_unchanged(model, params)


def assert_typed(refused: errors.WardianError) -> None:
    assert refused.code != "internal_error"
    assert refused.delivery == errors.Delivery.NOT_ADMITTED


def assert_unchanged(model: Any, params: dict[str, Any]) -> None:
    """Nothing was coerced on the way, and accepted text keeps the app's text rules."""
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


@pytest.mark.parametrize("spec", TOOLS, ids=[t.name for t in TOOLS])
@settings(max_examples=500, deadline=None, suppress_health_check=ALL_HEALTH_CHECKS, database=None)
@given(data=st.data())
def test_tool_arguments_are_accepted_only_when_they_satisfy_the_published_schema(spec: ToolSpec,
                                                                                 data: st.DataObject) -> None:
    """P4 [CI 500 examples per tool]."""
    args = data.draw(arguments(spec.input_schema["properties"]))
    check_tool(spec, args, data.draw(session_values()))


@pytest.mark.parametrize("spec", TOOLS, ids=[t.name for t in TOOLS])
def test_null_is_accepted_as_the_default_exactly_where_the_schema_admits_it(spec: ToolSpec) -> None:
    """B15, B16, B17: a null limit, timeout_ms, cursor or ack_cursor means its default; the published schema admits
    null for exactly those arguments, and the validator refuses a null required one with a typed error."""
    schema = validator(json.dumps(spec.input_schema, sort_keys=True))
    required = set(spec.input_schema["required"])
    base = {"target": "bob", "message": "hi", "request_id": "ask_1", "status": "done", "approval_id": "apr_1",
            "decision": "allow"}
    for name in spec.input_schema["properties"]:
        args = {**{k: base[k] for k in required}, name: None}
        admitted = schema.is_valid(args)
        assert admitted == (name not in required), (spec.name, name)
        if admitted:
            _, model = tool_params(spec, args, "wsn1_abcd_1_secret")
            assert getattr(model, name) is None
        else:
            with pytest.raises(errors.WardianError) as exc:
                tool_params(spec, args, "wsn1_abcd_1_secret")
            assert_typed(exc.value)
            assert exc.value.field == name


@pytest.mark.parametrize("name", ["cursor", "ack_cursor"])
def test_an_empty_cursor_is_refused_as_the_schema_says(name: str) -> None:
    """The inputSchema gives cursors minLength 1; the MCP server refuses "" as invalid_cursor naming the field."""
    spec = TOOLS_BY_NAME["receive_messages"]
    assert not validator(json.dumps(spec.input_schema, sort_keys=True)).is_valid({name: ""})
    with pytest.raises(errors.InvalidCursor) as exc:
        tool_params(spec, {name: ""}, "wsn1_abcd_1_secret")
    assert (exc.value.field, exc.value.allowed) == (name, "a cursor returned by an earlier receive")


@pytest.mark.parametrize("method", sorted(METHODS))
@settings(max_examples=100, deadline=None, suppress_health_check=ALL_HEALTH_CHECKS, database=None)
@given(data=st.data())
def test_app_method_params_are_accepted_only_when_they_satisfy_the_models_schema(method: str,
                                                                                 data: st.DataObject) -> None:
    """P4 for every method of the control socket (the CLI's and the MCP tools' app methods)."""
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
