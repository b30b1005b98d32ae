// Wardian's eight tools inside Pi (docs/guide/pi.md#the-tools).
//
// Each tool is forwarded to one long-lived `wardian mcp serve` child over stdio (MCP, one JSON-RPC object per line),
// so a tool here has the MCP server's arguments, errors, attribution and limits exactly: the same code path. The
// tool table between the GENERATED markers is written from wardian's own (`wardian.protocol.tools.TOOLS`) by
// `scripts/gen_pi_extension.py`, and a test fails when it differs.
//
// Where the server's identity comes from: an app-owned agent's Pi gets the generation's session over a pipe whose
// descriptor `WARDIAN_PI_SESSION_FD` names (read once, then closed), and the command in `WARDIAN_PI_MCP_COMMAND`;
// a Pi a person runs (`wardian pi register`) reads `WARDIAN_HOME` and `WARDIAN_SESSION_ID` (`wardian agent env`), as
// `wardian mcp serve` would, and registers no tool without them. Either way these variables are removed from Pi's
// environment, so its bash tool never sees the session.
//
// Approvals: before a tool that changes what another agent sees, the `tool_call` hook asks the client to confirm
// ("Allow wardian's <tool>?"); an app-owned agent's app answers from the agent's `--approve-tools`. Under an asking
// policy (`WARDIAN_PI_APPROVALS=ask`) it also asks before Pi's own bash, edit and write ("Allow <tool>?", with the
// call's input as JSON), which the app hands to a person or the lead (docs/guide/approvals.md#pi).

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { closeSync, readFileSync } from "node:fs";

// BEGIN GENERATED tool table
const TOOLS = [
  {
    "name": "wait_agent",
    "title": "Wait for mailbox activity",
    "description": "Wait until your Wardian mailbox has unacknowledged activity (information, tasks or replies addressed to you), without reading, claiming or acknowledging anything. Returns at once if activity is already waiting; otherwise waits up to timeout_ms (default and maximum 60000; 0 checks immediately). The result carries no message body: call receive_messages next to read the records. An expired wait (timed_out: true) is a normal result and cancels nothing. Waiting never starts or interrupts any agent. If you and other agents wait for tasks that only you hold (each took a task of another and waits for its own), the wait ends at once with wake_reason \"deadlock\" and a deadlock object naming the agents and tasks: answer the tasks in its holding list with reply instead of waiting again.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "timeout_ms": {
          "type": [
            "integer",
            "null"
          ],
          "minimum": 0,
          "maximum": 60000,
          "default": 60000,
          "description": "How long to wait in milliseconds, 0..60000 (default 60000, also for null); 0 checks once and returns at once."
        }
      },
      "required": [],
      "additionalProperties": false
    }
  },
  {
    "name": "send_message",
    "title": "Send information to a peer",
    "description": "Send information to one peer agent: facts, status, answers. It does not start or interrupt the peer's turn and creates no obligation to reply. To ask a peer to do work, use followup_task instead. The receipt names the interaction id, the resolved target and the delivery reached: \"admitted\" (stored for the peer) or \"provider_visible\" (already in the peer's live conversation). If an error says delivery \"uncertain\", the message may have arrived: do not resend it automatically.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "target": {
          "type": "string",
          "minLength": 1,
          "maxLength": 256,
          "description": "The exact name or UUID of one peer agent (see list_agents). Broadcasts, lists and your own name are refused."
        },
        "message": {
          "type": "string",
          "minLength": 1,
          "maxLength": 65536,
          "description": "The text, kept exactly (Unicode, line breaks, punctuation); at most 65536 UTF-8 bytes."
        }
      },
      "required": [
        "target",
        "message"
      ],
      "additionalProperties": false
    }
  },
  {
    "name": "followup_task",
    "title": "Assign a task to a peer",
    "description": "Assign work to one peer agent. Returns at once with a receipt whose request_id (ask_...) identifies the task; it does not wait for the work. The peer completes the task with reply, and that reply reaches your mailbox as a record of kind \"reply\" with the same request_id: collect it with wait_agent, then receive_messages. Use send_message instead for information that needs no work. If an error says delivery \"uncertain\", the task may have been assigned: do not resend it automatically. With deadline_ms, the task fails (deadline_exceeded) if it is not answered in time, and you get that failure as its answer. A task you assign while you work on a task continues that task's chain; a chain too deep (task_depth_exceeded) or too long (chain_budget_exceeded) is refused: then finish your task yourself.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "target": {
          "type": "string",
          "minLength": 1,
          "maxLength": 256,
          "description": "The exact name or UUID of one peer agent (see list_agents). Broadcasts, lists and your own name are refused."
        },
        "message": {
          "type": "string",
          "minLength": 1,
          "maxLength": 65536,
          "description": "The text, kept exactly (Unicode, line breaks, punctuation); at most 65536 UTF-8 bytes."
        },
        "deadline_ms": {
          "type": [
            "integer",
            "null"
          ],
          "minimum": 1000,
          "maximum": 604800000,
          "description": "Optional: milliseconds from now, 1000..604800000 (1 second to 7 days), by which the task must be answered; then wardian ends it as failed (deadline_exceeded), interrupting the peer's turn that works on it. null or omitted: the team's default deadline, if any."
        }
      },
      "required": [
        "target",
        "message"
      ],
      "additionalProperties": false
    }
  },
  {
    "name": "receive_messages",
    "title": "Receive mailbox records",
    "description": "Read a batch of records addressed to you, oldest first: information (kind \"information\"), tasks (kind \"task\", with a request_id; new_work is true the one time a task is handed to you as new work) and replies to tasks you assigned (kind \"reply\", with the task's request_id and a status). Each result has a cursor. After handling the records, call receive_messages again with ack_cursor set to that cursor to acknowledge them; pass cursor instead to read further without acknowledging. Replaying a cursor returns the same records and repeats no work. limit is 1..100 records (default 20). An empty result cancels nothing; later messages and replies stay available.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "cursor": {
          "type": [
            "string",
            "null"
          ],
          "minLength": 1,
          "maxLength": 512,
          "description": "Continue reading after the batch this cursor (from an earlier receive_messages result) names, without acknowledging it."
        },
        "ack_cursor": {
          "type": [
            "string",
            "null"
          ],
          "minLength": 1,
          "maxLength": 512,
          "description": "Acknowledge the batch this cursor (from an earlier receive_messages result) names, once you have handled its records; acknowledged records are not returned again."
        },
        "limit": {
          "type": [
            "integer",
            "null"
          ],
          "minimum": 1,
          "maximum": 100,
          "default": 20,
          "description": "The most records to return, 1..100 (default 20, also for null)."
        },
        "timeout_ms": {
          "type": [
            "integer",
            "null"
          ],
          "minimum": 0,
          "maximum": 60000,
          "default": 0,
          "description": "If no record is pending, wait up to this many milliseconds for one, 0..60000 (default 0, also for null: return at once)."
        }
      },
      "required": [],
      "additionalProperties": false
    }
  },
  {
    "name": "reply",
    "title": "Reply to an assigned task",
    "description": "Complete a task that was assigned to you: give its request_id (ask_..., from the task record), a status of done, blocked or failed, and the result as message. The reply goes to the agent that assigned the task; a task takes one reply. Only tasks have a request_id: informational messages need no reply.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "request_id": {
          "type": "string",
          "minLength": 1,
          "maxLength": 128,
          "description": "The request_id (ask_...) of the task you are completing."
        },
        "status": {
          "type": "string",
          "enum": [
            "done",
            "blocked",
            "failed"
          ],
          "description": "done: finished; blocked: cannot proceed without help; failed: gave up."
        },
        "message": {
          "type": "string",
          "minLength": 1,
          "maxLength": 65536,
          "description": "The text, kept exactly (Unicode, line breaks, punctuation); at most 65536 UTF-8 bytes."
        }
      },
      "required": [
        "request_id",
        "status",
        "message"
      ],
      "additionalProperties": false
    }
  },
  {
    "name": "interrupt_agent",
    "title": "Interrupt a peer's current turn",
    "description": "Request interruption of one peer agent's current turn; the peer keeps its session and conversation. It fails with not_active when the peer has no active turn. It does not send a correction, pause the agent or stop its process: to change what a peer does, send_message or followup_task after interrupting.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "target": {
          "type": "string",
          "minLength": 1,
          "maxLength": 256,
          "description": "The exact name or UUID of one peer agent (see list_agents). Broadcasts, lists and your own name are refused."
        }
      },
      "required": [
        "target"
      ],
      "additionalProperties": false
    }
  },
  {
    "name": "list_agents",
    "title": "List peer agents",
    "description": "List the Wardian agents you can address: name, UUID, provider, host and status (off, starting, idle, active, errored, signed_out), and which of them is you (caller); deliveries counts, per agent UUID, tasks whose delivery is uncertain or was confirmed only by a lookup; hosts says which hosts are live (an agent on a host that is not live is offline: tasks for it wait). Use a name or UUID from here as target. Reading the list changes nothing.",
    "inputSchema": {
      "type": "object",
      "properties": {},
      "required": [],
      "additionalProperties": false
    }
  },
  {
    "name": "answer_approval",
    "title": "Answer a worker's approval",
    "description": "Answer a permission request (approval, apr_...) of an agent working on a task you assigned: Wardian sends you such a request as information from wardian, with what the agent asks to do and by when. decision \"allow\" lets the agent do it; \"deny\" refuses it, and reason (optional) tells the agent why. always (optional, with allow) also allows requests like it for the rest of the agent's session, when the agent offered that. Only the agent a request was sent to may answer it, and only once; an approval that already ended (answered by a person, expired, withdrawn) fails with approval_ended.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "approval_id": {
          "type": "string",
          "minLength": 5,
          "maxLength": 64,
          "pattern": "^apr_[0-9A-Za-z]+$",
          "description": "The approval's id (apr_...), from the request Wardian sent you."
        },
        "decision": {
          "type": "string",
          "enum": [
            "allow",
            "deny"
          ],
          "description": "allow: the agent may do what it asked; deny: it may not."
        },
        "reason": {
          "type": [
            "string",
            "null"
          ],
          "minLength": 1,
          "maxLength": 2000,
          "description": "Optional, with deny: why, told to the agent where its provider can carry it; kept with the approval."
        },
        "always": {
          "type": [
            "boolean",
            "null"
          ],
          "description": "Optional, with allow: allow requests like this one for the rest of the agent's session, when its provider offered that (else: once)."
        }
      },
      "required": [
        "approval_id",
        "decision"
      ],
      "additionalProperties": false
    }
  }
];
const ASKS: string[] = ["send_message", "followup_task", "reply", "interrupt_agent", "answer_approval"];
// END GENERATED tool table

type Json = any;
type Pending = { resolve: (value: Json) => void; reject: (error: Error) => void };

const PROTOCOL_VERSION = "2025-06-18";
const DEFAULT_COMMAND = ["wardian", "mcp", "serve"]; // `wardian pi register` writes the absolute command here

class McpServer {
  private child: ChildProcessWithoutNullStreams | null = null;
  private ready: Promise<void> | null = null;
  private pending = new Map<number, Pending>();
  private count = 0;
  private buffer = "";

  constructor(private command: string[], private env: Record<string, string>) {}

  start(): Promise<void> {
    if (this.ready === null) {
      this.ready = this.open().catch((error: Error) => {
        this.ready = null;
        throw error;
      });
    }
    return this.ready;
  }

  private async open(): Promise<void> {
    const child = spawn(this.command[0], this.command.slice(1), { env: this.env, stdio: ["pipe", "pipe", "inherit"] });
    this.child = child;
    this.buffer = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => this.read(chunk));
    const gone = () => {
      if (this.child === child) {
        this.child = null;
        this.ready = null;
      }
      for (const waiter of this.pending.values()) waiter.reject(new Error("wardian's MCP server ended"));
      this.pending.clear();
    };
    child.on("exit", gone);
    child.on("error", gone);
    await this.request("initialize", {
      protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "wardian-pi", version: "1" },
    });
    this.write({ jsonrpc: "2.0", method: "notifications/initialized" });
    await this.request("tools/list", {}); // the server announces itself to the app after its first listing
  }

  private read(chunk: string): void {
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, end).trim();
      this.buffer = this.buffer.slice(end + 1);
      if (!line) continue;
      let message: Json;
      try {
        message = JSON.parse(line);
      } catch {
        continue;
      }
      const waiter = typeof message.id === "number" ? this.pending.get(message.id) : undefined;
      if (waiter === undefined) continue;
      this.pending.delete(message.id);
      if (message.error) waiter.reject(new Error(String(message.error.message ?? "MCP error")));
      else waiter.resolve(message.result);
    }
  }

  private write(message: Json): void {
    if (this.child === null) throw new Error("wardian's MCP server is not running");
    this.child.stdin.write(JSON.stringify(message) + "\n");
  }

  private request(method: string, params: Json): Promise<Json> {
    const id = ++this.count;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      try {
        this.write({ jsonrpc: "2.0", id, method, params });
      } catch (error) {
        this.pending.delete(id);
        reject(error as Error);
      }
    });
  }

  async call(name: string, args: Json): Promise<Json> {
    await this.start();
    return this.request("tools/call", { name, arguments: args ?? {} });
  }

  close(): void {
    this.child?.stdin.end();
  }
}

const NATIVE_ASKS = ["bash", "edit", "write"];

function identity(): { session: string; home: string; command: string[]; announce: string; approvals: string } {
  const env = process.env;
  const g = globalThis as Json;
  if (g.__wardianPi === undefined) {
    let session = env.WARDIAN_SESSION_ID ?? "";
    const fd = env.WARDIAN_PI_SESSION_FD;
    if (fd) {
      session = readFileSync(Number(fd), "utf8");
      closeSync(Number(fd));
    }
    const command = env.WARDIAN_PI_MCP_COMMAND ? JSON.parse(env.WARDIAN_PI_MCP_COMMAND) : DEFAULT_COMMAND;
    g.__wardianPi = { session, home: env.WARDIAN_HOME ?? "", command, announce: env.WARDIAN_MCP_ANNOUNCE ?? "",
                      approvals: env.WARDIAN_PI_APPROVALS ?? "" };
    delete env.WARDIAN_MCP_ANNOUNCE;
    const names = ["WARDIAN_HOME", "WARDIAN_SESSION_ID", "WARDIAN_PI_SESSION_FD", "WARDIAN_PI_MCP_COMMAND",
                   "WARDIAN_PI_APPROVALS"];
    for (const name of names) {
      delete env[name];
    }
  }
  return g.__wardianPi;
}

export default function (pi: Json) {
  const { session, home, command, announce, approvals } = identity();
  if (!session || !home) return; // a person's Pi started without `wardian agent env`: not a wardian agent
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  if (home) env.WARDIAN_HOME = home;
  if (session) env.WARDIAN_SESSION_ID = session;
  if (announce) env.WARDIAN_MCP_ANNOUNCE = announce;
  const server = new McpServer(command, env);
  server.start().catch((error: Error) => console.error(`wardian: MCP server did not start: ${error.message}`));

  for (const tool of TOOLS) {
    pi.registerTool({
      name: tool.name,
      label: tool.title,
      description: tool.description,
      parameters: tool.inputSchema,
      async execute(_id: string, params: Json) {
        const result = await server.call(tool.name, params);
        const content = Array.isArray(result?.content) ? result.content : [];
        if (result?.isError) {
          throw new Error(content.map((part: Json) => String(part.text ?? "")).join("\n") || "wardian tool failed");
        }
        return { content, details: result?.structuredContent ?? {} };
      },
    });
  }

  pi.on("tool_call", async (event: Json, ctx: Json) => {
    if (approvals === "ask" && NATIVE_ASKS.includes(event.toolName)) {
      const ok = await ctx.ui.confirm(`Allow ${event.toolName}?`, JSON.stringify(event.input ?? {}));
      return ok ? undefined : { block: true, reason: `Permission denied: ${event.toolName} was not approved` };
    }
    if (!ASKS.includes(event.toolName)) return undefined;
    const ok = await ctx.ui.confirm(`Allow wardian's ${event.toolName}?`, JSON.stringify(event.input ?? {}));
    return ok ? undefined : { block: true, reason: `wardian's ${event.toolName} was not approved` };
  });

  pi.on("session_shutdown", async () => server.close());
}
