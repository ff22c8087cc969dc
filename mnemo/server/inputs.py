"""The request models both surfaces accept: HTTP bodies and MCP tool arguments are these same classes.

Every field's rule is the library's own (`mnemo.validate`): a text or name with a NUL or a
lone surrogate, a `meta` value JSON cannot carry, an unknown argument (a `tenant` an MCP
client adds, a typo), a budget of 1e12 tokens, `filters.kinds` given as a string: each is
refused by HTTP with 422 and by MCP with a tool error, with the same message, before any
store is touched. The MCP tools take the fields of these models (minus those a tool hides,
such as `at`) as their arguments (`server.mcp.arguments_model`), so a schema drawn from one
is the schema of the other.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .. import validate
from ..clock import utc
from ..errors import InvalidInput
from ..model import CATEGORIES, KINDS, SOURCES

MAX_BUDGET = 100_000  # tokens a pack may be asked for
MAX_FILTER_META = 16  # meta equalities one filter may test
MAX_IMPORT_LINES = 1_000_000  # records one import tool call may carry


def _rule(check: Callable[..., Any], what: str) -> AfterValidator:
    """Return a pydantic validator running a `mnemo.validate` check (its InvalidInput becomes the field's error)."""
    def run(value: Any) -> Any:
        try:
            check(value, what)
        except InvalidInput as exc:
            # Pydantic reports ValueError as a field error; the message is the library's.
            raise ValueError(str(exc)) from exc
        return value

    return AfterValidator(run)


def _instant(value: datetime) -> datetime:
    # Checked before any time-zone arithmetic, which overflows near year 1 and 9999.
    if not 1971 <= value.year <= 2199:
        raise ValueError("must be between 1971 and 2199")
    return utc(value)


Storable = Annotated[str, _rule(validate.storable, "the value")]
Text = Annotated[str, _rule(validate.storable, "the text"),
                 Field(min_length=1, max_length=validate.MAX_TEXT_CHARS)]
Name = Annotated[str, _rule(validate.storable, "the name"),
                 Field(min_length=1, max_length=validate.MAX_NAME_CHARS)]
When = Annotated[datetime, AfterValidator(_instant)]
MetaKey = Annotated[str, Field(pattern=r"^[A-Za-z0-9_]{1,64}$")]
Budget = Annotated[int, Field(ge=0, le=MAX_BUDGET, description="token budget of the pack (default: the recipe's)")]
Meta = Annotated[dict[str, Any], _rule(validate.meta, "meta")]


class Body(BaseModel):
    """A request: unknown fields are refused, never ignored."""

    model_config = ConfigDict(extra="forbid")


class Filters(Body):
    kinds: list[Literal[KINDS]] | None = None
    categories: list[Literal[CATEGORIES]] | None = None
    session: Name | None = None
    agent: Name | None = None
    subject: Name | None = None
    attribute: Name | None = None
    record_id: Name | None = None
    since: When | None = None
    until: When | None = None
    meta: dict[MetaKey, Name] | None = Field(None, max_length=MAX_FILTER_META, description="equality on meta keys")

    def given(self) -> dict[str, Any] | None:
        """Return the filters that were set, as `Memory.recall` takes them (None when none were)."""
        return self.model_dump(exclude_none=True) or None


class RememberIn(Body):
    text: Text = Field(description="a conversation turn in plain language")
    user: Name
    session: Name | None = None
    agent: Name | None = None
    at: When | None = Field(None, description="when it was said (default: now)")


class AddIn(Body):
    text: Text = Field(description="the memory as a self-contained sentence")
    user: Name
    kind: Literal[KINDS] = "semantic"
    category: Literal[CATEGORIES] = "fact"
    subject: Name | None = None
    attribute: Name | None = None
    value: Name | None = None
    record_id: Name | None = None
    references: list[Name] = Field(default_factory=list, max_length=validate.MAX_REFERENCES)
    importance: float = Field(0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    pinned: bool = False
    single_valued: bool = True
    agent: Name | None = None
    session: Name | None = None
    source: Literal[SOURCES] = "user"
    meta: Meta = Field(default_factory=dict, description="free-form JSON, returned with the memory")
    at: When | None = None


class RecallIn(Body):
    query: Text
    user: Name
    budget_tokens: Budget | None = None
    filters: Filters | None = None
    at: When | None = None

    def kwargs(self) -> dict[str, Any]:
        """Return the keyword arguments of `Memory.recall` besides the query."""
        return {"user": self.user, "budget_tokens": self.budget_tokens,
                "filters": self.filters.given() if self.filters else None, "at": self.at}


class AnswerIn(Body):
    question: Text
    user: Name
    budget_tokens: Budget | None = None
    filters: Filters | None = None


class ForgetIn(Body):
    memory_id: Name | None = Field(None, description="forget this memory; or give query and user")
    query: Text | None = Field(None, description="forget exactly what this names, e.g. 'my old address'")
    user: Name | None = None
    reason: Name = "user asked"
    dry_run: bool = Field(False, description="return what would be forgotten; change nothing")


class AuditIn(Body):
    user: Name


class HistoryIn(Body):
    memory_id: Name


class GetIn(Body):
    memory_id: Name


class StatsIn(Body):
    user: Name | None = Field(None, description="one user's counts (default: every user of the store)")


class RestoreIn(Body):
    reason: Name = Field("restored", description="recorded on the event")


class RestoreArgs(Body):
    """The MCP tool's arguments (over HTTP the id is in the path)."""

    memory_id: Name
    reason: Name = Field("restored", description="recorded on the event")


class DecayIn(Body):
    at: When | None = Field(None, description="the time of the pass (default: now)")


class ImportIn(Body):
    """The MCP tool's arguments (over HTTP the export is the request body)."""

    content: list[dict[str, Any]] = Field(max_length=MAX_IMPORT_LINES, description=(
        "a JSON export's records, one object a line of the file, as the export tool returns them"))
    on_conflict: Literal["error", "skip"] = Field("error", description="ids already stored: refuse all, or skip them")


class ListIn(Body):
    user: Name | None = None
    include_inactive: bool = False
    filters: Filters | None = None


class ExportIn(Body):
    user: Name | None = None
    fmt: Literal["json", "markdown"] = "json"


def unlocated(stats: dict[str, Any]) -> dict[str, Any]:
    """Return `Memory.stats` as a server shows it: without where the store lives on the server's disk."""
    out = {k: v for k, v in stats.items() if k != "path"}
    out["provenance"] = {k: v for k, v in stats.get("provenance", {}).items() if k != "store"}
    return out
