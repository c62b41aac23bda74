"""A fake model provider for the agent tests: the Anthropic Messages API and OpenAI's Chat
Completions and Responses APIs (streaming included), with a scripted conversation. It runs
in the tests' internet namespace, so real agent CLIs in boxes reach it over the network
like a real provider, and records every request (path, key, body) as a JSON line.

The script: an instruction containing `WRITE <path> <word>` gets a tool call writing
<word> to <path> (the agent's own write/file tool, or for Codex a JavaScript `exec` calling
apply_patch), then, once the tool result comes back,
the answer `DONE <word>`; any other instruction gets the answer `FAKE-ANSWER`.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "FAKE-ANSWER"
_WRITE = re.compile(r"WRITE (\S+) (\w+)")


def _texts(value: Any) -> str:
    """Every string inside a request body, joined: where the instruction and the tool
    results are, whatever the API's shape."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_texts(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(_texts(v) for v in value.values())
    return ""


def _tools(body: dict[str, Any]) -> dict[str, set[str]]:
    """Each offered tool's name and its parameters' names, whatever the API's shape.
    Codex offers its tools in an `additional_tools` input item, grouped in namespaces."""
    offered = list(body.get("tools") or [])
    for item in body.get("input") if isinstance(body.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            offered += item.get("tools") or []
    tools: dict[str, set[str]] = {}
    while offered:
        tool = offered.pop()
        if tool.get("type") == "namespace":
            offered += tool.get("tools") or []
            continue
        fn = tool.get("function") or tool
        schema = fn.get("input_schema") or fn.get("parameters") or {}
        tools[fn.get("name") or ""] = set(schema.get("properties") or {})
    return tools


def plan(body: dict[str, Any], messages: list[Any]) -> tuple[str, dict[str, Any] | None, str]:
    """("text", None, answer) or ("tool", {"name", "input"}, "") for this request. An
    instruction with SLOW in it is answered slowly (see Handler.slow)."""
    history = _texts(messages)
    tools = _tools(body)
    wanted = _WRITE.search(history)
    if wanted and tools and f"DONE {wanted[2]}" not in history:
        answered = any(
            isinstance(m, dict)
            and (
                m.get("role") == "tool"
                or m.get("type")
                in ("function_call_output", "custom_tool_call_output", "tool_result")
                or (
                    isinstance(m.get("content"), list)
                    and any(
                        isinstance(c, dict) and c.get("type") == "tool_result" for c in m["content"]
                    )
                )
            )
            for m in messages
        )
        if not answered:
            name = next(
                (t for t in tools if t.lower() in ("write", "write_file", "create_file")), None
            )
            path, word = wanted[1], wanted[2]
            if name is None and "exec" in tools and "apply_patch" in _texts(body.get("input")):
                # Codex's one freeform tool runs JavaScript that calls its nested tools:
                # apply_patch is how Codex writes files.
                patch = f"*** Begin Patch\n*** Add File: {path}\n+{word}\n*** End Patch\n"
                return (
                    "tool",
                    {"name": "exec", "code": f"await tools.apply_patch({json.dumps(patch)});"},
                    "",
                )
            if name:
                # Each agent names the file parameter its own way (file_path, filePath,
                # path) and refuses the others: take the one its schema offers.
                key = next(
                    (k for k in ("file_path", "filePath", "path") if k in tools[name]), "path"
                )
                args = {key: path, "content": word + "\n"}
                return "tool", {"name": name, "input": args}, ""
        return "text", None, f"DONE {wanted[2]}"
    return "text", None, ANSWER


def sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return "".join(out).encode()


def anthropic(body: dict[str, Any]) -> tuple[bytes, str]:
    kind, tool, text = plan(body, body.get("messages", []))
    model = body.get("model", "fake")
    if kind == "tool":
        assert tool is not None
        block = {
            "type": "tool_use",
            "id": "toolu_fake1",
            "name": tool["name"],
            "input": tool["input"],
        }
        stop = "tool_use"
    else:
        block = {"type": "text", "text": text}
        stop = "end_turn"
    usage = {"input_tokens": 10, "output_tokens": 5}
    if not body.get("stream"):
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        return json.dumps(message).encode(), "application/json"
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }
    if kind == "tool":
        opened = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        opened = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": text}
    return sse(
        [
            ("message_start", start),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": opened},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    ), "text/event-stream"


def chat(body: dict[str, Any]) -> tuple[bytes, str]:
    kind, tool, text = plan(body, body.get("messages", []))
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body.get("model", "fake"),
    }
    if kind == "tool":
        assert tool is not None
        call = {
            "index": 0,
            "id": "call_fake1",
            "type": "function",
            "function": {"name": tool["name"], "arguments": json.dumps(tool["input"])},
        }
        delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        delta, finish = {"role": "assistant", "content": text}, "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if not body.get("stream"):
        message = {k: v for k, v in delta.items() if k != "tool_calls" or v}
        if kind == "tool":
            message["tool_calls"] = [
                {k: v for k, v in delta["tool_calls"][0].items() if k != "index"}
            ]
        return json.dumps(
            {
                **base,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        ).encode(), "application/json"
    return sse(
        [
            (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
            (
                None,
                {
                    **base,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                    "usage": usage,
                },
            ),
            (None, "[DONE]"),
        ]
    ), "text/event-stream"


def responses(body: dict[str, Any]) -> tuple[bytes, str]:
    items = body.get("input") if isinstance(body.get("input"), list) else [body.get("input", "")]
    kind, tool, text = plan(body, items)
    if kind == "tool" and "code" in (tool or {}):
        assert tool is not None
        item: dict[str, Any] = {
            "type": "custom_tool_call",
            "id": "ctc_fake1",
            "call_id": "call_fake1",
            "name": tool["name"],
            "input": tool["code"],
            "status": "completed",
        }
    elif kind == "tool":
        assert tool is not None
        item = {
            "type": "function_call",
            "id": "fc_fake1",
            "call_id": "call_fake1",
            "name": tool["name"],
            "arguments": json.dumps(tool["input"]),
            "status": "completed",
        }
    else:
        item = {
            "type": "message",
            "id": "msg_fake",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    response = {
        "id": "resp_fake",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": body.get("model", "fake"),
        "output": [item],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    if not body.get("stream"):
        return json.dumps(response).encode(), "application/json"
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "response": {**response, "status": "in_progress", "output": []},
            },
        ),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
    ]
    if kind == "text":
        events.append(
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_fake",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": text,
                },
            )
        )
    events += [
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]
    return sse(events), "text/event-stream"


ROUTES = {"/v1/messages": anthropic, "/v1/chat/completions": chat, "/v1/responses": responses}


class Handler(BaseHTTPRequestHandler):
    log_path = ""
    lock = threading.Lock()

    def log_message(self, *args: object) -> None:
        pass

    def _record(self, body: Any) -> None:
        entry = {
            "t": time.time(),
            "method": self.command,
            "path": self.path,
            "key": self.headers.get("x-api-key") or self.headers.get("authorization", ""),
            "body": body,
        }
        with self.lock, open(self.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def do_GET(self) -> None:
        self._record(None)
        path, _, query = self.path.partition("?")
        if path.endswith("/stream"):
            self.stream(int(query.partition("events=")[2] or 100))
        elif path.endswith("/models"):
            data = {
                "object": "list",
                "data": [
                    {"id": "fake-model", "object": "model", "type": "model", "display_name": "Fake"}
                ],
            }
            self._send(200, json.dumps(data).encode(), "application/json")
        else:
            self._send(404, b'{"error": "not found"}', "application/json")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"raw": raw.decode(errors="replace")}
        self._record(body)
        path = self.path.split("?")[0]
        route = next((fn for suffix, fn in ROUTES.items() if path.endswith(suffix)), None)
        if path.endswith("/count_tokens"):
            self._send(200, b'{"input_tokens": 10}', "application/json")
        elif route is None:
            self._send(
                404,
                b'{"error": {"type": "not_found", "message": "no such route"}}',
                "application/json",
            )
        elif "SLOW" in _texts(body.get("messages") or body.get("input") or []):
            self.slow()
        else:
            data, ctype = route(body)
            self._send(200, data, ctype)

    def stream(self, events: int) -> None:
        """`events` token events as fast as they can go, each written on its own (for the
        benchmarks' streaming throughput); the stream ends with the connection."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        event = sse([("content_block_delta", {"type": "text_delta", "text": "token " * 8})])
        for _ in range(events):
            self.wfile.write(event)
            self.wfile.flush()

    def slow(self) -> None:
        """A stream that starts at once and then only keeps alive for two minutes: an agent
        that waits on its model, for the tests that stop runs."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        start = {
            "type": "message_start",
            "message": {
                "id": "msg_slow",
                "type": "message",
                "role": "assistant",
                "model": "fake",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        }
        try:
            self.wfile.write(sse([("message_start", start)]))
            for _ in range(60):
                self.wfile.flush()
                time.sleep(2)
                self.wfile.write(sse([("ping", {"type": "ping"})]))
        except OSError:
            pass

    def _send(self, status: int, data: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    Handler.log_path = sys.argv[2]
    server = ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Handler)
    if len(sys.argv) > 4:  # a certificate and its key: the provider speaks HTTPS
        import ssl

        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(sys.argv[3], sys.argv[4])
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    server.serve_forever()
