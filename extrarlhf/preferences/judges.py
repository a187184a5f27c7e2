"""Judges: who may judge, how a judge is named in the data, and the synthetic judge.

A judge's name (a person's at the arena, a model's over MCP) is never stored: every record
holds ``judge-<HMAC-SHA256(key, name)>``, keyed by ``RLHF_JUDGE_KEY`` when set (at least 16
characters, the same on every machine that must recognise a judge again), else by a random
key kept in ``<preferences dir>/.judge_key`` (mode 0600, made once).

The synthetic judge stands in for people in tests and demos: it searches the task's state
with the search teacher (``search:baseline:greedy?sims=N``), scores each candidate by the
search's value (an action the search did not consider scores below every searched one; an
action that wins the battle at once scores ``WIN_NOW_BONUS`` above its value, as a careful
judge takes a sure win now), adds seeded Gaussian noise per judge and task, and prefers the
higher; within ``tie_margin`` it says tie.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import engine
from adapters import GreedyPolicy, SearchPolicy

from ..core.errors import InvalidArgument
from ..production.pseudonyms import keyed_ids
from .gold import wins_at_once

JUDGE_KINDS = ("human", "llm", "synthetic")
KEY_FILE = ".judge_key"
KEY_ENV = "RLHF_JUDGE_KEY"
MAX_JUDGE_NAME = 200
MIN_KEY_FILE_CHARS = 32  # the key file holds 64 hex characters when this package draws it
UNSEARCHED_PENALTY = 0.05
# the search's values do not discount time: a sure win now and a near-sure win later both score
# about 1. A careful judge takes the win now, so a move that wins at once scores this much more.
WIN_NOW_BONUS = 0.2
ARENA_DOMAIN = "arena-judge"  # arena judges' pseudonyms: no name typed over MCP or the CLI maps to one
INVITE_PREFIX = "inv1"


@dataclass(frozen=True)
class VerifiedJudge:
    """A judge whose identity the server established (an invite it verified, or its own browser
    session): ``pseudonym`` is used as is. A name typed anywhere is a ``str`` and never becomes
    one, so nobody can claim a verified judge by typing."""

    pseudonym: str


def judge_key(preferences_dir: str | os.PathLike[str]) -> bytes:
    env = os.environ.get(KEY_ENV)
    if env is not None:
        if len(env) < 16:
            raise InvalidArgument(f"{KEY_ENV} must be at least 16 characters long (it keys the judges' pseudonyms)")
        return env.encode()
    root = Path(preferences_dir)
    root.mkdir(parents=True, exist_ok=True)
    path = root / KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_bytes().strip()
        if len(key) < MIN_KEY_FILE_CHARS:
            raise InvalidArgument(f"the judges' key file {KEY_FILE} in the preferences dir holds {len(key)} "
                                  f"characters, fewer than {MIN_KEY_FILE_CHARS}: it keys the judges' pseudonyms, so "
                                  f"an empty or short key makes them guessable. Restore the file, set {KEY_ENV}, or "
                                  f"delete the file to draw a new key (every judge then gets a new pseudonym)")
        return key
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))
    return path.read_bytes().strip()


def judge_pseudonym(preferences_dir: str | os.PathLike[str], judge: Any) -> str:
    if isinstance(judge, VerifiedJudge):
        return judge.pseudonym
    if not isinstance(judge, str) or not judge.strip() or len(judge) > MAX_JUDGE_NAME:
        raise InvalidArgument(f"judge must be a name of 1 to {MAX_JUDGE_NAME} characters (it is stored only as a "
                              f"keyed pseudonym)")
    return keyed_ids(judge_key(preferences_dir), "judge", "judge", [judge.strip()])[0][:6 + 16]


def arena_judge(preferences_dir: str | os.PathLike[str], name: str) -> VerifiedJudge:
    """The arena judge named ``name`` (an invite's name, or ``browser-<session>``): a keyed
    pseudonym in the arena's own domain, so the same name typed over MCP is another judge."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_JUDGE_NAME:
        raise InvalidArgument(f"a judge name is 1 to {MAX_JUDGE_NAME} characters")
    pseudonym = keyed_ids(judge_key(preferences_dir), "judge", ARENA_DOMAIN, [name.strip()])[0][:6 + 16]
    return VerifiedJudge(pseudonym)


def _invite_mac(key: bytes, pseudonym: str) -> str:
    return hmac.new(key, f"{INVITE_PREFIX}\0{pseudonym}".encode(), hashlib.sha256).hexdigest()[:32]


def issue_invite(preferences_dir: str | os.PathLike[str], name: str) -> str:
    """An invite for the arena judge ``name`` (the operator's, ``preferences invite``): the
    judge's pseudonym and a MAC under the judges' key. It never holds the name; whoever opens
    it judges as that pseudonym, so it is given to that person only."""
    judge = arena_judge(preferences_dir, name)
    return f"{INVITE_PREFIX}.{judge.pseudonym}.{_invite_mac(judge_key(preferences_dir), judge.pseudonym)}"


def redeem_invite(preferences_dir: str | os.PathLike[str], invite: Any) -> VerifiedJudge:
    """The judge an invite admits; a forged, altered or foreign one is refused."""
    parts = invite.split(".") if isinstance(invite, str) and len(invite) <= 100 else []
    if len(parts) != 3 or parts[0] != INVITE_PREFIX or not parts[1].startswith("judge-") or not hmac.compare_digest(
            parts[2].encode(), _invite_mac(judge_key(preferences_dir), parts[1]).encode()):
        raise InvalidArgument("this invite link is not valid here (altered, cut short, or made for another "
                              "preferences dir or key): ask the operator for yours")
    return VerifiedJudge(parts[1])


def candidate_values(state: engine.State, actions: list[int], sims: int, seed: int) -> list[float]:
    """The search teacher's value of each action in ``state`` (see the module docstring)."""
    decision = SearchPolicy(GreedyPolicy(seed), sims, seed).decide(state.clone())
    legal = state.legal_actions()
    values = decision.outputs["action_values"] if decision.outputs else [None] * len(legal)
    searched = [v for v in values if v is not None]
    floor = (min(searched) if searched else 0.0) - UNSEARCHED_PENALTY
    by_action = {a: (v if v is not None else floor) for a, v in zip(legal, values)}
    player = state.to_move
    return [float(by_action[a]) + (WIN_NOW_BONUS if wins_at_once(state, a, player) else 0.0) for a in actions]


def synthetic_choice(values: tuple[float, float], noise: float, tie_margin: float, seed: int) -> str:
    rng = np.random.default_rng(seed)
    a, b = (v + noise * rng.standard_normal() for v in values)
    if abs(a - b) <= tie_margin:
        return "tie"
    return "A" if a > b else "B"
