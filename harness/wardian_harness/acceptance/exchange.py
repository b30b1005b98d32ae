"""The scripted exchange: the offline stand-in for a model in the acceptance and the demo, with the texts it asks and
answers. The sender calls `followup_task`, then `receive_messages` (which wakes with `provider_context_available`
when the app pushes the reply into its conversation) and answers only if its final request holds the reply; the
receiver answers."""

from __future__ import annotations

import json
from typing import Any

from wardian_harness.acceptance.settings import RECEIVER
from wardian_harness.models.scripted_model import AgentScript, Message, ToolCall, function_call_outputs, user_texts
from wardian_harness.models.scripted_model.reading import role_texts

__all__ = ["LATER_REQUEST", "PLAIN_REQUEST", "RECALL_ANSWER", "SENDER_ANSWER", "WARMUP_ANSWER", "WARMUP_PROMPT",
           "WORKER_ANSWER", "WORKER_QUESTION", "script_exchange", "script_recall"]

PLAIN_REQUEST = ("Please find out from worker what the capital of France is, wait for worker's answer, "
                 "and then tell me what worker said.")
LATER_REQUEST = "What did worker tell you earlier? Answer from memory."
WORKER_QUESTION = "What is the capital of France? Answer in one sentence."
WORKER_ANSWER = "The capital of France is Paris."
SENDER_ANSWER = "worker said: The capital of France is Paris."
RECALL_ANSWER = "Earlier, worker told me: The capital of France is Paris."
WARMUP_PROMPT = "Hello, are you there?"
WARMUP_ANSWER = "Yes, ready when you are."


def _receipt_of(body: dict[str, Any]) -> dict[str, Any]:
    """The tool result's JSON, as each agent shows it to its model: Codex after "Output:", Gemini CLI 0.61.0 inside
    `<untrusted_context>` tags, the others bare."""
    text = function_call_outputs(body)[-1].text
    text = text.split("Output:\n", 1)[-1] if "Output:" in text else text
    return json.loads(text[text.index("{"):text.rindex("}") + 1])


def _seen(body: dict[str, Any]) -> str:
    """What a request shows the model: its user texts, tool results and, for Claude Code, the `role: "system"`
    messages a push folded into a running turn arrives as."""
    return "\n".join([*user_texts(body), *role_texts(body, "system"), *(o.text for o in function_call_outputs(body))])


def script_exchange(lead: AgentScript, worker: AgentScript, receipts: list[dict[str, Any]]) -> None:
    """The sender assigns, waits for the pushed reply and answers only when its request holds that reply."""

    def after_followup(body: dict[str, Any]) -> ToolCall:
        receipts.append(_receipt_of(body))
        return ToolCall("receive_messages", {"timeout_ms": 60000})

    def final(body: dict[str, Any]) -> Message:
        seen = _seen(body)
        ask = receipts[-1]["request_id"] if receipts else "?"
        if WORKER_ANSWER not in seen or ask not in seen:
            raise AssertionError(f"the sender's final request does not hold the reply to {ask}")
        return Message(SENDER_ANSWER, phase="final_answer")

    lead.add(ToolCall("followup_task", {"target": RECEIVER, "message": WORKER_QUESTION}), after_followup, final)
    worker.add(Message(WORKER_ANSWER, phase="final_answer"))


def script_recall(lead: AgentScript) -> None:
    """The later task: answer only from the resumed conversation's history, never from the new input."""

    def recall(body: dict[str, Any]) -> Message:
        history = json.dumps(body.get("input") or body.get("messages") or [])
        new_input = "\n".join(t for t in user_texts(body) if LATER_REQUEST in t)
        if WORKER_ANSWER not in history or WORKER_ANSWER in new_input:
            raise AssertionError("the earlier result is not in the resumed history (or was given again)")
        return Message(RECALL_ANSWER, phase="final_answer")

    lead.add(recall)
