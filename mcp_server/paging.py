"""Paging of list and inspect results (DESIGN section 8; STACK: a client such as Claude Code
rejects a tool result over ~25,000 tokens).

Every tool whose result grows with the data takes ``limit`` and ``cursor`` and answers with
one page of its list plus ``total``, ``returned``, ``limit`` and ``next_cursor`` (null on the
last page). Pass ``next_cursor`` back as ``cursor`` with the same other arguments for the
next page.

* **Keyset, not offsets.** Items are ordered by a unique key; the cursor records the key of
  the last item returned, and the next page starts after it. Items added or removed between
  two calls therefore never make a page repeat or skip an item that was there all along.
* **Size-bounded.** A page also stops early when its items would exceed
  :data:`PAGE_BUDGET_CHARS` of JSON (at least one item is always returned), so even
  ``limit=500`` of large items stays far below the client's limit.
* **Opaque and bound to its call.** A cursor is base64url text (no ``=``, ``:`` or ``/``: it
  can never look like a credential to the argument guards) naming the tool and a digest of
  the call's scope (e.g. the group). A cursor from another tool or scope, or one that does
  not decode, is refused as ``invalid_argument`` without repeating it.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import orjson
from annotated_types import Ge, Le
from pydantic import Field, Strict

from extrarlhf.core.errors import InvalidArgument

T = TypeVar("T")
Key = tuple[Any, ...]

MAX_LIMIT = 500
DEFAULT_LIMIT = 50
PAGE_BUDGET_CHARS = 6_000  # JSON characters of one page's items: a default result stays under 8,000 (DESIGN 8.1)
_CURSOR_VERSION = "c1"
_MAX_CURSOR_CHARS = 2048


def limit_arg(default: int = DEFAULT_LIMIT, what: str = "items") -> Any:
    """The ``limit`` argument type of a paged tool."""
    return Annotated[int, Strict(), Ge(1), Le(MAX_LIMIT), Field(
        description=f"Most {what} per page.")]


Cursor = Annotated[str | None, Strict(), Field(
    max_length=_MAX_CURSOR_CHARS,
    description="A next_cursor.")]


@dataclass(frozen=True)
class Page:
    items: list[Any]
    total: int
    limit: int
    next_cursor: str | None

    def info(self) -> dict[str, Any]:
        """The paging fields every paged result carries."""
        return {"total": self.total, "returned": len(self.items), "limit": self.limit,
                "next_cursor": self.next_cursor}


def _digest(scope: Any) -> str:
    return hashlib.sha256(json.dumps(scope, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _encode(tool: str, scope: Any, key: Key) -> str:
    raw = orjson.dumps({"t": tool, "s": _digest(scope), "k": list(key)})
    return _CURSOR_VERSION + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad_cursor(tool: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"{tool}: cursor {why}; pass the next_cursor of the previous page of the same call "
                           f"unchanged (same tool and scope), or omit cursor to start again")


def _decode(cursor: str, tool: str, scope: Any, shape: Key | None) -> Key:
    if not cursor.startswith(_CURSOR_VERSION):
        raise _bad_cursor(tool, "is not a cursor of this server")
    body = cursor[len(_CURSOR_VERSION):]
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except Exception:  # noqa: BLE001 - any malformed cursor is the same refusal
        raise _bad_cursor(tool, "does not decode") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("k"), list):
        raise _bad_cursor(tool, "does not decode")
    if doc.get("t") != tool or doc.get("s") != _digest(scope):
        raise _bad_cursor(tool, "belongs to another call (another tool, group or dataset)")
    key = tuple(doc["k"])
    if shape is not None and (len(key) != len(shape) or any(
            type(a) is not type(b) for a, b in zip(key, shape))):  # exact types keep keys comparable
        raise _bad_cursor(tool, "does not fit this list")
    return key


def _size(item: Any) -> int:
    return len(orjson.dumps(item, default=str))


def paginate(items: Iterable[T], *, tool: str, limit: int, cursor: str | None,
             key: Callable[[T], Key] | None = None, scope: Any = None, budget: int = PAGE_BUDGET_CHARS,
             render: Callable[[T], Any] | None = None) -> Page:
    """One page of ``items`` ordered by ``key`` (unique tuples of str/int per item; None: by
    position, for append-only lists such as a history).

    ``scope`` binds the cursor to the call (e.g. the group name). ``render`` turns a chosen
    item into what the page returns (only the page's items are rendered, so a list of names
    can be paged before reading each one). Rendered items count their JSON length against
    ``budget``; the first item is always included.
    """
    _check_limit(tool, limit)
    if key is None:
        keyed = [((i,), item) for i, item in enumerate(items)]
    else:
        keyed = sorted(((key(item), item) for item in items), key=lambda pair: pair[0])
    keys = [k for k, _ in keyed]
    if any(a == b for a, b in itertools.pairwise(keys)):
        raise ValueError(f"{tool}: paging keys are not unique")  # a bug in the caller, never the client's
    return _page(keys, [item for _, item in keyed], tool, limit, cursor, scope, budget, render)


def paginate_sorted(keys: Sequence[Key], *, tool: str, limit: int, cursor: str | None, scope: Any = None,
                    budget: int = PAGE_BUDGET_CHARS, render: Callable[[Key], Any] | None = None) -> Page:
    """:func:`paginate` of keys that are their own items, already sorted and unique (e.g. a
    catalog index of a million battles): nothing is sorted or copied, a page costs its items."""
    _check_limit(tool, limit)
    return _page(keys, keys, tool, limit, cursor, scope, budget, render)


def _check_limit(tool: str, limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"{tool}: limit must be an integer from 1 to {MAX_LIMIT}")


def _page(keys: Sequence[Key], items: Sequence[Any], tool: str, limit: int, cursor: str | None, scope: Any,
          budget: int, render: Callable[[Any], Any] | None) -> Page:
    start = 0
    if cursor is not None:
        after = _decode(cursor, tool, scope, keys[0] if len(keys) else None)
        try:
            start = bisect.bisect_right(keys, after)
        except TypeError:
            raise _bad_cursor(tool, "does not fit this list") from None
    chosen: list[Any] = []
    used = 0
    for item in items[start:start + limit]:
        shown = render(item) if render is not None else item
        cost = _size(shown)
        if chosen and used + cost > budget:
            break
        chosen.append(shown)
        used += cost
    end = start + len(chosen)
    next_cursor = _encode(tool, scope, keys[end - 1]) if chosen and end < len(keys) else None
    return Page(chosen, len(keys), limit, next_cursor)


def paged(result: dict[str, Any], field: str, page: Page) -> dict[str, Any]:
    """``result`` with ``field`` set to the page's items and the paging fields added."""
    return {**result, field: page.items, **page.info()}

