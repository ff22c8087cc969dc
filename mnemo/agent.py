"""A function-calling loop in which the model decides when to remember, recall, forget and audit.

    agent = Agent(mem, user="alice")                 # the model is mem.llm unless llm= is given
    turn = agent.send("I moved to Lisbon last week.") # -> remember
    turn = agent.send("Where do I live?")             # -> recall (+ trust assessment) -> answer or escalate
    agent.transcript.save("run/transcript.json")      # every turn, tool call, token count and provenance

Tool schemas are generated from the `Memory` methods: arguments from the
signature, descriptions from the docstring, so they change with the library. The
MCP server (`mnemo.server.mcp`) builds its tools from the same functions.

A live model drives the loop through `llm.chat` (OpenAI-compatible tool calls);
offline, a deterministic planner (`offline_plan`) emits the same tool calls. Every
recall is assessed for trust: on "escalate" the pack's memories are withheld from
the model, and an answer given after one is replaced by an escalation. Token usage
is reported per turn and per session: metered by the API live, counted with
`mnemo.tokens` (labelled estimated) offline.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from . import prompts
from .errors import ConfigError, MnemoError
from .llm import connect, validate
from .tokens import count_many, tokenizer_name
from .verbs import ToolSpec

AGENT_NAME = "mnemo.agent"
PLANNER_VERSION = "offline-rules-1"

# Argument descriptions for parameters whose method docstring does not document them (Memory's
# docstrings are one-liners); an "Args:" section in a docstring takes precedence.
PARAM_HELP = {
    "text": "What the user said, in their own words (one statement or turn).",
    "query": "What to look for, in plain language.",
    "user": "Whose memories: the user id.",
    "session": "Conversation session id.",
    "agent": "Which agent wrote the memory.",
    "budget_tokens": "Token budget of the recalled pack (default: the recipe's).",
    "filters": 'Filters on memory fields: agent, session, subject, attribute, record_id, status, kinds and '
               'categories (lists), since, until, meta; e.g. {"kinds": ["semantic"]}.',
    "memory_id": "A memory id, e.g. m-019ae4c8b2a00000-3c4c43ac.",
    "reason": "Why; recorded on the tombstone.",
    "dry_run": "Only report what would be forgotten; change nothing.",
    "include_inactive": "Also list superseded, forgotten and decayed memories.",
    "fmt": "Export format: json (lossless, importable) or markdown (for people).",
}


# The agent acts for one user in one session, so those arguments are bound, never chosen by the model.
AGENT_TOOLS = (
    ToolSpec("remember", "remember", hidden=("user", "session", "agent", "at")),
    ToolSpec("recall", "recall", hidden=("user", "at", "filters"),
             note="Every recall is assessed for trust: the verdict is act or escalate."),
    ToolSpec("forget", "forget", hidden=("user",), result_key="forgotten"),
    ToolSpec("audit", "audit", hidden=("user",)),
)


# ----------------------------------------------------------------- schemas from signatures
def exposed_parameters(fn: Callable[..., Any], hidden: Sequence[str] = ()) -> list[inspect.Parameter]:
    """Return `fn`'s parameters minus `self` and `hidden`, with annotations resolved to types.

    A hidden name that is not a parameter raises ConfigError, so renaming an argument
    in the library breaks the catalogue loudly instead of exposing it by accident.
    """
    sig = inspect.signature(fn)
    hints = get_type_hints(fn)
    missing = sorted(set(hidden) - set(sig.parameters))
    if missing:
        raise ConfigError(f"{fn.__qualname__} has no parameter {', '.join(missing)}; update its ToolSpec")
    out = []
    for p in sig.parameters.values():
        if p.name == "self" or p.name in hidden or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        # Tools take named arguments only, so every exposed parameter becomes keyword-only.
        out.append(p.replace(annotation=hints.get(p.name, Any), kind=inspect.Parameter.KEYWORD_ONLY))
    return out


def json_schema(annotation: Any) -> dict[str, Any]:
    """Return the JSON schema of a Python type annotation; ConfigError for one JSON cannot carry."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if all(a in (str, Path) for a in rest):
            return {"type": "string"}
        return json_schema(rest[0]) if len(rest) == 1 else {"anyOf": [json_schema(a) for a in rest]}
    scalars = {str: "string", bool: "boolean", int: "integer", float: "number", Path: "string"}
    if annotation in scalars:
        return {"type": scalars[annotation]}
    if annotation is datetime:
        return {"type": "string", "format": "date-time"}
    if origin is Literal:
        return {"type": "string", "enum": list(args)}
    if annotation is dict or origin in (dict, Mapping):
        return {"type": "object"}
    if origin in (list, tuple, set, frozenset, Sequence):
        return {"type": "array", "items": json_schema(args[0]) if args else {}}
    raise ConfigError(f"no JSON schema for {annotation!r}: hide that parameter in its ToolSpec")


def param_docs(fn: Callable[..., Any]) -> dict[str, str]:
    """Return argument descriptions from an "Args:" section of `fn`'s docstring ({} if it has none)."""
    doc = inspect.getdoc(fn) or ""
    # The section runs from "Args:" to the next unindented line ("Returns:", "Raises:", ...).
    section = re.split(r"\n(?=\S)", doc.split("\nArgs:\n", 1)[1])[0] if "\nArgs:\n" in doc else ""
    return {m[1]: m[2].strip() for m in re.finditer(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s+(.+)$", section, re.M)}


def describe(fn: Callable[..., Any], note: str = "") -> str:
    """Return a tool description: the first paragraph of `fn`'s docstring, plus `note`."""
    doc = (inspect.getdoc(fn) or "").split("\n\n", 1)[0].replace("\n", " ").strip()
    return f"{doc} {note}".strip()


def parameters_schema(fn: Callable[..., Any], hidden: Sequence[str] = ()) -> dict[str, Any]:
    """Return the JSON schema (an object) of the arguments a tool over `fn` takes."""
    docs = {**PARAM_HELP, **param_docs(fn)}
    props: dict[str, Any] = {}
    required = []
    for p in exposed_parameters(fn, hidden):
        prop = json_schema(p.annotation)
        if p.name in docs:
            prop["description"] = docs[p.name]
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        elif isinstance(p.default, (str, int, float, bool)):
            prop["default"] = p.default
        props[p.name] = prop
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def tool_schema(name: str, fn: Callable[..., Any], hidden: Sequence[str] = (), *, doc: Callable | None = None,
                note: str = "") -> dict[str, Any]:
    """Return the OpenAI function-calling schema of a tool named `name` over `fn`."""
    return {"type": "function", "function": {"name": name, "description": describe(doc or fn, note),
                                             "parameters": parameters_schema(fn, hidden)}}


def spec_schema(spec: ToolSpec, cls: type | None = None) -> dict[str, Any]:
    """Return the function-calling schema of `spec` over the Memory class (or a stand-in `cls`)."""
    if cls is None:
        from .memory import Memory as cls
    doc = getattr(cls, spec.doc or spec.method)
    return tool_schema(spec.name, getattr(cls, spec.method), spec.hidden, doc=doc, note=spec.note)


def coerce_arguments(params: Sequence[inspect.Parameter], args: Mapping[str, Any]) -> dict[str, Any]:
    """Return `args` with JSON values turned into the Python types the parameters expect (ISO -> datetime)."""
    kinds = {p.name: p.annotation for p in params}
    out = dict(args)
    for name, value in args.items():
        if isinstance(value, str) and datetime in (kinds.get(name), *get_args(kinds.get(name))):
            out[name] = datetime.fromisoformat(value)
    return out


@lru_cache(maxsize=128)
def _properties(cls: type) -> tuple[str, ...]:
    return tuple(n for n, a in inspect.getmembers(cls, lambda a: isinstance(a, property)) if not n.startswith("_"))


def to_jsonable(obj: Any) -> Any:
    """Return `obj` as plain JSON values: dataclasses -> dicts, datetimes -> ISO, tuples -> lists."""
    if is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: to_jsonable(getattr(obj, f.name)) for f in fields(obj)}
        # Properties (Packed.id and .text, MemoryRecord.active, Recall.ids) are part of what callers read.
        out.update((name, to_jsonable(getattr(obj, name))) for name in _properties(type(obj)) if name not in out)
        return out
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, Path):
        return str(obj)
    # numpy scalars and arrays carry .tolist(); anything else is shown, never dropped.
    return obj.tolist() if hasattr(obj, "tolist") else str(obj)


def verdict_of(assessment: Any) -> dict[str, Any]:
    """Return {"verdict", "trust", "reasons"} of an assessment (a `mnemo.assess.Assessment` or a dict).

    Reasons name each load-bearing claim that kept trust down, so an escalation says why.
    """
    get = assessment.get if isinstance(assessment, Mapping) else lambda k, d=None: getattr(assessment, k, d)
    # Anything but an explicit "act" escalates: an assessment that cannot be read is not trusted.
    verdict = "act" if get("verdict", None) == "act" else "escalate"
    reasons = get("reasons", None) or [
        f"{c.status} claim {c.memory.id} ({c.memory.text[:60]!r}): trust {c.trust:.2f}"
        for c in get("claims", None) or ()
        if verdict == "escalate" and c.load_bearing and c.trust <= (get("trust", None) or 0.0) + 1e-9]
    return {"verdict": verdict, "trust": get("trust", None), "reasons": [str(r) for r in reasons]}


# ----------------------------------------------------------------- what the model sees of a result
def _texts(records: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"id": r.id, "text": r.text} for r in records]


def view(name: str, value: Any) -> dict[str, Any]:
    """Return the compact result of tool `name` shown to the model (the transcript keeps the same)."""
    if name == "remember":
        return {"turn_id": value.turn_id, "added": _texts(value.added),
                "superseded": [{"old": s.old.id, "new": s.new.id, "text": s.new.text, "reason": s.reason}
                               for s in value.superseded],
                "corroborated": [r.id for r, _ in value.corroborated], "duplicates": [r.id for r, _ in value.duplicates],
                "forgotten": _texts([r for r, _ in value.forgotten]), "ignored": len(value.ignored)}
    if name == "forget":
        return {"forgotten": _texts(value)}
    out = to_jsonable(value)
    if name == "audit":
        # The model needs which memories conflict, not their full rows; the recommendation says why.
        for c in out.get("contradictions", []):
            c["memories"] = [{"id": m["id"], "text": m["text"]} for m in c["memories"]]
        out.pop("provenance", None)
    return out if isinstance(out, dict) else {"result": out}


def recall_view(recall: Any, assessment: Any) -> dict[str, Any]:
    """Return a recall and its trust verdict; on "escalate" the memories are withheld, so nothing acts on them."""
    verdict = verdict_of(assessment)
    shown = verdict["verdict"] == "act"
    # The assessed pack carries values re-grounded against the system of record; prefer it.
    recall = getattr(assessment, "pack", None) or recall
    memories = [{"id": p.id, "text": p.text, "kind": p.kind, "score": round(float(p.score), 4),
                 **({"note": p.note} if p.note else {})} for p in recall.memories] if shown else []
    return {**verdict, "confidence": recall.confidence, "message": recall.message, "memories": memories,
            "withheld": 0 if shown else len(recall.memories)}


# ----------------------------------------------------------------- the offline planner
_QUESTION = re.compile(r"^\s*(what|where|when|who|whom|whose|which|why|how|do|does|did|is|are|was|were|am|"
                       r"can|could|should|would|will|have|has|tell me)\b", re.IGNORECASE)
_FORGET = re.compile(r"^\s*(?:please\s*,?\s+)?(forget\b(?:\s+(?:about|that))?\s*(.*?))[.!]*\s*$",
                     re.IGNORECASE | re.DOTALL)
_AUDIT = re.compile(r"\baudit\b|\bcheck (?:my|your|the) memor(?:y|ies)\b|\bconsisten", re.IGNORECASE)


def classify(text: str) -> str:
    """Return what a user message asks for: "forget", "audit", "question" or "statement"."""
    if _FORGET.match(text):
        return "forget"
    if _AUDIT.search(text):
        return "audit"
    if text.rstrip().endswith("?") or _QUESTION.match(text):
        return "question"
    return "statement"


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "tool_calls": []}


def offline_plan(text: str, done: Sequence[tuple[str, dict[str, Any]]], call_id: str) -> dict[str, Any]:
    """Return the next assistant message for `text`, given the (tool, result) pairs done this turn.

    The rules: a statement is remembered; a question is recalled (with its trust
    assessment), then answered from the pack or escalated; "forget ..." forgets
    by query; "audit" or "check my memories" audits. Results are read as data only.
    """
    intent = classify(text)
    if not done:
        if intent == "forget":
            # The whole request goes as the query: Memory.forget plans it like a "forget ..." turn.
            request = _FORGET.match(text)
            return _call(call_id, "forget", query=request.group(1)) if request.group(2) else _say("What should I forget?")
        if intent == "audit":
            return _call(call_id, "audit")
        if intent == "question":
            return _call(call_id, "recall", query=text.strip())
        return _call(call_id, "remember", text=text.strip())
    name, result = done[-1]
    if "error" in result:
        return _say(f"I could not {name}: {result['error']}")
    if name == "recall":
        if result["verdict"] != "act" or result["confidence"] == "unknown" or not result["memories"]:
            why = "; ".join(result["reasons"]) or result["message"] or f"confidence {result['confidence']}"
            return _call(call_id, "escalate", reason=why)
        # Answer from the best memory and any scoring close to it, not from the whole pack.
        best = result["memories"][0]["score"]
        top = [m for m in result["memories"][:3] if m["score"] >= 0.9 * best]
        return _say("From memory: " + " ".join(f"{m['text']} [{m['id']}]" for m in top))
    if name == "remember":
        kept = [m["text"] for m in result["added"]] + [s["text"] for s in result["superseded"]]
        if kept:
            return _say(("Updated: " if result["superseded"] else "Noted: ") + "; ".join(kept))
        if result["forgotten"]:
            return _say(f"Forgot {len(result['forgotten'])} memories.")
        return _say("I already knew that." if result["corroborated"] or result["duplicates"] else "Nothing to keep.")
    if name == "forget":
        gone = result["forgotten"]
        return _say(f"Forgot {len(gone)} memories: " + "; ".join(m["text"] for m in gone) if gone
                    else "Nothing I remember matches that.")
    found = {k: len(result.get(k) or ()) for k in ("contradictions", "absences", "semantic")}
    if not any(found.values()):
        return _say("Audit: no contradictions or dangling references; nothing to do.")
    advice = [c["recommendation"].get("rationale", "") for c in result.get("contradictions", [])]
    return _say(f"Audit (nothing changed): {found['contradictions']} contradictions, {found['absences']} "
                f"dangling references, {found['semantic']} conflicting pairs. " + " ".join(a for a in advice if a))


# ----------------------------------------------------------------- token usage
def _message_text(message: Mapping[str, Any]) -> str:
    calls = [c["function"]["name"] + " " + c["function"]["arguments"] for c in message.get("tool_calls") or []]
    return "\n".join([str(message.get("content") or ""), *calls])


def estimate_usage(context: Sequence[Mapping[str, Any]], tools: Sequence[dict], reply: Mapping[str, Any]) -> dict:
    """Return the tokens a model call would have metered: the context and tool schemas in, the reply out."""
    counts = count_many([_message_text(m) for m in context] + [json.dumps(list(tools)), _message_text(reply)])
    return {"prompt": sum(counts[:-1]), "completion": counts[-1]}


def _add(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    for key in ("prompt", "completion", "calls"):
        total[key] = total.get(key, 0) + int(usage.get(key, 0))
    total["total"] = total["prompt"] + total["completion"]


# ----------------------------------------------------------------- the loop
@dataclass
class Transcript:
    """One agent session: every message, tool call and result, token usage and who answered."""

    session: str
    user: str
    provenance: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the transcript as plain JSON values."""
        return to_jsonable(self)

    def save(self, path: str | Path) -> Path:
        """Write the transcript as JSON to `path`; return the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False), encoding="utf-8")
        return path


class Agent:
    """An assistant for one user whose model (or offline planner) calls mnemo's memory tools."""

    def __init__(self, mem: Any, *, user: str, session: str | None = None, llm: Any = None,
                 record_tools: Any = None, max_steps: int = 8):
        self.mem = mem
        self.user = user
        self.llm = connect(llm) if llm is not None else mem.llm
        self.record_tools = record_tools  # systems of record the trust assessor re-grounds claims against
        self.max_steps = max_steps
        self.specs = {s.name: s for s in AGENT_TOOLS}
        self.schemas = [spec_schema(s) for s in AGENT_TOOLS]
        self.schemas.append(tool_schema("escalate", self.escalate))
        self._params = {s.name: exposed_parameters(getattr(type(mem), s.method), s.hidden) for s in AGENT_TOOLS}
        planner = PLANNER_VERSION if self.llm.offline else "model"
        self.transcript = Transcript(session=session or f"agent-{uuid.uuid4().hex[:12]}", user=user,
                                     provenance={"agent": f"{__name__}.{type(self).__qualname__}", "planner": planner},
                                     usage={"prompt": 0, "completion": 0, "calls": 0, "total": 0,
                                            "estimated": self.llm.offline,
                                            "counter": tokenizer_name() if self.llm.offline else "api"})
        self._refresh_provenance()

    def escalate(self, reason: str) -> dict[str, Any]:
        """Hand the question to a person instead of answering, because the memories are not trustworthy enough to act on."""
        return {"escalated": True, "reason": reason}

    def send(self, text: str) -> dict[str, Any]:
        """Run one user turn through the loop; return its record (reply, escalated, steps, usage)."""
        messages = self.transcript.messages
        rendered, version = prompts.render("agent", user=self.user, message=text)
        if not messages:
            messages.append(rendered[0])
        messages.append(rendered[1])
        index = len(self.transcript.turns)
        turn: dict[str, Any] = {"index": index, "text": text, "reply": "", "escalated": False, "steps": [],
                                "usage": {"prompt": 0, "completion": 0, "calls": 0, "total": 0}}
        done: list[tuple[str, dict[str, Any]]] = []
        last_verdict: dict[str, Any] | None = None
        for step in range(self.max_steps):
            reply, usage = self._decide(text, done, f"call_{index}_{step}")
            _add(turn["usage"], {**usage, "calls": 1})
            kept = {"role": "assistant", "content": reply.get("content")}
            messages.append({**kept, "tool_calls": reply["tool_calls"]} if reply.get("tool_calls") else kept)
            if not reply.get("tool_calls"):
                turn["reply"] = reply.get("content") or ""
                break
            for call in reply["tool_calls"]:
                name, result = self._execute(call)
                done.append((name, result))
                turn["steps"].append({"tool": name, "arguments": call["function"]["arguments"], "result": result})
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": prompts.frame(f"{name}_result", json.dumps(result, ensure_ascii=False))})
                if name == "recall" and "verdict" in result:
                    last_verdict = result
                if name == "escalate" and result.get("escalated"):
                    turn.update(escalated=True, reply=f"I can't answer that reliably from memory: {result['reason']}")
            if turn["escalated"]:
                break
        else:
            turn.update(escalated=True, reply=f"I stopped after {self.max_steps} steps without an answer.")
        # A model that answers after an "escalate" verdict is overruled: the turn escalates instead.
        if last_verdict is not None and last_verdict["verdict"] != "act" and not turn["escalated"]:
            why = "; ".join(last_verdict["reasons"]) or "the recalled memories are not trustworthy"
            turn.update(escalated=True, reply=f"I can't answer that reliably from memory: {why}", overruled=True)
        if turn["escalated"]:
            # The context keeps what the user was told, not an answer that was overruled.
            if messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls"):
                messages.pop()
            messages.append({"role": "assistant", "content": turn["reply"]})
        turn["usage"].update(estimated=self.llm.offline, counter=self.transcript.usage["counter"])
        turn["prompt_version"] = version
        _add(self.transcript.usage, turn["usage"])
        self.transcript.turns.append(turn)
        self._refresh_provenance()
        return turn

    def _decide(self, text: str, done: list[tuple[str, dict[str, Any]]], call_id: str) -> tuple[dict, dict]:
        """Return the next assistant message and the tokens it cost (estimated offline, metered live)."""
        if self.llm.offline:
            reply = offline_plan(text, done, call_id)
            return reply, estimate_usage(self.transcript.messages, self.schemas, reply)
        reply = self.llm.chat(self.transcript.messages, tools=self.schemas)
        return reply, reply.get("usage") or {}

    def _execute(self, call: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """Run one tool call; return (tool name, result). Bad calls become error results the model can read."""
        name = call["function"]["name"]
        try:
            args = json.loads(call["function"].get("arguments") or "{}")
        except json.JSONDecodeError as exc:
            return name, {"error": f"arguments are not JSON: {exc}"}
        schema = next((s["function"]["parameters"] for s in self.schemas if s["function"]["name"] == name), None)
        if schema is None:
            return name, {"error": f"unknown tool {name!r}; tools: {', '.join(self.specs)}, escalate"}
        problems = validate(args, schema) if isinstance(args, dict) else ["arguments must be an object"]
        if problems:
            return name, {"error": "; ".join(problems)}
        if name == "escalate":
            return name, self.escalate(**args)
        spec = self.specs[name]
        method = getattr(self.mem, spec.method)
        bound = {"user": self.user, "session": self.transcript.session, "agent": AGENT_NAME}
        kwargs = {**coerce_arguments(self._params[name], args),
                  **{k: v for k, v in bound.items() if k in spec.hidden}}
        try:
            value = method(**kwargs)
            if name == "recall":
                return name, recall_view(value, self.mem.assess(value, self.record_tools))
        except (MnemoError, ValueError) as exc:
            return name, {"error": str(exc)}
        return name, view(name, value)

    def _refresh_provenance(self) -> None:
        """Record which model client answered (and its usage so far) and which memory it used."""
        self.transcript.provenance.update(llm=self.llm.provenance(), memory=self.mem.provenance(),
                                          tools=[s["function"]["name"] for s in self.schemas])
