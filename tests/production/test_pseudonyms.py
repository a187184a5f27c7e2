"""Keyed ids are exactly HMAC-SHA256 (DESIGN 10.1), whatever the salt's length or the id's text."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from extrarlhf.production.pseudonyms import battle_key, keyed_ids, player_pseudonym, session_key

IDS = ["player-1", "", "é-ünïcode", "a,b\"c\nd", "x" * 500]


@pytest.mark.parametrize("salt", [b"s" * 32, b"k" * 64, b"long-salt-" * 20, "sél-ünicode-0123456789abcdef-xyz".encode()])
def test_keyed_ids_are_hmac_sha256(salt):
    def reference(prefix: str, domain: str, raw: str) -> str:
        return f"{prefix}-" + hmac.new(salt, f"{domain}:{raw}".encode(), hashlib.sha256).hexdigest()[:32]

    assert keyed_ids(salt, "s", "session", IDS) == [reference("s", "session", raw) for raw in IDS]
    assert [player_pseudonym(salt, raw) for raw in IDS] == [reference("p", "player", raw) for raw in IDS]
    assert battle_key(salt, "b1") == reference("b", "battle", "b1")
    assert session_key(salt, "s1") == reference("s", "session", "s1")
    assert player_pseudonym(salt, None) is None
    assert keyed_ids(salt, "p", "player", []) == []
