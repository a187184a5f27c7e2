"""ONNX policies: loading a model (cached per process) and :class:`ModelPolicy`, which
plays a model and falls back to a baseline (with a warning) whenever the model cannot act.
The kinds' inputs and outputs, signatures, kind detection and weights hashes are
onnx_contracts.py's.

``obs`` is the observation of the player to move; the candidate actions are
``state.legal_actions()`` in that order, padded to the batch's largest A with mask 0 (the
adapter ignores padded positions whatever the model puts there). On the native backend the
core builds a batch's feed in one call (``engine.features.native_model_inputs``, the same
bytes), and a batch of 32 or more states runs as 2-4 runs of states with similar numbers of
legal actions, each padded to its own widest (:func:`_buckets`; every row's outputs have the
same bits, only less padding is computed), all under the one time limit of the batch.

Loaded models (weights hash, signature, onnxruntime session) are cached per process by
path and file content (sha256), so the many per-battle policies of a series share one
session and :func:`decide_many` can batch across them.

Inference time limits (a watchdog per process, models disabled after timeouts in a row):
inference_limits.py.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import ACTION_FEATURE_DIM, ACTION_SPACE_SIZE, SplitMix64, State, derive_seed, observations
from engine.features import native_model_inputs

from .baselines import GreedyPolicy, RandomPolicy
from .decision import AdapterError, Decision, KindMismatch
from .onnx_contracts import OUTPUT_NAMES, _MAX_MESSAGE, _graphs, canonical_kind, check_kind, signature, weights_hash
from .inference_limits import (WATCHDOG, ModelHealth, _unlimited_run_options, disable_seconds, inference_timeout,
                               max_timeouts_in_row)
from .model_files import ModelFileError, read_model_file

if TYPE_CHECKING:  # onnx and onnxruntime are imported where a model is read or run (start-up cost)
    import onnx
    import onnxruntime as ort

FALLBACKS = {"greedy": GreedyPolicy, "random": RandomPolicy}


# ---------------------------------------------------------------------------------- loading
def new_session(model_bytes: bytes) -> ort.InferenceSession:
    """One-threaded CPU session: series run several worker processes at once."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 4  # failures come back as Decision warnings, not stderr chatter
    return ort.InferenceSession(model_bytes, sess_options=options, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class LoadedModel:
    """One model file as loaded: shared by every policy that plays it in this process."""

    path: str
    file_sha256: str
    weights_hash: str
    signature: dict[str, list[dict[str, Any]]]
    session: ort.InferenceSession
    mask_dtype: type
    health: ModelHealth = field(default_factory=ModelHealth, compare=False, repr=False)


class LoadFailure(Exception):
    """A model that cannot be loaded; ``kind`` is a warning kind (missing_file, runtime_error)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


_CACHE: OrderedDict[tuple, LoadedModel] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 16


def clear_model_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def _uses_external_data(model: onnx.ModelProto) -> bool:
    import onnx

    return any(t.data_location == onnx.TensorProto.EXTERNAL for g in _graphs(model.graph) for t in g.initializer)


def load_model(path: str | os.PathLike[str]) -> LoadedModel:
    """Load (or reuse) a model file; :class:`LoadFailure` if it is missing or unusable (read by
    adapters.model_files: a link, a FIFO, a device or a file above the size cap is refused).

    The file is read and hashed every time (about a millisecond per MB), so a file changed
    in place is never served from the cache; parsing, hashing weights and building the
    session happen once per distinct content."""
    p = os.fspath(path)
    try:
        data = read_model_file(p)  # a link, a FIFO, a device or a file above the cap is refused unread
    except ModelFileError as exc:
        raise LoadFailure("missing_file" if exc.code == "not_found" else "runtime_error", str(exc)) from None
    except OSError as exc:
        raise LoadFailure("runtime_error", f"cannot read model file {p}: {exc}") from None
    file_sha = hashlib.sha256(data).hexdigest()
    key = (os.path.realpath(p), file_sha)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            _CACHE.move_to_end(key)
            return cached
    import onnx

    try:
        model = onnx.load_from_string(data)
    except Exception as exc:  # noqa: BLE001 - protobuf raises several types for garbage
        raise LoadFailure("runtime_error", f"{p} is not a readable ONNX model: {_short(exc)}") from None
    if _uses_external_data(model):
        raise LoadFailure("runtime_error", f"{p} keeps its weights in external data files, which are not supported; "
                                           f"re-save it with onnx.save(model, path, save_as_external_data=False)")
    try:
        session = new_session(data)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise LoadFailure("runtime_error", f"onnxruntime cannot load {p}: {_short(exc)}") from None
    mask_dtype: type = np.float32
    for inp in session.get_inputs():
        if inp.name == "action_mask" and inp.type == "tensor(bool)":
            mask_dtype = np.bool_
    loaded = LoadedModel(path=p, file_sha256=file_sha, weights_hash=weights_hash(model), signature=signature(model),
                         session=session, mask_dtype=mask_dtype)
    with _CACHE_LOCK:
        loaded = _CACHE.setdefault(key, loaded)
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return loaded


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."


# ---------------------------------------------------------------------------------- inputs
def build_inputs(kind: str, states: Sequence[State], mask_dtype: type = np.float32
                 ) -> tuple[dict[str, np.ndarray], list[list[int]]]:
    """The model feed for ``states`` (each seen by its player to move) and their legal ids.

    Action inputs are padded to the largest number of legal actions in the batch, mask 0."""
    kind = canonical_kind(kind)
    if kind != "legacy_onnx":
        native = native_model_inputs(states)
        if native is not None:  # the core's one-call feed: the same bytes
            obs, feats, counts, legal = native
            mask = _valid(feats.shape[1], counts).astype(mask_dtype)
            return {"obs": obs, "action_features": feats, "action_mask": mask}, legal
    legal = [s.legal_actions() for s in states]
    for s, ids in zip(states, legal):
        if not ids:
            raise ValueError(f"cannot decide in a finished battle ({s!r})")
    n = len(states)
    obs = observations([(s, s.to_move) for s in states])
    if kind == "legacy_onnx":
        return {"obs": obs}, legal
    width = max(len(ids) for ids in legal)
    feats = np.zeros((n, width, ACTION_FEATURE_DIM), dtype=np.float32)
    mask = np.zeros((n, width), dtype=mask_dtype)
    for i, (s, ids) in enumerate(zip(states, legal)):
        feats[i, :len(ids)] = s.action_features(ids)
        mask[i, :len(ids)] = 1
    return {"obs": obs, "action_features": feats, "action_mask": mask}, legal


# ---------------------------------------------------------------------------------- policy
class ModelPolicy:
    """Plays an ONNX model of a given kind for the player to move.

    Deterministic argmax over the legal actions by default (ties: the lowest action id);
    ``sample=True`` draws from the softmax with this policy's own SplitMix64 (seeded by
    ``seed``). Whenever the model cannot act the ``fallback`` baseline plays and the
    :class:`Decision` carries a warning; nothing raises at play time except on a finished
    battle (a caller bug). Load-time problems (missing file, weights hash different from
    ``expected_weights_hash``, signature not fitting ``kind``, onnxruntime refusing the
    file) make every decision a fallback.

    ``timeout_s`` limits each ``session.run`` (default: env ``RLHF_INFERENCE_TIMEOUT_S``,
    else 2 s; 0: no limit); a run past it is stopped and the decision falls back with a
    ``timeout`` warning. After ``max_timeouts`` timed-out runs in a row (default: env
    ``RLHF_INFERENCE_MAX_TIMEOUTS``, else 3; 0: never) the model is disabled for the rest
    of the battle (see the module docstring). Bad values raise :class:`AdapterError`.
    """

    def __init__(self, path: str | os.PathLike[str], kind: str, expected_weights_hash: str | None = None,
                 seed: int = 0, fallback: str = "greedy", sample: bool = False, spec: str | None = None,
                 timeout_s: float | None = None, max_timeouts: int | None = None) -> None:
        self.kind = canonical_kind(kind)
        self.timeout_s = inference_timeout(timeout_s)
        self.max_timeouts = max_timeouts_in_row(max_timeouts)
        disable_seconds(strict=True)
        self.disabled_warning: dict[str, str] | None = None  # set once the model is disabled for timeouts
        if fallback not in FALLBACKS:
            raise AdapterError(f"unknown fallback baseline {fallback!r}; available: {', '.join(FALLBACKS)}")
        if not isinstance(sample, bool):
            raise AdapterError(f"sample must be True or False, got {sample!r}")
        self.path = os.fspath(path)
        self.spec = spec if spec is not None else f"{self.kind}:{self.path}"
        self.seed = seed
        self.sample = sample
        self.expected_weights_hash = expected_weights_hash
        self.rng = SplitMix64(seed)
        self.fallback_spec = f"baseline:{fallback}"
        self.fallback_policy = FALLBACKS[fallback](derive_seed(seed, "fallback"))
        self.weights_hash: str | None = None  # of the file found, even when it is not trusted
        self.load_warning: dict[str, str] | None = None
        self.model: LoadedModel | None = None
        try:
            loaded = load_model(self.path)
        except LoadFailure as failure:
            self.load_warning = self._warning(failure.kind, failure.message)
            return
        self.weights_hash = loaded.weights_hash
        if expected_weights_hash is not None and loaded.weights_hash != expected_weights_hash:
            self.load_warning = self._warning(
                "hash_mismatch", f"weights_hash of {self.path} is {loaded.weights_hash}, expected "
                                 f"{expected_weights_hash}: the file changed since it was registered")
            return
        try:
            check_kind(self.kind, loaded.signature)
        except KindMismatch as exc:
            self.load_warning = self._warning("kind_mismatch", str(exc))
            return
        self.model = loaded

    def reseeded(self, seed: int) -> "ModelPolicy":
        """This policy for another battle: what ``ModelPolicy(same arguments, seed=seed)`` builds
        while the file and the environment are unchanged (the same loaded model, checks and
        limits; its own generator and fallback from ``seed``), without reading and hashing
        the file again. The caller decides when that holds (the vector env checks the files'
        stat and the limit variables, :mod:`extrarlhf.envs.vector`)."""
        other = object.__new__(ModelPolicy)
        other.__dict__.update(self.__dict__)
        other.disabled_warning = None
        other.load_warning = None if self.load_warning is None else dict(self.load_warning)
        other.seed = seed
        other.rng = SplitMix64(seed)
        other.fallback_policy = FALLBACKS[self.fallback_spec.split(":", 1)[1]](derive_seed(seed, "fallback"))
        return other

    @property
    def degraded(self) -> bool:
        """True when the model could not be loaded: every decision is a fallback."""
        return self.model is None

    def blocked(self) -> dict[str, str] | None:
        """The ``timeout`` warning when this policy may not run its model now (it, or the model
        file in this process, was disabled for timing out), else None. Sticky for the policy:
        once disabled it stays so for the rest of its battle."""
        if self.disabled_warning is None:
            health = self.model.health if self.model is not None else None
            if health is not None and health.disabled():
                left = max(0.0, health.disabled_until - time.monotonic())  # type: ignore[operator]
                self.disabled_warning = self._warning(
                    "timeout", f"{self.spec} is disabled for the rest of this battle: {health.disabled_reason}; "
                               f"the model file stays disabled in this process for another {left:.0f} s")
        return self.disabled_warning

    def _warning(self, kind: str, message: str) -> dict[str, str]:
        return {"kind": kind, "message": message, "fallback": self.fallback_spec}

    def fallback(self, state: State, warning: dict[str, str]) -> Decision:
        return Decision(action_id=self.fallback_policy.act(state), warning=dict(warning))

    def act(self, state: State) -> int:
        """The action only (drops the warning: prefer :meth:`decide`)."""
        return self.decide(state).action_id

    def decide(self, state: State) -> Decision:
        return self.decide_batch([state])[0]

    def decide_batch(self, states: Sequence[State]) -> list[Decision]:
        """Decisions for several states with one model call (one ``session.run``, or a few of
        similar widths for a large batch: see the module docstring)."""
        if not states:
            return []
        if self.model is None or self.blocked() is not None:
            return decide_many([(self, s) for s in states])
        return _run_group([(self, s) for s in states])

    def describe(self) -> dict[str, Any]:
        """What played, for traces: spec, kind and the weights hash (None if the model did not load)."""
        return {"spec": self.spec, "kind": self.kind, "weights_hash": self.weights_hash,
                "degraded": self.degraded, "load_warning": self.load_warning}


def decide(policy: Any, state: State) -> Decision:
    """A Decision from any policy: ``decide`` when it has one, else ``Decision(policy.act(state))``."""
    fn = getattr(policy, "decide", None)
    return fn(state) if fn is not None else Decision(action_id=int(policy.act(state)))


def decide_many(items: Sequence[tuple[Any, State]]) -> list[Decision]:
    """Decisions for (policy, state) pairs, in order. Model policies that share a loaded model
    (same file), kind and time limits are evaluated together with one ``session.run``; each
    still samples with its own generator, so a battle's choices do not depend on what else
    was in the batch (unless the batch's run times out: then all of it falls back). Policies
    whose class has ``decide_together`` (the guided search) decide through it, together."""
    return _decide(items, ids_only=False)  # type: ignore[return-value]


def _decide(items: Sequence[tuple[Any, State]], ids_only: bool) -> list[Decision] | list[int]:
    results: list[Any] = [None] * len(items)
    groups: dict[tuple[int, str, float | None, int], list[int]] = {}
    together: dict[Any, list[int]] = {}  # policies that decide side by side (the guided search, adapters/guided.py)
    for i, (policy, state) in enumerate(items):
        if state.is_terminal:
            raise ValueError(f"cannot decide in a finished battle ({state!r})")
        if hasattr(type(policy), "decide_together"):
            together.setdefault(type(policy).decide_together, []).append(i)
        elif isinstance(policy, ModelPolicy):
            if policy.model is None:
                results[i] = policy.fallback(state, policy.load_warning or policy._warning("runtime_error", "no model"))
            elif (blocked := policy.blocked()) is not None:
                results[i] = policy.fallback(state, blocked)
            else:
                groups.setdefault((id(policy.model), policy.kind, policy.timeout_s, policy.max_timeouts),
                                  []).append(i)
        else:
            results[i] = decide(policy, state)
    for decide_all, indexes in together.items():
        for i, decision in zip(indexes, decide_all([items[i] for i in indexes])):
            results[i] = decision
    if ids_only:
        results = [r if r is None else r.action_id for r in results]
    for indexes in groups.values():
        group = [items[i] for i in indexes]
        for i, decision in zip(indexes, _run_group(group, ids_only)):
            results[i] = decision
    return results


def decide_actions(items: Sequence[tuple[Any, State]]) -> list[int]:
    """``[d.action_id for d in decide_many(items)]`` (the same runs, draws, fallbacks and
    warnings' effects), without building the Decisions: a group of argmax policies whose
    rows are all usable costs its run and one argmax (the vector env's opponents)."""
    return _decide(items, ids_only=True)  # type: ignore[return-value]


def _run_group(items: list[tuple[ModelPolicy, State]], ids_only: bool = False) -> list[Decision] | list[int]:
    """One session.run for policies sharing one model, kind and limits (under the watchdog
    when there is a time limit), then per-row checks and choices (action ids only when
    ``ids_only``)."""
    first = items[0][0]
    model, kind, limit = first.model, first.kind, first.timeout_s
    assert model is not None
    feeds, legal = build_inputs(kind, [s for _, s in items], model.mask_dtype)
    run = None
    started = time.perf_counter()
    try:
        if limit is None:
            outputs = _session_run(model, kind, feeds, legal, _unlimited_run_options())
        else:
            run = WATCHDOG.arm(limit)
            try:
                outputs = _session_run(model, kind, feeds, legal, run.options)
            finally:
                WATCHDOG.disarm(run)
    except Exception as exc:  # noqa: BLE001 - any onnxruntime failure becomes a fallback
        if run is not None and run.fired:
            decisions = _timed_out(items, limit, time.perf_counter() - started)  # type: ignore[arg-type]
        else:
            decisions = [p.fallback(s, p._warning("runtime_error", f"onnxruntime failed on {first.spec}: "
                                                                   f"{_short(exc)}")) for p, s in items]
        return [d.action_id for d in decisions] if ids_only else decisions
    if model.health.timeouts_in_row:
        model.health.timeouts_in_row = 0  # a run that finished (even just past its deadline) breaks the row
    return decisions_from_outputs(items, kind, legal, outputs, ids_only)


# What one more session.run costs, in padded action rows of a width-32 v5 MLP (about 60 us
# against about 0.3 us a row, benchmarks/vector_env.py's checkpoint opponents on 2 cores).
_RUN_COST_ROWS = 192
_MIN_SPLIT = 32  # batches smaller than this run whole


def _buckets(counts: list[int]) -> list[np.ndarray] | None:
    """Rows of one batch split into 2-4 runs by their number of legal actions (each run padded
    to its own widest row, not the batch's) when that pads fewer rows than the run it adds
    costs; None to run the batch whole. Every row's outputs are the same bits either way (a row
    of a batched run equals its one-row run: tests/envs/test_vector_env.py)."""
    n = len(counts)
    if n < _MIN_SPLIT:
        return None
    c = np.asarray(counts)
    order = np.argsort(c, kind="stable")
    best, best_cost = None, n * int(c.max()) + _RUN_COST_ROWS
    for parts in (2, 3, 4):
        splits = np.array_split(order, parts)
        cost = sum(len(idx) * int(c[idx].max()) for idx in splits) + parts * _RUN_COST_ROWS
        if cost < best_cost:
            best, best_cost = splits, cost
    return best


def _session_run(model: LoadedModel, kind: str, feeds: dict[str, np.ndarray], legal: list[list[int]],
                 options: ort.RunOptions) -> Sequence[Any]:
    """``session.run`` of one group's feed: in runs of rows with similar numbers of legal
    actions (:func:`_buckets`) reassembled to the whole batch's shapes (padding cells 0: masked
    out), or whole. A run whose outputs are not the float32 shapes the contract names sends the
    batch back to one whole run, whose checks then say what was wrong."""
    names = list(OUTPUT_NAMES[kind])
    counts = [len(ids) for ids in legal]
    buckets = None if kind == "legacy_onnx" else _buckets(counts)
    if buckets is None:
        return model.session.run(names, feeds, options)
    n, width = feeds["action_mask"].shape
    scores = np.zeros((n, width), np.float32)
    values = np.zeros((n, 1), np.float32) if kind == "v5" else None
    c = np.asarray(counts)
    for idx in buckets:
        w = int(c[idx].max())
        out = model.session.run(names, {"obs": feeds["obs"][idx], "action_features": feeds["action_features"][idx, :w],
                                        "action_mask": feeds["action_mask"][idx, :w]}, options)
        first = out[0]
        if not isinstance(first, np.ndarray) or first.dtype != np.float32 or first.shape != (len(idx), w):
            return model.session.run(names, feeds, options)
        scores[idx, :w] = first
        if values is not None:
            value = out[1]
            if not isinstance(value, np.ndarray) or value.dtype != np.float32 or value.shape != (len(idx), 1):
                return model.session.run(names, feeds, options)
            values[idx] = value
    return [scores] if values is None else [scores, values]


def _timed_out(items: list[tuple[ModelPolicy, State]], limit: float, elapsed: float) -> list[Decision]:
    """Fallbacks with a ``timeout`` warning for a run the watchdog stopped; disables the model
    after ``max_timeouts`` in a row (the policies of this run for their battle, the model file
    in this process for ``RLHF_INFERENCE_DISABLE_S``)."""
    first = items[0][0]
    health = first.model.health  # type: ignore[union-attr]
    health.timeouts_in_row += 1
    in_row, cap = health.timeouts_in_row, first.max_timeouts
    window = disable_seconds() if cap else 0.0
    batch = f" (one run for {len(items)} decisions)" if len(items) > 1 else ""
    message = (f"inference of {first.spec} exceeded its {limit:g} s time limit{batch} and was stopped after "
               f"{elapsed:.2f} s; {in_row} timeout(s) in a row")
    if not cap:
        message += " (the model is never disabled: max_timeouts is 0)"
    elif in_row < cap:
        message += (f"; after {cap} in a row the model is disabled for the rest of the battle"
                    + (f" and for {window:g} s in this process (e.g. the rest of a series)" if window else ""))
    else:
        reason = f"{in_row} inference runs in a row exceeded the {limit:g} s time limit"
        message += (": the model is now disabled for the rest of the battle"
                    + (f" and for {window:g} s in this process (e.g. the rest of a series)" if window else ""))
        health.disabled_until = time.monotonic() + window
        health.disabled_reason = reason
    decisions = [p.fallback(s, p._warning("timeout", message)) for p, s in items]
    if cap and in_row >= cap:
        for p, _ in items:
            if p.disabled_warning is None:
                p.disabled_warning = p._warning("timeout",
                                                f"{p.spec} is disabled for the rest of this battle: {reason}")
    return decisions


def decisions_from_outputs(items: Sequence[tuple[ModelPolicy, State]], kind: str, legal: list[list[int]],
                           outputs: Sequence[Any], ids_only: bool = False) -> list[Decision] | list[int]:
    """The adapter's own work after ``session.run``: shape checks, finiteness checks, masking,
    softmax over the legal actions, argmax or a seeded draw, one Decision per row (its action
    id only when ``ids_only``: the softmax is then skipped where no row needs it)."""
    if ids_only:
        lean = _argmax_ids(items, kind, legal, outputs)
        if lean is not None:
            return lean
        return [d.action_id for d in decisions_from_outputs(items, kind, legal, outputs)]  # type: ignore[union-attr]
    first = items[0][0]
    n, counts = len(items), [len(ids) for ids in legal]

    def all_fallback(warning_kind: str, message: str) -> list[Decision]:
        return [p.fallback(s, p._warning(warning_kind, message)) for p, s in items]

    width = max(counts)
    expected_shapes = {"legacy_onnx": [(n, ACTION_SPACE_SIZE)], "action_onnx": [(n, width)],
                       "v5": [(n, width), (n, 1)]}[kind]
    for name, out, want in zip(OUTPUT_NAMES[kind], outputs, expected_shapes):
        out = np.asarray(out)
        if out.shape != want or not np.issubdtype(out.dtype, np.floating):
            return all_fallback("bad_output_shape", f"{first.spec} returned {name} {out.dtype}{list(out.shape)}, "
                                                    f"expected float{list(want)} for a batch of {n}")
    raw = np.asarray(outputs[0], dtype=np.float64)
    valid = _valid(width, counts)
    if kind == "legacy_onnx":
        ids = np.zeros(valid.shape, dtype=np.int64)
        for i, row in enumerate(legal):
            ids[i, :len(row)] = row
        raw = np.take_along_axis(raw, ids, axis=1)  # logits of the legal ids only
    masked = np.where(valid, raw, -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        broken = ~(masked < np.inf).all(axis=1)  # NaN or +inf on a legal action (padding is -inf)
        values = None
        if kind == "v5":
            values = np.asarray(outputs[1], dtype=np.float64)[:, 0]
            broken |= ~np.isfinite(values)
        peak = masked.max(axis=1)
        usable = (peak > -np.inf) & ~broken  # not broken and at least one finite legal score
        all_usable = bool(usable.all())
        if not all_usable:
            peak[~usable] = 0.0
        expd = np.exp(masked - peak[:, None])
        sums = expd.sum(axis=1)
        if not all_usable:
            sums[~usable] = 1.0
        probs = expd / sums[:, None]
    best = masked.argmax(axis=1).tolist()
    prob_rows = probs.tolist()
    value_list = values.tolist() if values is not None else [None] * n
    if all_usable and not any(p.sample for p, _ in items):  # the common case, kept lean
        return [_decision(ids[k], tuple(row[:c]), v)
                for ids, k, row, c, v in zip(legal, best, prob_rows, counts, value_list)]
    broken_list, usable_list = broken.tolist(), usable.tolist()
    decisions: list[Decision] = []
    for i, (policy, state) in enumerate(items):
        c = counts[i]
        if not usable_list[i]:
            if broken_list[i]:
                what = "logits" if kind != "action_onnx" else "scores"
                message = (f"{policy.spec} returned NaN or +inf {what}" + (" or value" if kind == "v5" else "")
                           + f" for this state ({c} legal actions)")
                decisions.append(policy.fallback(state, policy._warning("non_finite_output", message)))
            else:
                decisions.append(policy.fallback(state, policy._warning(
                    "illegal_choice", f"{policy.spec} gave no legal action a finite score (all {c} are -inf)")))
            continue
        row = prob_rows[i][:c]
        k = _sample(policy.rng, row) if policy.sample else best[i]
        decisions.append(_decision(legal[i][k], tuple(row), value_list[i]))
    return decisions


def _argmax_ids(items: Sequence[tuple[ModelPolicy, State]], kind: str, legal: list[list[int]],
                outputs: Sequence[Any]) -> list[int] | None:
    """The action ids of :func:`decisions_from_outputs` in its common case (no policy samples,
    the outputs have the expected shapes and every row is usable: finite legal scores and
    value): the argmax of each row over its legal actions, the same index it takes there
    (the first of the largest). None otherwise: the caller takes the full path."""
    if kind == "legacy_onnx" or any(p.sample for p, _ in items):
        return None
    n, counts = len(items), [len(ids) for ids in legal]
    width = max(counts)
    out = outputs[0]
    if not isinstance(out, np.ndarray) or out.shape != (n, width) or out.dtype != np.float32:
        return None
    if kind == "v5":
        value = outputs[1]
        if not isinstance(value, np.ndarray) or value.shape != (n, 1) or value.dtype != np.float32 \
                or not np.isfinite(value).all():
            return None
    valid = _valid(width, counts)
    masked = np.where(valid, out.astype(np.float64), -np.inf)
    with np.errstate(invalid="ignore"):
        if not (masked < np.inf).all() or not (masked.max(axis=1) > -np.inf).all():
            return None  # NaN or +inf on a legal action, or no finite legal score: the full path
    return [ids[k] for ids, k in zip(legal, masked.argmax(axis=1).tolist())]


_ARANGE = np.arange(256)


def _valid(width: int, counts: Any) -> np.ndarray:
    """[n, width] bool: True on each row's first ``counts[i]`` positions (its legal actions)."""
    return (_ARANGE[:width] if width <= _ARANGE.size else np.arange(width)) < np.asarray(counts)[:, None]
_new_decision = object.__new__


def _decision(action_id: int, probabilities: tuple[float, ...], value: float | None) -> Decision:
    """``Decision(action_id, probabilities, value)`` without the frozen-dataclass __init__,
    which costs more than the rest of the per-row work (an equal object either way)."""
    d = _new_decision(Decision)
    d.__dict__.update(action_id=action_id, probabilities=probabilities, value=value, warning=None)
    return d


def _sample(rng: SplitMix64, row: list[float]) -> int:
    """Inverse-CDF draw from ``row`` with one 64-bit number; never an index of probability 0."""
    u = rng.next_u64() / 2.0 ** 64
    acc = 0.0
    last = 0
    for k, p in enumerate(row):
        if p > 0.0:
            acc += p
            last = k
            if u < acc:
                return k
    return last  # rounding at the top end: the last possible action
