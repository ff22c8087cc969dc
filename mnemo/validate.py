"""What may enter the store: one check of every text, name and `meta` value, shared by every door.

The library (`Memory.remember`, `add`, `insert_many`, `recall`, `forget`, ...), the HTTP and MCP
request models (`server.inputs`) and the import of an export (`portable`) all refuse input
through these functions, so they refuse the same things with the same message, as
`InvalidInput`, before anything is committed. What is refused and why:

- a NUL character: PostgreSQL text cannot hold one, and DuckDB would keep it where no
  other tool can read it back;
- a lone surrogate ("\\udc80", which JSON allows): it has no UTF-8 encoding, so DuckDB
  cannot take it and an export or a JSON response of the row fails;
- a non-finite number in `meta` (NaN, inf): strict JSON has no such value;
- absurd sizes: names over MAX_NAME_CHARS, texts over MAX_TEXT_CHARS (turn texts
  over the recipe's `max_turn_chars`), `meta` nested deeper than MAX_DEPTH or larger
  than MAX_META_CHARS as JSON.

Everything here is pure: values in, the same values (or InvalidInput) out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import InvalidInput
from .model import CATEGORIES, KINDS, SOURCES

MAX_NAME_CHARS = 256  # a user, session, agent, subject, attribute, value, record id or meta key
MAX_TEXT_CHARS = 1_000_000  # a memory's text, a query, a reason
MAX_META_CHARS = 100_000  # a memory's or a turn's meta, as JSON
MAX_DEPTH = 32  # nesting of meta (dicts and lists)
MAX_REFERENCES = 64  # record or memory ids one memory refers to
FILTER_NAMES = ("agent", "session", "subject", "attribute", "record_id", "status")


def storable(value: Any, what: str) -> str:
    """Return `value` if it is a string the store can hold (no NUL, no lone surrogate), else raise InvalidInput."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character; remove it (or encode binary data, e.g. as base64)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not valid Unicode (a lone surrogate at position {exc.start}); "
                           "decode the input with errors='replace' first") from exc
    return value


def text(value: Any, what: str = "text", *, max_chars: int = MAX_TEXT_CHARS) -> str:
    """Return `value` if it is a non-blank storable text of at most `max_chars` characters, else raise InvalidInput."""
    storable(value, what)
    if not value.strip():
        raise InvalidInput(f"{what} is empty; nothing to store")
    if len(value) > max_chars:
        raise InvalidInput(f"{what} has {len(value):,} characters, over the limit of {max_chars:,}; "
                           "split it into several")
    return value


def name(value: Any, what: str) -> str:
    """Return `value` if it is a non-empty storable name of at most MAX_NAME_CHARS characters, else raise InvalidInput."""
    storable(value, what)
    if not value:
        raise InvalidInput(f"{what} is empty; give a name")
    if len(value) > MAX_NAME_CHARS:
        raise InvalidInput(f"{what} has {len(value):,} characters, over the limit of {MAX_NAME_CHARS}")
    return value


def short(value: Any, what: str) -> str:
    """Return `value` if it is a storable string of at most MAX_NAME_CHARS characters (it may be empty)."""
    storable(value, what)
    if len(value) > MAX_NAME_CHARS:
        raise InvalidInput(f"{what} has {len(value):,} characters, over the limit of {MAX_NAME_CHARS}")
    return value


def optional_name(value: Any, what: str) -> str | None:
    """Return None, or `value` checked as a name (`name`)."""
    return None if value is None else name(value, what)


def meta(value: Any, what: str = "meta") -> dict[str, Any]:
    """Return `value` if it is a dict that stores and reads back as strict JSON (see the module), else raise InvalidInput.

    Keys are short strings (`short`); values are strings, finite numbers, booleans, None, lists and dicts
    of those. Any other object is stored as its str() (as the store always did), so that
    text is checked.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{what} must be a dict, got {type(value).__name__}")
    # Depth first over (value, where, depth), with no recursion: the depth limit is the point.
    stack: list[tuple[Any, str, int]] = [(value, what, 1)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, Mapping):
            if depth > MAX_DEPTH:
                raise InvalidInput(f"{where} is nested deeper than {MAX_DEPTH} levels; flatten it")
            for key, child in item.items():
                short(key, f"a key of {where}")
                stack.append((child, f"{where}[{key!r}]", depth + 1))
        elif isinstance(item, (list, tuple)):
            if depth > MAX_DEPTH:
                raise InvalidInput(f"{where} is nested deeper than {MAX_DEPTH} levels; flatten it")
            stack.extend((child, f"{where}[{k}]", depth + 1) for k, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(f"{where} is {item}, which JSON cannot carry; store a finite number or a string")
        elif item is None or isinstance(item, (bool, int, float)):
            continue
        else:
            storable(item if isinstance(item, str) else str(item), where)
    size = len(json.dumps(value, default=str))
    if size > MAX_META_CHARS:
        raise InvalidInput(f"{what} is {size:,} characters as JSON, over the limit of {MAX_META_CHARS:,}; "
                           "keep large payloads outside the memory and store a reference")
    return dict(value)


def one_of(value: Any, allowed: Iterable[str], what: str) -> str:
    """Return `value` if it is one of `allowed`, else raise InvalidInput naming them."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise InvalidInput(f"{what} {value!r} is not one of {', '.join(allowed)}")
    return value


def importance(value: Any, what: str = "importance") -> float:
    """Return `value` as a float if it is a finite number, else raise InvalidInput (writes clip it to [0, 1])."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise InvalidInput(f"{what} must be a finite number in [0, 1], got {value!r}")
    return float(value)


def turn(text_: Any, *, user: Any, session: Any, agent: Any, meta_: Any, max_chars: int) -> None:
    """Check everything a turn stores: its text (at most `max_chars`), user, session, agent and meta."""
    if not isinstance(text_, str):
        raise InvalidInput(f"remember() takes text, got {type(text_).__name__}")
    if not text_.strip():
        raise InvalidInput("remember() got empty text; nothing to record")
    if len(text_) > max_chars:
        raise InvalidInput(
            f"turn of {len(text_):,} characters exceeds max_turn_chars={max_chars:,}; "
            "split it into turns or raise the limit with Config.from_params(max_turn_chars=...)"
        )
    storable(text_, "turn text")
    if not user:
        raise InvalidInput("remember() needs a user")
    name(user, "user")
    optional_name(session, "session")
    optional_name(agent, "agent")
    meta(meta_, "turn meta")


def memory(text_: Any, *, user: Any, kind: Any = "semantic", category: Any = "fact", subject: Any = None,
           attribute: Any = None, value: Any = None, record_id: Any = None, references: Iterable[Any] = (),
           importance_: Any = 0.5, agent: Any = None, session: Any = None, source: Any = "user",
           meta_: Any = None) -> None:
    """Check every field of a structured memory as `Memory.add` (and an import) would store it."""
    text(text_, "memory text")
    name(user, "user")
    one_of(kind, KINDS, "kind")
    one_of(category, CATEGORIES, "category")
    one_of(source, SOURCES, "source")
    for field_name, field_value in (("subject", subject), ("attribute", attribute), ("value", value),
                                    ("record_id", record_id), ("agent", agent), ("session", session)):
        optional_name(field_value, field_name)
    references = list(references)
    if len(references) > MAX_REFERENCES:
        raise InvalidInput(f"a memory refers to at most {MAX_REFERENCES} ids, got {len(references)}")
    for ref in references:
        name(ref, "a reference")
    importance(importance_)
    meta(meta_)


def filters(value: Any) -> dict[str, Any] | None:
    """Return recall/list filters if every text in them is storable (the store refuses unknown keys itself)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInput(f"filters must be a dict, got {type(value).__name__}")
    for key, item in value.items():
        if item is None:
            continue
        if key in FILTER_NAMES:
            name(item, f"filters[{key!r}]")
        elif key in ("kinds", "categories"):
            if isinstance(item, str) or not isinstance(item, Iterable):
                raise InvalidInput(f"filters[{key!r}] must be a list, e.g. [{item!r}]")
            allowed = KINDS if key == "kinds" else CATEGORIES
            for entry in item:
                one_of(entry, allowed, f"filters[{key!r}] entry")
        elif key == "meta":
            if not isinstance(item, Mapping):
                raise InvalidInput("filters['meta'] must be a dict of key: value")
            for k, v in item.items():
                name(k, "a filters['meta'] key")
                name(str(v), f"filters['meta'][{k!r}]")
    return dict(value)
