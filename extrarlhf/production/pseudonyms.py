"""Keyed pseudonyms (DESIGN section 10.1): ``"p-" + hex(HMAC-SHA256(salt, "player:" + raw_id))[:32]``.

Pseudonymized is not anonymous: whoever holds the salt can link a pseudonym back to a
player. Manifests therefore record ``pseudonym_key_id`` (which salt) and
``pseudonymized: true, anonymous: false``. Production battle ids are keyed the same way
(``"b-"`` + ``"battle:"``), so a dataset never carries a backend key either.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["player_pseudonym", "battle_key", "session_key", "PSEUDONYM_RULE"]

PSEUDONYM_RULE = "'p-' + hex(HMAC-SHA256(salt, 'player:' + player_id))[:32]"


def _keyed(salt: bytes, prefix: str, domain: str, raw: str) -> str:
    digest = hmac.new(salt, f"{domain}:{raw}".encode("utf-8"), hashlib.sha256).hexdigest()
    return f"{prefix}-{digest[:32]}"


def player_pseudonym(salt: bytes, raw_id: str | None) -> str | None:
    """The pseudonym of a player id (None stays None: bots and models have no player id)."""
    return None if raw_id is None else _keyed(salt, "p", "player", raw_id)


def battle_key(salt: bytes, battle_id: str) -> str:
    """The dataset's key for a production battle id."""
    return _keyed(salt, "b", "battle", battle_id)


def session_key(salt: bytes, session_id: str) -> str:
    """The dataset's key for a production session id (``"s-"`` + ``"session:"``)."""
    return _keyed(salt, "s", "session", session_id)
