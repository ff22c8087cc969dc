"""The one seam to chat models: offline, live, record and replay, with provenance and usage.

    llm = connect()                      # "offline" unless MNEMO_LLM says otherwise
    llm = connect("live")                # Qwen Cloud (DashScope compatible mode) with DASHSCOPE_API_KEY
    llm = connect("live", base_url="http://localhost:8000/v1")   # any OpenAI-compatible endpoint, OPENAI_API_KEY
    llm = connect("record:runs/cassette.jsonl")   # live calls, each answer appended to the cassette
    llm = connect("replay:runs/cassette.jsonl")   # answers from the cassette only; a miss raises CassetteMiss

- offline: no network. `llm.offline` is True and the stages use their own
  deterministic heuristics; the object refuses model calls (LLMUnavailable).
- live: temperature 0, models by role (extract -> qwen-plus, judge -> qwen3-max,
  answer -> qwen-plus), overridable with `models={"judge": "..."}` or `models="one-for-all"`.
  A run that asks for live without a key fails; it never falls back to offline.
- record / replay: a JSONL cassette, one line per answered request, keyed by the
  sha256 of (model, rendered messages, schema, prompt version). The line keeps the
  model name the API echoed and the tokens it metered, so a replayed run reports the
  same models and usage as the recorded one.

This is the only module that imports `openai` (lazily, so offline and replay need
no extra package), and `settings()` is the only function that reads environment
variables: DASHSCOPE_API_KEY, OPENAI_API_KEY, MNEMO_BASE_URL and MNEMO_LLM.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from . import prompts
from .errors import CassetteMiss, ConfigError, LLMResponseError, LLMUnavailable

DASHSCOPE_BASE_URL = "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"
ROLE_MODELS = {"extract": "qwen-plus", "judge": "qwen3-max", "answer": "qwen-plus"}
MODES = ("offline", "live", "record", "replay")
JSON_MODES = ("json_schema", "json_object", "none")
OVERRIDES = ("models", "base_url", "api_key", "attempts", "backoff", "timeout", "run_id", "json_mode")


@dataclass(frozen=True)
class Settings:
    """What the environment says about endpoints, secrets and the default mode."""

    mode: str | None  # MNEMO_LLM
    base_url: str | None  # MNEMO_BASE_URL
    dashscope_key: str | None = field(default=None, repr=False)  # DASHSCOPE_API_KEY
    openai_key: str | None = field(default=None, repr=False)  # OPENAI_API_KEY


def settings() -> Settings:
    """Return the environment's settings; the only place mnemo reads environment variables."""
    env = os.environ
    return Settings(
        mode=env.get("MNEMO_LLM") or None,
        base_url=env.get("MNEMO_BASE_URL") or None,
        dashscope_key=env.get("DASHSCOPE_API_KEY") or None,
        openai_key=env.get("OPENAI_API_KEY") or None,
    )


def resolve_endpoint(base_url: str | None = None, api_key: str | None = None) -> tuple[str, str]:
    """Return (base_url, api_key) for a live endpoint; LLMUnavailable names the variable to set.

    The base URL is the argument, else MNEMO_BASE_URL, else DashScope. A DashScope
    host takes DASHSCOPE_API_KEY; any other host takes OPENAI_API_KEY (a key is
    never sent to a host of another vendor).
    """
    env = settings()
    url = base_url or env.base_url or DASHSCOPE_BASE_URL
    if api_key:
        return url, api_key
    dashscope = "dashscope" in (urlparse(url).hostname or "")
    var, key = ("DASHSCOPE_API_KEY", env.dashscope_key) if dashscope else ("OPENAI_API_KEY", env.openai_key)
    if not key:
        raise LLMUnavailable(
            f"{var} is not set, and the endpoint {url} needs it; set {var} (or pass api_key=...), "
            "or use llm='offline' or llm='replay:PATH'"
        )
    return url, key


def open_client(base_url: str | None = None, api_key: str | None = None, timeout: float = 60.0) -> Any:
    """Return an `openai.OpenAI` client for the resolved endpoint, with its own retries off (ours apply)."""
    url, key = resolve_endpoint(base_url, api_key)
    try:
        import openai
    except ImportError as exc:
        raise LLMUnavailable("live models need the openai package: pip install 'mnemo-ltm[live]'") from exc
    return openai.OpenAI(api_key=key, base_url=url, max_retries=0, timeout=timeout)


def call_with_retry(
    call: Callable[[], Any], *, attempts: int = 3, backoff: float = 0.5, what: str = "model call"
) -> Any:
    """Return `call()`, retrying transport failures (connection, timeout, 429, 5xx) with exponential backoff.

    A refusal that retrying cannot fix (401, 403, 404, 400) raises LLMUnavailable at once;
    so does the last transport failure.
    """
    import openai

    retryable = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            return call()
        except retryable as exc:
            last = exc
            if attempt + 1 < attempts:
                time.sleep(backoff * 2**attempt)
        except openai.APIStatusError as exc:
            hint = " (check the API key)" if exc.status_code in (401, 403) else ""
            raise LLMUnavailable(f"{what} refused with HTTP {exc.status_code}{hint}: {exc.message}") from exc
    raise LLMUnavailable(f"{what} failed after {attempts} attempts: {type(last).__name__}: {last}") from last


def request_key(model: str, messages: list[dict[str, str]], schema: dict | None, version: str) -> str:
    """Return the cache key of one request: sha256 of (model, messages, schema, prompt version)."""
    blob = json.dumps(
        {"model": model, "messages": messages, "schema": schema, "version": version},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class Cassette:
    """A JSONL file of answered requests, one object a line, looked up by request key (last line wins)."""

    def __init__(self, path: str | Path, *, must_exist: bool = False):
        self.path = Path(path)
        self.entries: dict[str, dict[str, Any]] = {}
        if not self.path.exists():
            if must_exist:
                raise LLMUnavailable(
                    f"cassette {self.path} does not exist; record it with llm='record:{self.path}'"
                )
            return
        for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    entry = json.loads(line)
                    self.entries[entry["key"]] = entry
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise LLMUnavailable(
                        f"cassette {self.path} line {n} is not a cassette entry: {exc}"
                    ) from exc

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the entry recorded for `key`, or None."""
        return self.entries.get(key)

    def put(self, entry: dict[str, Any]) -> None:
        """Append `entry` to the file (flushed at once, so a crashed run keeps what it paid for)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self.entries[entry["key"]] = entry


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(value: Any, schema: dict, path: str = "$") -> list[str]:
    """Return the ways `value` breaks `schema` (type, enum, required, properties, items, anyOf); [] if none."""
    if "anyOf" in schema:
        branches = [validate(value, s, path) for s in schema["anyOf"]]
        if all(branches):
            return [f"{path}: matches no anyOf branch ({branches[0][0]})"]
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_TYPES.get(k, lambda v: True)(value) for k in kinds):
            return [f"{path}: expected {'/'.join(kinds)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} is not one of {schema['enum']}"]
    problems: list[str] = []
    if isinstance(value, dict):
        problems += [
            f"{path}: missing required key '{k}'" for k in schema.get("required", ()) if k not in value
        ]
        props = schema.get("properties", {})
        for key, sub in props.items():
            if key in value:
                problems += validate(value[key], sub, f"{path}.{key}")
        if schema.get("additionalProperties") is False:
            problems += [f"{path}: unexpected key '{k}'" for k in value if k not in props]
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{path}[{i}]")
    return problems


def parse_json(content: str | None, schema: dict) -> dict:
    """Return the JSON object in `content` if it matches `schema`; LLMResponseError otherwise (never {})."""
    text = (content or "").strip()
    if text.startswith("```"):
        # Some models fence JSON even when asked not to: drop the fence and its language tag.
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0].strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        try:
            value = json.loads(text[start : end + 1]) if 0 <= start < end else None
        except json.JSONDecodeError:
            value = None
        if value is None:
            raise LLMResponseError(f"the answer is not JSON: {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise LLMResponseError(f"the answer is JSON but not an object: {text[:200]!r}")
    problems = validate(value, schema)
    if problems:
        raise LLMResponseError("the answer does not match the schema: " + "; ".join(problems[:5]))
    return value


def _parse_text(content: str | None) -> str:
    """Return the stripped text answer; LLMResponseError if it is empty."""
    text = (content or "").strip()
    if not text:
        raise LLMResponseError("the model returned an empty answer")
    return text


class LLM:
    """A chat model behind one of four modes; build it with `connect()`."""

    def __init__(
        self,
        mode: str,
        *,
        models: dict[str, str] | None = None,
        client: Any = None,
        base_url: str | None = None,
        cassette: Cassette | None = None,
        attempts: int = 3,
        backoff: float = 0.5,
        run_id: str | None = None,
        json_mode: str = "json_schema",
    ):
        if mode not in MODES:
            raise ConfigError(f"unknown LLM mode '{mode}'; use one of {', '.join(MODES)}")
        if json_mode not in JSON_MODES:
            raise ConfigError(f"unknown json_mode '{json_mode}'; use one of {', '.join(JSON_MODES)}")
        self.mode = mode
        self.offline = mode == "offline"
        self.models = {**ROLE_MODELS, **(models or {})}
        self.usage: dict[str, dict[str, int]] = {}
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self._client = client
        self._base_url = base_url
        self._cassette = cassette
        self._attempts = max(1, int(attempts))
        self._backoff = float(backoff)
        self._json_mode = json_mode
        self._prompts: dict[str, str] = {}
        self._echoed: set[str] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        where = f", cassette={str(self._cassette.path)!r}" if self._cassette else ""
        return f"LLM(mode={self.mode!r}{where}, run_id={self.run_id!r})"

    def complete_json(self, prompt: str, variables: dict, schema: dict, *, role: str = "extract") -> dict:
        """Return the model's JSON object for prompt `prompt`, validated against `schema`.

        The schema is sent as a strict json_schema response format (so every property
        should be required and objects closed; use ["string", "null"] for optional
        values) and also quoted in the system message for endpoints without it.
        Unusable answers are retried; the last one raises LLMResponseError.
        """
        return self._ask(prompt, variables, role, schema, lambda c: parse_json(c, schema))

    def complete_text(self, prompt: str, variables: dict, *, role: str = "answer") -> str:
        """Return the model's text answer to prompt `prompt` rendered with `variables`."""
        return self._ask(prompt, variables, role, None, _parse_text)

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
             role: str = "answer") -> dict[str, Any]:
        """Return the model's next assistant message in a function-calling loop (mnemo.agent).

        The reply is a plain dict: {"role": "assistant", "content": str | None,
        "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}],
        "model": the model the API echoed, "usage": {"prompt": n, "completion": n}}.
        Offline raises LLMUnavailable (the agent plans offline itself); replay answers
        from the cassette (a miss raises CassetteMiss); record tees every answer.
        """
        if self.offline:
            raise LLMUnavailable("this LLM is offline and makes no model calls; the agent plans offline itself")
        model = self._model(role)
        key = request_key(model, messages, {"tools": tools or []}, "chat")
        if self.mode == "replay":
            entry = self._cassette.get(key) if self._cassette else None
            if entry is None:
                raise CassetteMiss(f"chat request key {key} (model {model}) is not in cassette "
                                   f"{self._cassette.path if self._cassette else '?'}; re-record it with llm='record:PATH'")
            reply = dict(entry["reply"])
            self._meter(reply["model"], reply["usage"]["prompt"], reply["usage"]["completion"], 1)
            return reply
        kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0}
        if tools:
            kwargs["tools"] = tools
        raw = call_with_retry(lambda: self._client.chat.completions.create(**kwargs), attempts=self._attempts,
                              backoff=self._backoff, what=f"{self.mode} chat call to {model}")
        choices = getattr(raw, "choices", None) or []
        if not choices:
            raise LLMResponseError(f"{model} returned no choices to a chat request")
        message = choices[0].message
        calls = [{"id": tc.id, "type": "function",
                  "function": {"name": tc.function.name, "arguments": tc.function.arguments or "{}"}}
                 for tc in getattr(message, "tool_calls", None) or []]
        used = getattr(raw, "usage", None)
        p, c = int(getattr(used, "prompt_tokens", 0) or 0), int(getattr(used, "completion_tokens", 0) or 0)
        echoed = getattr(raw, "model", None) or model
        self._meter(echoed, p, c, 1)
        reply = {"role": "assistant", "content": message.content, "tool_calls": calls, "model": echoed,
                 "usage": {"prompt": p, "completion": c}}
        self._tee({"key": key, "prompt": "chat", "version": "chat", "role": role, "requested": model,
                   "model": echoed, "reply": reply, "calls": 1, "usage": reply["usage"]}, messages)
        return reply

    def provenance(self) -> dict[str, Any]:
        """Return who answers: client class, mode, models asked and echoed, host, cassette, run id, prompts."""
        if self._client is not None:
            kind = type(self._client)
            client = f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"
        else:
            client = f"{__name__}.Cassette" if self.mode == "replay" else None
        return {
            "llm": f"{type(self).__module__}.{type(self).__qualname__}",
            "client": client,
            "mode": self.mode,
            "models": dict(self.models),
            "models_echoed": sorted(self._echoed),
            "base_url_host": urlparse(self._base_url).netloc if self._base_url else None,
            "cassette": str(self._cassette.path) if self._cassette else None,
            "run_id": self.run_id,
            "prompts": dict(self._prompts),
            "usage": copy.deepcopy(self.usage),
        }

    def _model(self, role: str) -> str:
        """Return the model configured for `role`; ConfigError for an unknown role."""
        if role not in self.models:
            raise ConfigError(f"unknown LLM role '{role}'; roles: {', '.join(sorted(self.models))}")
        return self.models[role]

    def _meter(self, model: str, prompt_tokens: int, completion_tokens: int, calls: int) -> None:
        """Add one answered request's tokens to `usage` under the model the API echoed."""
        with self._lock:
            row = self.usage.setdefault(model, {"prompt": 0, "completion": 0, "calls": 0})
            row["prompt"] += prompt_tokens
            row["completion"] += completion_tokens
            row["calls"] += calls
            self._echoed.add(model)

    def _request(self, model: str, messages: list[dict[str, str]], prompt: str, schema: dict | None) -> Any:
        """Return the raw chat completion for one request (transport retries included)."""
        kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0}
        if schema is not None and self._json_mode == "json_schema":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": prompt, "strict": True, "schema": schema},
            }
        elif schema is not None and self._json_mode == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        return call_with_retry(
            lambda: self._client.chat.completions.create(**kwargs),
            attempts=self._attempts,
            backoff=self._backoff,
            what=f"{self.mode} call to {model} ({prompt})",
        )

    def _ask(
        self, prompt: str, variables: dict, role: str, schema: dict | None, parse: Callable[[str], Any]
    ) -> Any:
        """Render, look up or call, meter, parse and (in record mode) tee one request."""
        if self.offline:
            raise LLMUnavailable(
                "this LLM is offline and makes no model calls: stages check llm.offline and use their "
                "heuristics; for a model use llm='live' (with DASHSCOPE_API_KEY) or llm='replay:PATH'"
            )
        model = self._model(role)
        messages, version = prompts.render(prompt, **variables)
        with self._lock:
            self._prompts[prompt] = version
        if schema is not None:
            rule = "Reply with one JSON object, and nothing else, that matches this JSON schema:\n"
            messages[0]["content"] += "\n\n" + rule + json.dumps(schema, sort_keys=True)
        key = request_key(model, messages, schema, version)
        if self.mode == "replay":
            return self._replay(key, model, prompt, version, parse)
        entry: dict[str, Any] = {"key": key, "prompt": prompt, "version": version, "role": role}
        entry.update(requested=model, calls=0, usage={"prompt": 0, "completion": 0})
        error: LLMResponseError | None = None
        for attempt in range(self._attempts):
            reply = self._request(model, messages, prompt, schema)
            used = getattr(reply, "usage", None)
            p = int(getattr(used, "prompt_tokens", 0) or 0)
            c = int(getattr(used, "completion_tokens", 0) or 0)
            entry.update(
                model=getattr(reply, "model", None) or model, content=_content(reply), calls=attempt + 1
            )
            entry["usage"] = {
                "prompt": entry["usage"]["prompt"] + p,
                "completion": entry["usage"]["completion"] + c,
            }
            self._meter(entry["model"], p, c, 1)
            try:
                result = parse(entry["content"])
            except LLMResponseError as exc:
                error = exc
                if attempt + 1 < self._attempts:
                    time.sleep(self._backoff * 2**attempt)
                continue
            self._tee(entry, messages)
            return result
        # The final unusable answer is recorded too, so a replay fails the same way.
        self._tee(entry, messages)
        raise LLMResponseError(
            f"{model} gave no usable answer to '{prompt}' in {self._attempts} tries: {error}"
        )

    def _tee(self, entry: dict[str, Any], messages: list[dict[str, str]]) -> None:
        """Append the answered request to the cassette (record mode only)."""
        if self.mode == "record" and self._cassette is not None:
            host = urlparse(self._base_url).netloc if self._base_url else None
            at = datetime.now(timezone.utc).isoformat(timespec="seconds")
            with self._lock:
                self._cassette.put(
                    {**entry, "host": host, "run_id": self.run_id, "at": at, "messages": messages}
                )

    def _replay(self, key: str, model: str, prompt: str, version: str, parse: Callable[[str], Any]) -> Any:
        """Return the parsed answer recorded for `key`; CassetteMiss if there is none."""
        entry = self._cassette.get(key) if self._cassette else None
        if entry is None:
            raise CassetteMiss(
                f"request key {key} (prompt '{prompt}' v{version}, model {model}) is not in cassette "
                f"{self._cassette.path if self._cassette else '?'}; re-record it with llm='record:PATH'"
            )
        usage = entry.get("usage") or {}
        p, c = int(usage.get("prompt", 0)), int(usage.get("completion", 0))
        self._meter(entry.get("model") or model, p, c, int(entry.get("calls", 1)))
        return parse(entry.get("content"))


def _content(reply: Any) -> str | None:
    """Return the text of the first choice of a chat completion, or None."""
    choices = getattr(reply, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    return getattr(message, "content", None)


def _models(value: str | dict[str, str] | None) -> dict[str, str]:
    """Return the role -> model overrides: a dict by role, or one model name for every role."""
    if value is None:
        return {}
    if isinstance(value, str):
        return dict.fromkeys(ROLE_MODELS, value)
    return dict(value)


def connect(mode: str | LLM | None = None, **overrides: Any) -> LLM:
    """Return the LLM for `mode` ("offline", "live", "record:PATH", "replay:PATH", or an LLM as is).

    None means MNEMO_LLM, else "offline". Overrides: models, base_url, api_key,
    attempts, backoff, timeout, run_id, json_mode. Live and record without a key
    raise LLMUnavailable; nothing falls back to offline.
    """
    if isinstance(mode, LLM):
        if overrides:
            raise ConfigError("overrides apply when connecting; got an LLM that is already connected")
        return mode
    for name in overrides:
        if name not in OVERRIDES:
            close = difflib.get_close_matches(name, OVERRIDES, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"unknown LLM override '{name}'{hint}; known: {', '.join(OVERRIDES)}")
    spec = (mode or settings().mode or "offline").strip()
    kind, _, path = spec.partition(":")
    common = {
        "models": _models(overrides.get("models")),
        "attempts": overrides.get("attempts", 3),
        "backoff": overrides.get("backoff", 0.5),
        "run_id": overrides.get("run_id"),
        "json_mode": overrides.get("json_mode", "json_schema"),
    }
    if kind not in MODES or (kind in ("offline", "live") and path):
        raise ConfigError(f"unknown LLM mode '{spec}'; use offline, live, record:PATH or replay:PATH")
    if kind in ("record", "replay") and not path:
        raise ConfigError(f"LLM mode '{kind}' needs a cassette path: '{kind}:PATH'")
    if kind == "offline":
        return LLM("offline", **common)
    if kind == "replay":
        return LLM("replay", cassette=Cassette(path, must_exist=True), **common)
    url, key = resolve_endpoint(overrides.get("base_url"), overrides.get("api_key"))
    client = open_client(url, key, timeout=float(overrides.get("timeout", 60.0)))
    cassette = Cassette(path) if kind == "record" else None
    return LLM(kind, client=client, base_url=url, cassette=cassette, **common)
