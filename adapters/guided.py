"""The network-guided search actor ``search:<checkpoint>?sims=N&guide=<leaf>[&turns=T]`` (DESIGN
14.1): the search of adapters/search.py with a v5 network's policy as its prior and its value at
the leaves, after Gumbel AlphaZero's root search with few simulations (Danihelka et al. 2022).

At each decision, over the same determinized information sets as the greedy-rollout teacher
(:func:`adapters.search.determinize`; the generator seeded from the actor's seed and the
information-set digest, so states the player cannot tell apart give the same decision):

* the prior is the network's softmax over the legal actions in the first world (a world, never
  the real state: the network never sees a hidden card either), and the :data:`CONSIDERED` (8)
  most probable actions are searched (ties: the lower id);
* a simulation applies a candidate in a world and lets greedy (the C++ core's on the native
  backend) play on until ``turns`` turns have started (default 3, as the teacher's rollouts: the
  player's turn, the opponent's reply, the player's next turn); the leaf is scored for the
  searching player in [-1, 1] by the network's value (``guide=value``, negated when the
  opponent is to move there), by the greedy evaluation ``tanh(evaluate / 30)`` as the teacher
  scores it (``guide=rollout``: only the prior comes from the network) or by their mean
  (``guide=mix``, the default); a battle that ended scores 1, 0 or -1;
* the budget is spent by sequential halving over common worlds, as the teacher's: each round's
  leaves are scored with one batched onnxruntime call, the worse half of the candidates by
  ``log prior + sigma(q)`` is dropped, ``sigma(q) = (50 + max visits) * C_SCALE * q`` (the
  paper's completed-Q transform; c_visit 50), and the action played is the best survivor by
  the same score. The paper's Gumbel noise on the prior (exploration while training) and its
  c_scale 0.1 both measured worse at play (docs/training.md: 0.60 against greedy with both,
  0.75 without the noise, 0.80 with c_scale 1.0 too, the same 30 pairs), so there is no noise:
  the choice is deterministic given the worlds.

The decision records the network's prior as ``probabilities``, the mean leaf value per searched
action (``action_values``, null elsewhere), the visits and the chosen action's value, like the
teacher's. A network that cannot run (missing file, changed weights, failed or timed-out run,
non-finite outputs) makes the decision the greedy-rollout teacher's
(``search:baseline:greedy?sims=N``) with a warning: the battle is degraded, as with any model
fallback. Runs stopped at the model's time limit count as :class:`~adapters.onnx_models.ModelPolicy`'s
do: after ``max_timeouts`` in a row the network is disabled and the decisions fall back without
running it. ``&play=<spec>`` makes it a labeller as for the teacher (DAgger).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from engine import SplitMix64, State, backend, derive_seed, observations
from engine.native_state import NativeState

from . import work
from .baselines import GreedyPolicy, evaluate
from .decision import AdapterError, Decision
from .inference_limits import WATCHDOG, _unlimited_run_options
from .model_files import read_model_file
from .onnx_models import LoadedModel, ModelPolicy, _session_run, _timed_out, build_inputs, new_session
from .search import (DEFAULT_GUIDED_TURNS, GUIDES, LEAF_SCALE, MAX_GUIDED_TURNS, MAX_SIMS, SearchPolicy, _described,
                     determinize, information_set_digest, search_spec)

DEFAULT_GUIDE = "mix"
CONSIDERED = 8  # actions searched at the root (the prior's top k)
C_VISIT = 50.0
C_SCALE = 1.0  # the paper's 0.1 let the prior overrule the values (module docstring)


def guided_options(guide: str, turns: int) -> dict[str, Any]:
    """The provenance's ``guide`` object."""
    return {"leaf": guide, "turns": turns, "considered": CONSIDERED}


class GuidedSearchPolicy:
    """Plays ``search:<checkpoint>?sims=N&guide=<leaf>[&turns=T]`` (module docstring). One
    instance per battle; ``model`` is the v5 :class:`~adapters.onnx_models.ModelPolicy` of the
    checkpoint."""

    kind = "search"

    def __init__(self, model: ModelPolicy, sims: int = 32, seed: int = 0, spec: str | None = None,
                 guide: str = DEFAULT_GUIDE, turns: int = DEFAULT_GUIDED_TURNS, play: Any = None) -> None:
        if isinstance(sims, bool) or not isinstance(sims, int) or not 1 <= sims <= MAX_SIMS:
            raise AdapterError(f"sims must be an integer in 1..{MAX_SIMS}, got {sims!r}")
        if not isinstance(model, ModelPolicy) or model.kind != "v5":
            raise AdapterError(f"a guided search needs a v5 checkpoint (policy logits and a value), got "
                               f"{getattr(model, 'spec', type(model).__name__)!r} of kind "
                               f"{getattr(model, 'kind', None)!r}")
        if guide not in GUIDES:
            raise AdapterError(f"guide must be one of {', '.join(GUIDES)}, got {guide!r}")
        if isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= MAX_GUIDED_TURNS:
            raise AdapterError(f"turns must be an integer in 1..{MAX_GUIDED_TURNS}, got {turns!r}")
        if play is not None and not (hasattr(play, "decide") or hasattr(play, "act")):
            raise AdapterError(f"the play policy must have decide(state) or act(state), got {type(play).__name__}")
        self.model = model
        self.sims, self.seed, self.guide, self.turns, self.play = sims, seed, guide, turns, play
        self.spec = spec or search_spec(model.spec, sims, None if play is None else getattr(play, "spec", None),
                                        guide, turns)
        self.weights_hash = model.weights_hash
        self.greedy = GreedyPolicy(seed)
        # the fallback when the network cannot run: the greedy-rollout teacher, same seed and budget
        self.fallback = SearchPolicy(GreedyPolicy(seed), sims, seed)
        self._warning: dict | None = None

    # ------------------------------------------------------------------ the actor interface
    def provenance(self) -> dict[str, Any]:
        """What searched, for traces: the sims, the network (as the rollout policy: spec, kind,
        weights) and the guide's settings (and the play policy of a labeller)."""
        out: dict[str, Any] = {"sims": self.sims, "rollout": _described(self.model),
                               "guide": {**guided_options(self.guide, self.turns)}}
        if self.play is not None:
            out["play"] = _described(self.play)
        return out

    def act(self, state: State) -> int:
        return self.decide(state).action_id

    def decide_batch(self, states: list[State]) -> list[Decision]:
        # one instance holds one search at a time (its warning); searches of several battles,
        # each its own instance, step together through adapters.decide_many
        return [self.decide(s) for s in states]

    def decide(self, state: State) -> Decision:
        return decide_together([(self, state)])[0]

    def _begin(self, state: State) -> Decision | Generator[tuple[str, list[State]], Any, Any]:
        """A decision with nothing to search (one legal action), else the search as a generator
        that yields the states it needs the network on and returns what :meth:`_search` does."""
        if state.is_terminal:
            raise ValueError(f"cannot decide in a finished battle ({state!r})")
        legal = state.legal_actions()
        if len(legal) == 1:
            outputs = {"action_values": [None], "visits": [0]}
            return Decision(legal[0], outputs=outputs if self.play is None else {**outputs, "search_choice": legal[0]})
        self._warning = None
        player = state.to_move
        rng = SplitMix64(derive_seed(self.seed, f"guided:{information_set_digest(state, player)}"))
        return self._search(state, legal, player, rng)

    def _finish(self, state: State, found: tuple[int, list[float], list[int], list[float | None]] | None
                ) -> Decision:
        legal = state.legal_actions()
        if found is None:  # the network could not run: the greedy-rollout teacher decides, with the warning
            decision = self.fallback.decide(state)
            return Decision(decision.action_id, value=decision.value, warning=self._warning, outputs=decision.outputs) \
                if self.play is None else self._labelled(state, legal, decision)
        best, prior, visits, means = found
        values = [None if m is None else round(m, 6) for m in means]
        outputs: dict[str, Any] = {"action_values": values, "visits": visits}
        if self.play is not None:
            outputs["search_choice"] = best
            best = self._play_action(state, legal)
        return Decision(best, probabilities=tuple(prior), value=values[legal.index(best)], warning=self._warning,
                        outputs=outputs)

    def _labelled(self, state: State, legal: list[int], decision: Decision) -> Decision:
        outputs = {**(decision.outputs or {}), "search_choice": decision.action_id}
        best = self._play_action(state, legal)
        values = outputs.get("action_values") or [None] * len(legal)
        return Decision(best, value=values[legal.index(best)], warning=self._warning, outputs=outputs)

    def _play_action(self, state: State, legal: list[int]) -> int:
        decide = getattr(self.play, "decide", None)
        if decide is None:
            best = int(self.play.act(state))
        else:
            decision = decide(state)
            if decision.warning is not None and self._warning is None:
                self._warning = {**decision.warning, "message": f"the play policy: {decision.warning['message']}"}
            best = decision.action_id
        if best not in legal:
            raise AdapterError(f"the play policy chose action {best}, which is not legal here")
        return best

    # ------------------------------------------------------------------ the network
    def _group_key(self) -> tuple | None:
        """Searches whose network requests may share one run (the same loaded model and time
        limit), or None when this network cannot run now."""
        policy = self.model
        if policy.model is None or policy.load_warning is not None or policy.blocked() is not None:
            return None
        return id(policy.model), policy.timeout_s

    def _refusal(self) -> dict:
        policy = self.model
        return policy.load_warning or policy.blocked() or policy._warning("runtime_error", "no model")

    def _fail(self, warning: dict) -> None:
        if self._warning is None:
            self._warning = {**warning, "message": f"the guiding network: {warning['message']}",
                             "fallback": f"search:baseline:greedy?sims={self.sims}"}

    # ------------------------------------------------------------------ the search
    def _search(self, state: State, legal: list[int], player: int, rng: SplitMix64
                ) -> Generator[tuple[str, list[State]], Any, tuple[int, list[float], list[int], list[float | None]]
                               | None]:
        """Sequential halving over common worlds from the prior's top k: the chosen action, the prior over the
        legal actions, and per legal action the visits and the mean leaf value (None where not
        searched); None when the network cannot run. A generator: it yields what it needs the
        network for (``"prior"`` or ``"value"``) and on which states, and is sent (logits rows or
        None, values), or None when the network failed."""
        worlds = [determinize(state, player, rng)]
        root = yield "prior", [worlds[0]]
        if root is None:
            return None
        logits = root[0][0]
        logits = logits - logits.max()
        prior = np.exp(logits)
        prior /= prior.sum()
        logp = np.log(np.maximum(prior, 1e-30))
        score0 = {a: float(logp[i]) for i, a in enumerate(legal)}
        alive = sorted(legal, key=lambda a: (-score0[a], a))[:min(CONSIDERED, len(legal))]
        horizon = state.turn + self.turns
        totals = dict.fromkeys(alive, 0.0)
        visits = dict.fromkeys(alive, 0)
        rounds = max(1, math.ceil(math.log2(len(alive))))

        def score(a: int) -> float:
            most = max(visits.values())
            return score0[a] + (C_VISIT + most) * C_SCALE * totals[a] / max(visits[a], 1)

        for r in range(rounds):
            each = max(1, self.sims // (rounds * len(alive)))
            jobs = []
            for action in alive:
                for k in range(each):
                    j = visits[action] + k
                    while j >= len(worlds):
                        worlds.append(determinize(state, player, rng))
                    jobs.append((action, worlds[j]))
            work.check(len(jobs))  # the simulations count against the work scope, as the teacher's rollouts do
            values = yield from self._leaf_values(jobs, player, horizon)
            if values is None:
                return None
            for (action, _), v in zip(jobs, values):
                totals[action] += v
                visits[action] += 1
            if r < rounds - 1:
                alive.sort(key=lambda a: (-score(a), a))
                alive = alive[:math.ceil(len(alive) / 2)]
        best = max(alive, key=lambda a: (score(a), -a))
        means = [totals[a] / visits[a] if visits.get(a) else None for a in legal]
        return best, [float(p) for p in prior], [visits.get(a, 0) for a in legal], means

    def _leaf_values(self, jobs: list[tuple[int, State]], player: int, horizon: int
                     ) -> Generator[tuple[str, list[State]], Any, list[float] | None]:
        """Each (action, world) simulated to its leaf and scored for ``player``; the leaves that
        need the network are scored by one batched run."""
        core = backend.native()
        act = self.greedy.act if core is None else core.greedy_act  # the same moves, and evaluate the same floats
        score = evaluate if core is None else core.evaluate
        leaves = []
        for action, world in jobs:
            leaf = world.clone()
            leaf.apply(action)
            # on the native core, the core plays the rollout (a core built before greedy_until: its battle
            # object is stepped from here, the wrapper's per-call cost being most of a step)
            battle = leaf._core if isinstance(leaf, NativeState) else leaf
            until = getattr(battle, "greedy_until", None)
            if until is not None:
                until(horizon)
            else:
                while not battle.is_terminal and battle.turn < horizon:
                    battle.apply(act(battle))
            leaves.append(leaf)
        out = [0.0] * len(leaves)
        open_ = []
        for i, leaf in enumerate(leaves):
            if leaf.is_terminal:
                out[i] = 0.0 if leaf.winner == 0 else (1.0 if leaf.winner == player else -1.0)
            else:
                open_.append(i)
                if self.guide != "value":
                    out[i] = math.tanh(score(leaf, player) / LEAF_SCALE)
        if self.guide == "rollout" or not open_:
            return out
        net = yield "value", [leaves[i] for i in open_]
        if net is None:
            return None
        for i, v in zip(open_, net[1].tolist()):
            v = v if leaves[i].to_move == player else -v
            out[i] = v if self.guide == "value" else 0.5 * (out[i] + v)
        return out


# ---------------------------------------------------------------------------- batching
# The leaves need the value alone. A v5 network's value that reads only the observation (the
# trainer's value head does) runs as its own small graph, extracted from the file once per
# content, checked on its first batch against the whole network's value (the same float32 bits,
# else the whole network runs), so a leaf does not pay for scoring every legal action.
_VALUE_GRAPHS: dict[str, Any] = {}  # file sha256 -> session, "unchecked" flag, or None (use the whole network)
_VALUE_LOCK = threading.Lock()


def _value_graph(model: LoadedModel) -> tuple[Any, bool] | None:
    """(the value-only session, whether it is still to be checked), or None."""
    with _VALUE_LOCK:
        if model.file_sha256 not in _VALUE_GRAPHS:
            while len(_VALUE_GRAPHS) >= 16:  # as many as the loaded-model cache keeps
                _VALUE_GRAPHS.pop(next(iter(_VALUE_GRAPHS)))
            _VALUE_GRAPHS[model.file_sha256] = _extract_value(model)
        found = _VALUE_GRAPHS[model.file_sha256]
    return found


def _extract_value(model: LoadedModel) -> tuple[Any, bool] | None:
    try:
        import onnx
        from onnx.utils import Extractor

        data = read_model_file(model.path)
        if hashlib.sha256(data).hexdigest() != model.file_sha256:  # changed since it was loaded
            return None
        proto = onnx.load_from_string(data)
        sub = Extractor(proto).extract_model(["obs"], ["value"])
        if [i.name for i in sub.graph.input] != ["obs"]:
            return None
        onnx.checker.check_model(sub)
        return new_session(sub.SerializeToString()), True
    except Exception:  # noqa: BLE001 - any graph the extractor cannot cut: the whole network scores leaves
        return None


def _run(policy: ModelPolicy, session: Any, names: list[str], feeds: dict[str, np.ndarray],
         legal: list[list[int]] | None) -> Any:
    """One run under the policy's time limit (``legal``: the whole v5 network, in buckets)."""
    model = policy.model
    assert model is not None
    run = None if policy.timeout_s is None else WATCHDOG.arm(policy.timeout_s)
    try:
        options = _unlimited_run_options() if run is None else run.options
        if legal is not None:
            return _session_run(model, "v5", feeds, legal, options)
        return session.run(names, feeds, options)
    except Exception as exc:
        exc.fired = run is not None and run.fired  # type: ignore[attr-defined]
        raise
    finally:
        if run is not None:
            WATCHDOG.disarm(run)


def _run_network(policy: ModelPolicy, states: list[State], value_only: bool = False
                 ) -> tuple[list[np.ndarray] | None, np.ndarray] | dict:
    """(logits over each state's legal actions, or None when ``value_only``; the value for its
    player to move, clipped to [-1, 1]) of ``policy``'s network in one run (under its time
    limit), or the warning of why it could not run."""
    model = policy.model
    assert model is not None
    graph = _value_graph(model) if value_only else None
    started = time.perf_counter()
    try:
        if graph is not None:
            session, unchecked = graph
            value = _run(policy, session, ["value"], {"obs": observations([(s, s.to_move) for s in states])}, None)[0]
            if unchecked:
                feeds, legal = build_inputs("v5", states, model.mask_dtype)
                whole = _run(policy, None, [], feeds, legal)[1]
                ok = isinstance(value, np.ndarray) and np.array_equal(value, whole)
                with _VALUE_LOCK:
                    _VALUE_GRAPHS[model.file_sha256] = (session, False) if ok else None
                value = value if ok else whole
            rows = None
        else:
            feeds, legal = build_inputs("v5", states, model.mask_dtype)
            logits, value = _run(policy, None, [], feeds, legal)
            logits = np.asarray(logits, dtype=np.float64)
            rows = [logits[i, :len(ids)] for i, ids in enumerate(legal)]
    except Exception as exc:  # noqa: BLE001 - any onnxruntime failure: the decisions fall back
        if getattr(exc, "fired", False):  # the watchdog stopped it: counted (the model disabled) as ModelPolicy's
            stopped = _timed_out([(policy, states[0])], policy.timeout_s, time.perf_counter() - started)  # type: ignore
            return stopped[0].warning or policy._warning("timeout", "the run was stopped")
        message = f"onnxruntime failed on {policy.spec}: {type(exc).__name__}: {exc}"
        return policy._warning("runtime_error", message[:400])
    if model.health.timeouts_in_row:
        model.health.timeouts_in_row = 0  # a run that finished breaks the row
    value = np.asarray(value, dtype=np.float64)
    if value.shape != (len(states), 1) or not np.isfinite(value).all() \
            or (rows is not None and not all(np.isfinite(r).all() for r in rows)):
        return policy._warning("non_finite_output", f"{policy.spec} returned non-finite logits or values, or a value "
                                                    f"of the wrong shape")
    return rows, np.clip(value[:, 0], -1.0, 1.0)


def decide_together(items: Sequence[tuple[GuidedSearchPolicy, State]]) -> list[Decision]:
    """The decisions of several guided searches (the battles of a series or a benchmark, side by
    side: ``adapters.decide_many`` sends them here), in order. The searches step together: at
    each step the states that every search waits on are scored by one network run per loaded
    model, so a chunk of 16 battles costs about as many runs as one. A row's outputs do not
    depend on the rest of its batch (:mod:`adapters.onnx_models`), so each decision is the one
    its search makes alone; a run that fails makes every search in it fall back."""
    results: list[Decision | None] = [None] * len(items)
    waiting: list[tuple[int, Any, tuple[str, list[State]]]] = []  # (item, its generator, what it asked for)

    def advance(i: int, gen: Any, sent: Any) -> None:
        try:
            waiting.append((i, gen, gen.send(sent)))
        except StopIteration as stop:
            policy, state = items[i]
            results[i] = policy._finish(state, stop.value)

    for i, (policy, state) in enumerate(items):
        begun = policy._begin(state)
        if isinstance(begun, Decision):
            results[i] = begun
        else:
            advance(i, begun, None)
    while waiting:
        step, groups = waiting, {}
        waiting = []
        for entry in step:
            policy = items[entry[0]][0]
            key = policy._group_key()
            if key is None:
                policy._fail(policy._refusal())
                advance(entry[0], entry[1], None)
            else:
                groups.setdefault((key, entry[2][0]), []).append(entry)
        for (_, what), group in groups.items():
            states = [s for _, _, (_, asked) in group for s in asked]
            out = _run_network(items[group[0][0]][0].model, states, value_only=what == "value")
            start = 0
            for i, gen, (_, asked) in group:
                if isinstance(out, dict):
                    items[i][0]._fail(out)
                    advance(i, gen, None)
                    continue
                rows, values = out
                n = len(asked)
                start += n
                advance(i, gen, (None if rows is None else rows[start - n:start], values[start - n:start]))
    return results  # type: ignore[return-value]


GuidedSearchPolicy.decide_together = staticmethod(decide_together)  # what adapters.decide_many looks for
