#!/usr/bin/env python3
"""A scripted model for driving the agent hosts' real CLIs on 127.0.0.1, with no login.

It speaks the four wire formats the hosts use: Anthropic Messages (Claude Code), OpenAI
Responses (Codex), OpenAI Chat Completions (opencode, Copilot CLI) and Gemini generateContent
(Gemini CLI), streaming or not. The script is a JSON file: {"steps": [STEP, ...]}, where a step is
{"command": "...", ...extra tool arguments} (a shell tool call) or {"text": "..."} (a final
answer). The step a request gets is the number of tool results already in its conversation,
so a host that retries or asks side questions (titles, summaries) never skips a step; a
request that offers no shell tool gets a short text answer.

Every request body is appended to LOG (one JSON object a line: path and body), so a test can
read the tool result the next request carries: what the model would read.

Usage: model_server.py SCRIPT LOG PORT_FILE   (prints nothing; writes the port to PORT_FILE)
"""

import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT, LOG, PORT_FILE = sys.argv[1], sys.argv[2], sys.argv[3]
LOCK = threading.Lock()

SHELL_TOOLS = ("Bash", "bash", "shell", "shell_command", "exec_command",
               "run_shell_command", "local_shell")


def steps():
    with open(SCRIPT) as f:
        return json.load(f)["steps"]


def log(path, body):
    with LOCK, open(LOG, "a") as f:
        f.write(json.dumps({"path": path, "body": body}) + "\n")


def step_for(results):
    script = steps()
    return script[results] if results < len(script) else {"text": "done"}


def tool_args(name, step):
    """The arguments of host tool `name` for a scripted step."""
    args = {k: v for k, v in step.items() if k not in ("command", "text")}
    command = step["command"]
    if name == "shell":
        return {"command": ["bash", "-lc", command], **args}
    if name == "exec_command":
        return {"cmd": command, **args}
    if name == "local_shell":
        return {"command": ["bash", "-lc", command], **args}
    if name in ("Bash", "bash"):
        return {"command": command, "description": "scripted", **args}
    return {"command": command, **args}


# ---- Anthropic Messages --------------------------------------------------------------------

def anthropic(body):
    tools = [t.get("name") for t in body.get("tools", [])]
    shell = next((t for t in tools if t in SHELL_TOOLS), None)
    results = sum(1 for m in body.get("messages", []) if isinstance(m.get("content"), list)
                  for c in m["content"] if c.get("type") == "tool_result")
    step = step_for(results) if shell else {"text": "ok"}
    if "command" in step:
        block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": shell,
                 "input": tool_args(shell, step)}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": step["text"]}
        stop = "end_turn"
    message = {"id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant",
               "model": body.get("model", "claude"), "content": [block], "stop_reason": stop,
               "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10}}
    if not body.get("stream"):
        return "json", message
    start = dict(message, content=[], stop_reason=None)
    events = [("message_start", {"type": "message_start", "message": start})]
    if block["type"] == "tool_use":
        events.append(("content_block_start", {"type": "content_block_start", "index": 0,
                       "content_block": dict(block, input={})}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta",
                                 "partial_json": json.dumps(block["input"])}}))
    else:
        events.append(("content_block_start", {"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": block["text"]}}))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events.append(("message_delta", {"type": "message_delta",
                   "delta": {"stop_reason": stop, "stop_sequence": None},
                   "usage": {"output_tokens": 10}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return "sse", events


# ---- OpenAI Responses (Codex) ----------------------------------------------------------------

def responses(body):
    tools = [t.get("name") or t.get("type") for t in body.get("tools", [])]
    shell = next((t for t in tools if t in SHELL_TOOLS), None)
    results = sum(1 for i in body.get("input", []) if isinstance(i, dict)
                  and i.get("type") in ("function_call_output", "local_shell_call_output",
                                        "custom_tool_call_output"))
    step = step_for(results) if shell else {"text": "ok"}
    rid = "resp_" + uuid.uuid4().hex[:20]
    if "command" in step:
        item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:20],
                "call_id": "call_" + uuid.uuid4().hex[:20], "name": shell,
                "arguments": json.dumps(tool_args(shell, step)), "status": "completed"}
    else:
        item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:20], "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": step["text"], "annotations": []}]}
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 20}
    response = {"id": rid, "object": "response", "status": "completed", "output": [item],
                "usage": usage, "model": body.get("model", "gpt")}
    events = [
        ("response.created", {"type": "response.created",
                              "response": dict(response, status="in_progress", output=[])}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done",
                                       "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]
    return "sse", events


# ---- OpenAI Chat Completions (opencode) ----------------------------------------------------

def chat(body):
    tools = [t.get("function", {}).get("name") for t in body.get("tools", [])]
    shell = next((t for t in tools if t in SHELL_TOOLS), None)
    results = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    step = step_for(results) if shell else {"text": "ok"}
    cid = "chatcmpl-" + uuid.uuid4().hex[:20]
    model = body.get("model", "gpt")
    if "command" in step:
        delta = {"role": "assistant", "content": None, "tool_calls": [{
            "index": 0, "id": "call_" + uuid.uuid4().hex[:20], "type": "function",
            "function": {"name": shell, "arguments": json.dumps(tool_args(shell, step))}}]}
        finish = "tool_calls"
    else:
        delta = {"role": "assistant", "content": step["text"]}
        finish = "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    if not body.get("stream"):
        message = dict(delta)
        if "tool_calls" in message:
            for call in message["tool_calls"]:
                call.pop("index", None)
        return "json", {"id": cid, "object": "chat.completion", "model": model,
                        "choices": [{"index": 0, "message": message,
                                     "finish_reason": finish}], "usage": usage}
    chunks = [
        {"id": cid, "object": "chat.completion.chunk", "model": model,
         "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"id": cid, "object": "chat.completion.chunk", "model": model,
         "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
    ]
    return "sse", [(None, c) for c in chunks] + [(None, "[DONE]")]


# ---- Gemini generateContent ----------------------------------------------------------------

def gemini(body, stream):
    decls = [d.get("name") for t in body.get("tools", [])
             for d in t.get("functionDeclarations", t.get("function_declarations", []))]
    shell = next((t for t in decls if t in SHELL_TOOLS), None)
    results = sum(1 for c in body.get("contents", []) for p in c.get("parts", [])
                  if "functionResponse" in p)
    step = step_for(results) if shell else {"text": "ok"}
    if "command" in step:
        part = {"functionCall": {"name": shell, "args": tool_args(shell, step)}}
    else:
        part = {"text": step["text"]}
    reply = {"candidates": [{"content": {"role": "model", "parts": [part]},
                             "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10,
                               "totalTokenCount": 20}}
    if stream:
        return "sse", [(None, reply)]
    return "json", reply


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_json({"data": [], "models": []})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        log(self.path, body)
        if path.endswith("/count_tokens"):
            return self.send_json({"input_tokens": 10})
        if path.endswith("/messages"):
            kind, payload = anthropic(body)
        elif path.endswith("/responses"):
            kind, payload = responses(body)
        elif path.endswith("/chat/completions"):
            kind, payload = chat(body)
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            kind, payload = gemini(body, ":streamGenerateContent" in path)
        elif ":countTokens" in path:
            return self.send_json({"totalTokens": 10})
        else:
            return self.send_json({})
        if kind == "json":
            return self.send_json(payload)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for event, data in payload:
            text = data if isinstance(data, str) else json.dumps(data)
            frame = (f"event: {event}\n" if event else "") + f"data: {text}\n\n"
            self.wfile.write(frame.encode())
            self.wfile.flush()
        self.close_connection = True

    def send_json(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.rename(PORT_FILE + ".tmp", PORT_FILE)
    server.serve_forever()


if __name__ == "__main__":
    main()
