"""A scripted model on loopback, so the real Codex, OpenCode and Claude Code CLIs run fully offline in tests.

`ScriptedModel` is an HTTP server on 127.0.0.1 (ephemeral port, background threads) that answers, in three wire
dialects from the same scripts (each dialect one module of `dialects/`, behind one interface, so another API's
dialect is one more module):
- `POST /agents/<name>/v1/responses` (Codex): a Responses API Server-Sent Events stream in the form Codex accepts
  (docs/providers/codex.md, checked against the real binary in `tests/harness/`);
- `POST /agents/<name>/v1/chat/completions` (OpenCode, through its bundled `@ai-sdk/openai-compatible`): a Chat
  Completions stream of `data:` chunks ended by `data: [DONE]` (docs/providers/opencode.md);
- `POST /agents/<name>/v1/messages` (Claude Code, whose ANTHROPIC_BASE_URL is the agent's base URL without `/v1`):
  an Anthropic Messages stream of named events; a call of a deferred MCP tool is preceded by the `ToolSearch` call
  that loads it, as a real model does, and `count_tokens` and the non-streaming model check take no step
  (`dialects/messages.py`).
Each agent has its own base URL (the same for every dialect) and its own script, so one server serves several
private provider homes. A script is a queue of steps; every model request consumes one step:

- `Message(text, phase=None)`: one assistant message; `phase` is "commentary" or "final_answer" and reaches
  the agentMessage item unchanged.
- `Response(items, usage)`: several output items (messages and tool calls) in one response, e.g. commentary then
  final, reporting `usage` (`Usage(input, output, cached)`) in the dialect's own words.
- `ToolCall(name, arguments, namespace="mcp__wardian")`: a function call in the namespace form Codex needs to
  run an MCP tool (a flat `mcp__server__tool` name is answered with "unsupported call"); `call_id` is generated.
  In the chat dialect the same step calls OpenCode's `<server>_<tool>` function (`wardian_send_message`).
- `Fail(message)`: `response.failed`, so the turn fails with "stream disconnected before completion: <message>".
- `Disconnect(partial_text=None)`: the stream ends before `response.completed` (optionally after a partial message).
- `HttpError(status=500)`: a plain HTTP error with a JSON body instead of a stream.
- `Hold(delta)`: streams a partial message delta, then blocks until the test calls `release()` (the message is
  then completed), the client goes away (Codex drops the stream on `turn/steer` and `turn/interrupt`), the
  server stops, or `timeout_s` passes (then `response.failed`). A `Hold` is single-use.
- a callable `(request_body: dict) -> Step`, called with the parsed request, so a script can react to what Codex
  sent (for example, read the previous `function_call_output` and act on it).

In the chat dialect a `Message`'s phase is dropped (OpenCode has none), `Fail` is an HTTP 400 (a stream cannot fail
in this dialect), `Disconnect` ends the stream without a finish reason, and a released `Hold`'s message is its delta
followed by the rest of its `text` (chunks can only add to what was streamed).

When a script runs out, the request is answered with `Message(EXHAUSTED_TEXT)` and recorded as exhausted instead
of hanging. Every request is recorded per agent (`RecordedRequest`: JSON body, headers without its key headers,
the fingerprint of the key it carried, receive time, which step answered it); helpers read user/developer texts,
offered tools and tool outputs.

An agent may require a key (`AgentScript.require_key(key)`): a request of that agent that does not carry exactly
that key, as `Authorization: Bearer <key>` or `x-api-key: <key>`, is answered with HTTP 401 in its dialect's error
form, before any step is consumed, and recorded as `unauthorized`. So each agent's own credential can be proven to
reach the model (`RecordedRequest.carried(key)`), and a rejected one produces the provider's real 401 path. A
WebSocket upgrade (Codex's built-in OpenAI provider tries one first) is answered 426, and Codex falls back to POST.

Invariants:
- The server binds 127.0.0.1 only and never makes outbound connections.
- No key is ever stored (neither `Authorization` nor `x-api-key`): only whether an Authorization header was present,
  and a fingerprint of the key (`key_fingerprint`), so a failing assertion never prints a key.
- A client that disconnects mid-stream ends that response quietly; it is not an error.
- A step that raises, an unknown agent, a bad path or an unreadable body is answered with an HTTP error and
  appended to `ScriptedModel.errors`; leaving the `with` block raises `ScriptedModelError` if any were recorded
  (unless another exception is already propagating), so a broken script cannot pass silently.

Layout: `steps` (what a script holds), `reading` (the dialect-neutral request readers), `dialects/` (one module per
wire dialect), `requests` (the request log and the readers that dispatch on the dialect), `agents` (one agent's
script and log), `server` (the HTTP handler) and `model` (the server's lifecycle).
"""

from wardian_harness.models.scripted_model.agents import AgentScript
from wardian_harness.models.scripted_model.model import ScriptedModel
from wardian_harness.models.scripted_model.reading import FunctionCallOutput, developer_texts, user_texts
from wardian_harness.models.scripted_model.requests import (
    RecordedRequest,
    function_call_outputs,
    key_fingerprint,
    offered_tools,
)
from wardian_harness.models.scripted_model.steps import (
    CHAT_TITLE_PROMPT,
    EXHAUSTED_TEXT,
    TITLE_PROMPT,
    TITLE_TEXT,
    Disconnect,
    Fail,
    Hold,
    HoldOutcome,
    HttpError,
    Message,
    Response,
    ScriptedModelError,
    Step,
    ToolCall,
    Usage,
)

__all__ = [
    "CHAT_TITLE_PROMPT",
    "EXHAUSTED_TEXT",
    "TITLE_PROMPT",
    "TITLE_TEXT",
    "AgentScript",
    "Disconnect",
    "Fail",
    "FunctionCallOutput",
    "Hold",
    "HoldOutcome",
    "HttpError",
    "Message",
    "RecordedRequest",
    "Response",
    "ScriptedModel",
    "ScriptedModelError",
    "Step",
    "ToolCall",
    "Usage",
    "developer_texts",
    "function_call_outputs",
    "key_fingerprint",
    "offered_tools",
    "user_texts",
]
