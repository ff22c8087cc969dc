"""A small real HTTP server that speaks enough of the OpenAI API for tests: chat completions and embeddings.

    with StubOpenAI() as stub:                 # listens on 127.0.0.1, a free port
        stub.script = [500, '{"answer": "x"}']  # next replies: an HTTP 500, then this content
        client = OpenAI(base_url=stub.base_url, api_key="test")

- POST /v1/chat/completions answers with the next item of `script` (a str is the
  message content, an int an HTTP error status, a callable gets the request body
  and returns either), or `default` when the script is empty. It echoes the model
  name `echo_model` (as real APIs echo a dated snapshot) and reports usage.
- POST /v1/embeddings returns deterministic, deliberately unnormalised vectors
  (sha256 of the text), `dimensions` long if asked, else `embed_dim`.

Every request body is kept in `requests` (path, body). Run it alone with
`python tests/stub_openai.py` to poke at it by hand.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StubOpenAI:
    """An OpenAI-compatible server on 127.0.0.1 with scripted answers."""

    def __init__(self, echo_model: str = "qwen-plus-2025-09-11", embed_dim: int = 16):
        self.echo_model = echo_model
        self.embed_dim = embed_dim
        self.script: list[Any] = []
        self.default: str = '{"ok": true}'
        self.requests: list[tuple[str, dict]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """Return the /v1 base URL clients should use."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> StubOpenAI:
        """Start serving in a daemon thread; return self."""
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                # Tests read `requests`; the default stderr access log is noise.
                pass

            def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                stub.requests.append((self.path, body))
                if self.path.endswith("/chat/completions"):
                    status, payload = stub._chat(body)
                elif self.path.endswith("/embeddings"):
                    status, payload = 200, stub._embeddings(body)
                else:
                    status, payload = (
                        404,
                        {"error": {"message": f"no route {self.path}", "type": "not_found"}},
                    )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)

    def __enter__(self) -> StubOpenAI:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def chat_requests(self) -> list[dict]:
        """Return the bodies of the chat requests received so far."""
        return [b for p, b in self.requests if p.endswith("/chat/completions")]

    def _chat(self, body: dict) -> tuple[int, dict]:
        """Return (status, payload) for one chat completion request."""
        item: Any = self.script.pop(0) if self.script else self.default
        if callable(item):
            item = item(body)
        if isinstance(item, int):
            return item, {"error": {"message": f"stub error {item}", "type": "server_error", "code": item}}
        words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        done = len(item.split())
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.echo_model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": item}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": words, "completion_tokens": done, "total_tokens": words + done},
        }

    def _embeddings(self, body: dict) -> dict:
        """Return the embeddings payload: sha256-derived vectors, scaled so they are not unit length."""
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dim = int(body.get("dimensions") or self.embed_dim)
        data = []
        for i, text in enumerate(texts):
            seed = hashlib.sha256(text.encode()).digest() * (dim // 32 + 1)
            data.append(
                {"object": "embedding", "index": i, "embedding": [(b - 127.5) / 10 for b in seed[:dim]]}
            )
        # Real endpoints may return rows out of order; reverse them so clients must sort by index.
        return {
            "object": "list",
            "data": data[::-1],
            "model": f"{body['model']}-echo",
            "usage": {"prompt_tokens": sum(len(t.split()) for t in texts), "total_tokens": 0},
        }


if __name__ == "__main__":
    with StubOpenAI() as server:
        print(server.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
