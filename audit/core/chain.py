"""The conditioning chain of diffusers' real MiniMax-H3 model, replayed stage by stage.

The provider is a ``MiniMaxH3Transformer3DModel`` of the installed diffusers with one block and no
token refiner; the chain is its timestep path, that block and ``norm_out``, in ten stages:
``time_proj`` → ``timestep_mlp`` → ``adaln_projection`` → ``norm1_modulate`` → ``attention`` →
``gate_residual_msa`` → ``norm2_modulate`` → ``ff`` → ``gate_residual_mlp`` → ``norm_out``.
Every provider stage runs the diffusers module that the model runs at that point; the row stages
(``norm*_modulate``, ``gate_residual_*``) run the operations that ``MiniMaxH3TransformerBlock.forward``
itself writes around its submodules (an ``Expression``, which the ``diffusers`` candidates of the
row ops run too). So the provider stages in sequence give **bitwise** the tensors of
``MiniMaxH3Transformer3DModel.forward``: ``temb``, the block's output and ``norm_out``'s output
(``tests/core/test_chain.py`` checks this at hidden size 5376).

A stage served by registry ops (``STAGES[i].ops``) can run a candidate instead: the candidate's
forward gets the op's inputs taken from the chain (2-D rows, contiguous tables), and its output is
put back in the block's layout (a view or a chunk: no rounding). ``attention``, ``ff`` and
``time_proj`` have no op: the provider's own module serves every chain there. ``norm_out`` is
served by a candidate that exists for both ``adaln_projection`` (its 2·H projection, split into
shift then scale) and ``norm_modulate`` (indexed per timestep). One call of a
``gate_residual_norm_modulate`` candidate can serve the two stages ``gate_residual_msa`` and
``norm2_modulate`` together (``PAIR``): it writes both h1 and n2, forward and backward.

Weights are drawn from seeded CPU generators (seed 1, salt 300 + the parameter's position) in the
checkpoint's mixed precision: the modules the model keeps in FP32 (the time embedder, the rope)
in FP32, everything else in BF16. Inputs use the packed layout of ``audit.inputs.packed_index``
(3 timesteps x 3 modalities) with the sequence length as the seed.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import math
import operator
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable, ContextManager

import torch
from torch import fx, nn
from torch.func import functional_call

from audit.core.candidates import Candidate, candidates_for, get_candidate, unavailable_reason

from audit.core.packages import error_text, version
from audit.core.compare import compare, count_differ
from audit.core.evaluate import differentiated
from audit.core.inputs import fingerprint, packed_index, seeded_normal
from audit.core.ops import (
    EPS,
    FREQ_CHANNELS,
    GRAD_OUT_SALT,
    HIDDEN,
    MODALITIES,
    PARAM_SEED,
    TIME_EMBED,
    TIME_MLP_HIDDEN,
    get_op,
)

H3_MODULE = "diffusers.models.transformers.transformer_minimax_h3"
BLOCK = "transformer_blocks.0"
TABLES = ("shift_msa", "scale_msa", "gate_msa", "shift_mlp", "scale_mlp", "gate_mlp")
PROVIDER = "provider"  # candidate name: the stage runs diffusers' own code in every chain
DEFAULT_CANDIDATE = "rl_kernel"
REPEATS = 2  # every side of the replay runs twice; a tensor whose two runs differ is not repeatable
WEIGHT_SALT = 300
GRID = 16  # the packed (t, h, w) rotary grid is GRID x GRID per frame

Values = dict[str, torch.Tensor]
GoldenContext = Callable[[], ContextManager]


@dataclass(frozen=True)
class BlockConfig:
    """The block's sizes; the defaults are ``MiniMaxH3Transformer3DModel``'s."""

    hidden: int = HIDDEN
    heads: int = 56
    head_dim: int = 128
    ffn: int = 14336
    freq: int = FREQ_CHANNELS
    time_hidden: int = TIME_MLP_HIDDEN
    time_embed: int = TIME_EMBED
    eps: float = EPS

    def problem(self) -> str | None:
        """Why the model cannot be built with these sizes (None when it can)."""
        for name in ("hidden", "heads", "ffn"):
            if getattr(self, name) < 1:
                return f"--{name} must be at least 1"
        if self.hidden % 8:
            return f"--hidden must be a multiple of 8 (the row kernels' vector width), got {self.hidden}"
        return None


# --------------------------------------------------------------------------------------------
# diffusers' own expressions: what a module's forward computes between two of its tensors.


@dataclass(frozen=True)
class Point:
    """A tensor in a module's ``forward``: one of its arguments (``argument``), what a submodule
    returns (``returned_by``; ``item`` picks one of a tuple it returns), the first argument that
    forward passes to a submodule (``passed_to``), or what forward returns (``RESULT``)."""

    kind: str
    name: str = ""
    item: int | None = None

    def __str__(self) -> str:
        item = "" if self.item is None else f"[{self.item}]"
        return {"argument": f"argument {self.name}", "result": "result"}.get(self.kind, f"{self.name}(...){item}")

    def find(self, graph: fx.Graph, owner: str) -> fx.Node:
        """The node of ``graph`` (``owner.forward``, traced) that holds this tensor; LookupError
        naming the point when forward has none."""
        for node in graph.nodes:
            if self.kind == "argument" and node.op == "placeholder" and node.target == self.name:
                return node
            if self.kind == "result" and node.op == "output":
                return node.args[0]
            if node.op == "call_module" and node.target == self.name:
                if self.kind == "passed":
                    return node.args[0]
                if self.item is None:
                    return node
                for user in node.users:
                    if user.target is operator.getitem and user.args[1] == self.item:
                        return user
        raise LookupError(f"{owner}.forward has no {self}")


def argument(name: str) -> Point:
    return Point("argument", name)


def returned_by(module: str, item: int | None = None) -> Point:
    return Point("returned", module, item)


def passed_to(module: str) -> Point:
    return Point("passed", module)


RESULT = Point("result")


@dataclass(frozen=True, eq=False)
class Expression:
    """The operations that a module's ``forward`` performs to compute ``until`` from ``reads``
    (op input name -> where forward has that tensor), calling its submodules on the way with the
    parameters ``params`` (op input name -> parameter path). ``until`` is one point, or a tuple of
    points whose tensors are returned as a tuple in that order. ``label`` says which part of
    forward it is, in a candidate's ``source``."""

    label: str
    reads: dict[str, Point]
    until: Point | tuple[Point, ...]
    params: dict[str, str] = field(default_factory=dict)


class _Leaves(fx.Tracer):
    """Records ``forward`` itself: every submodule it calls stays one call."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return True


def _sliced(module: nn.Module, expression: Expression) -> fx.GraphModule:
    """The operations of ``module.forward`` (recorded by torch.fx) that ``expression.until`` depends
    on, back to ``expression.reads``, in forward's order, with the reads as arguments. LookupError
    when forward has no such point, or computes ``until`` from an argument the expression does not
    read."""
    graph, owner = _Leaves().trace(module), type(module).__name__
    given = {point.find(graph, owner): name for name, point in expression.reads.items()}
    points = expression.until if isinstance(expression.until, tuple) else (expression.until,)
    untils = [point.find(graph, owner) for point in points]
    needed, todo = set(), list(untils)
    while todo:
        node = todo.pop()
        if node in given or node in needed:
            continue
        if node.op == "placeholder":
            raise LookupError(
                f"{owner}.forward computes {expression.label} from its argument "
                f"{node.target} too, which the audit does not give it"
            )
        needed.add(node)
        todo.extend(node.all_input_nodes)
    sliced = fx.Graph()
    copied = {node: sliced.placeholder(name) for node, name in given.items()}
    for node in graph.nodes:
        if node in needed:
            copied[node] = sliced.node_copy(node, copied.__getitem__)
    outputs = tuple(copied[u] for u in untils)
    sliced.output(outputs if isinstance(expression.until, tuple) else outputs[0])
    return fx.GraphModule(module, sliced)


_SLICES: weakref.WeakKeyDictionary[nn.Module, dict[Expression, fx.GraphModule]] = weakref.WeakKeyDictionary()


def run_expression(module: nn.Module, expression: Expression, tensors: dict[str, torch.Tensor]):
    """``expression`` of ``module.forward``, executed: the very operations forward performs there,
    on ``tensors`` (op input name -> tensor) and with ``tensors``' parameters for the submodules it
    calls, so the result is bitwise what forward computes at ``expression.until`` from the same
    tensors (a tuple of tensors for a tuple of points), and gradients reach them. The slice of
    forward is recorded once per module."""
    slices = _SLICES.setdefault(module, {})
    if expression not in slices:
        slices[expression] = _sliced(module, expression)
    sliced, reads = slices[expression], {name: tensors[name] for name in expression.reads}
    params = {path: tensors[name] for name, path in expression.params.items()}
    # functional_call costs about 7 us a call, which a latency at one row would show
    return functional_call(sliced, params, (), reads) if params else sliced(**reads)


def _table(name: str) -> Point:
    return returned_by("adaln_proj", TABLES.index(name))


_IDX = argument("adaln_indices")


def _modulation(half: str) -> dict[str, Point]:
    """What the ``half`` (msa or mlp) modulation reads besides the normalised rows: its shift and
    scale tables and the row indices."""
    return {"sh": _table(f"shift_{half}"), "sc": _table(f"scale_{half}"), "idx": _IDX}


def _normed(norm: str, half: str, x: Point, until: Point) -> Expression:
    return Expression(f"{norm} + modulation ({half})", {"x": x, **_modulation(half)}, until, {"w": f"{norm}.weight"})


def _gated(half: str, *, res: Point, y: Point, until: Point) -> Expression:
    reads = {"res": res, "y": y, "gate": _table(f"gate_{half}"), "idx": _IDX}
    return Expression(f"gate_{half} residual", reads, until)


# The expressions of MiniMaxH3TransformerBlock.forward around its submodules, in its order.
NORM1_MODULATE = _normed("norm1", "msa", argument("hidden_states"), passed_to("attn"))
MODULATE_MSA = Expression("modulation (msa)", {"normed": returned_by("norm1"), **_modulation("msa")}, passed_to("attn"))
GATE_RESIDUAL_MSA = _gated("msa", res=argument("hidden_states"), y=returned_by("attn"), until=passed_to("norm2"))
NORM2_MODULATE = _normed("norm2", "mlp", passed_to("norm2"), passed_to("ff"))
GATE_RESIDUAL_NORM2_MODULATE = Expression(
    "gate_msa residual, norm2 + modulation (mlp)",
    {"res": argument("hidden_states"), "y": returned_by("attn"), "gate": _table("gate_msa"), **_modulation("mlp")},
    (passed_to("norm2"), passed_to("ff")),
    {"w": "norm2.weight"},
)
GATE_RESIDUAL_MLP = _gated("mlp", res=passed_to("norm2"), y=returned_by("ff"), until=RESULT)


@dataclass
class Side:
    """One run of the chain: the model it calls, the parameter tensors it calls the model with,
    and the index tensors and rotary tables every stage shares."""

    model: nn.Module
    params: dict[str, torch.Tensor]
    adaln_indices: torch.Tensor
    timestep_indices: torch.Tensor
    rotary: tuple[torch.Tensor, torch.Tensor]

    def call(self, path: str, *args):
        """``model.<path>(*args)`` with this run's tensors for the parameters under ``path``."""
        own = {k[len(path) + 1 :]: v for k, v in self.params.items() if k.startswith(path + ".")}
        return functional_call(self.model.get_submodule(path), own, args)

    def param(self, path: str) -> torch.Tensor:
        return self.params[path]


Impl = Callable[[Side, Values], Values]  # a stage's computation: chain values in, new values out
CandidateImpl = Callable[[Side, tuple[Candidate, ...], Values], Values]


@dataclass(frozen=True)
class Stage:
    name: str
    ops: tuple[str, ...]  # registry ops a candidate is taken from (empty: the provider serves every chain)
    reads: tuple[str, ...]  # chain values read; their gradients are compared with --backward
    writes: tuple[str, ...]  # chain values written; the stage's output is their concatenation
    params: tuple[str, ...]  # parameters whose gradients are compared here
    provider: Impl
    candidate: CandidateImpl | None = None

    def output(self, values: Values) -> torch.Tensor:
        if len(self.writes) == 1:
            return values[self.writes[0]]
        return torch.cat([values[w] for w in self.writes], dim=-1)


def _first(out) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out


def _run(c: Candidate, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return _first(c.forward({k: v.contiguous() for k, v in inputs.items()}))


def _time_proj(s: Side, v: Values) -> Values:
    return {"t_freq": s.model.time_proj(v["timestep"])}


def _time_proj_fp64(s: Side, v: Values) -> Values:
    """diffusers' ``get_timestep_embedding`` (flip_sin_to_cos, shift 0, max period 10^4) in FP64:
    diffusers computes it in FP32 whatever the input, so the golden chain replays it."""
    half = s.model.time_proj.num_channels // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float64, device=v["timestep"].device) / half)
    angles = v["timestep"].double()[:, None] * freqs[None, :]
    return {"t_freq": torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)}


def _timestep_mlp(s: Side, v: Values) -> Values:
    return {"temb": s.call("time_embedder", v["t_freq"].to(s.param("time_embedder.linear_1.weight").dtype))}


def _timestep_mlp_candidate(s: Side, cands: tuple[Candidate, ...], v: Values) -> Values:
    w1, b1, w2, b2 = (s.param(name) for name in TIME_MLP_PARAMS)
    return {"temb": _run(cands[0], {"x": v["t_freq"], "w1": w1, "b1": b1, "w2": w2, "b2": b2})}


def _adaln(s: Side, v: Values) -> Values:
    return dict(zip(TABLES, s.call(f"{BLOCK}.adaln_proj", v["temb"])))


def _adaln_candidate(s: Side, cands: tuple[Candidate, ...], v: Values) -> Values:
    w, b = s.param(f"{BLOCK}.adaln_proj.linear.weight"), s.param(f"{BLOCK}.adaln_proj.linear.bias")
    projection = _run(cands[0], {"temb": v["temb"], "w": w, "b": b})
    hidden = w.shape[0] // (6 * MODALITIES)
    return dict(zip(TABLES, projection.view(-1, 6 * hidden).chunk(6, dim=-1)))  # as MiniMaxH3AdaLayerNormModulation


def _block_inputs(expression: Expression, taken: dict[str, str]) -> Callable[[Side, Values], Values]:
    """The inputs of ``expression`` in a run: the chain values ``taken`` (op input -> chain value),
    the block's parameters that it names and the adaln indices (``idx``)."""

    def inputs(s: Side, v: Values) -> Values:
        params = {name: s.param(f"{BLOCK}.{path}") for name, path in expression.params.items()}
        return {**{k: v[c] for k, c in taken.items()}, **params, "idx": s.adaln_indices}

    return inputs


def _block_stage(
    expression: Expression, out: str, rows: dict[str, str], tables: dict[str, str]
) -> tuple[Impl, CandidateImpl]:
    """A row stage of the block: the provider runs diffusers' ``expression`` on the chain values
    ``rows`` and ``tables`` (op input -> chain value), the adaln indices and the block's parameters
    that it names; a candidate gets the same inputs with the rows as (S, H)."""
    inputs = _block_inputs(expression, rows | tables)

    def provider(s: Side, v: Values) -> Values:
        return {out: run_expression(s.model.get_submodule(BLOCK), expression, inputs(s, v))}

    def candidate(s: Side, cands: tuple[Candidate, ...], v: Values) -> Values:
        given = inputs(s, v)
        return {out: _run(cands[0], given | {k: given[k][0] for k in rows}).unsqueeze(0)}

    return provider, candidate


GRAD_OF = "grad_of:"  # a value named GRAD_OF + X: the tensor whose gradient a replay records as X's
_gate_norm2_inputs = _block_inputs(
    GATE_RESIDUAL_NORM2_MODULATE,
    {"res": "h0", "y": "attn", "gate": "gate_msa", "sh": "shift_mlp", "sc": "scale_mlp"},
)


def _gate_norm2_candidate(s: Side, cands: tuple[Candidate, ...], v: Values) -> Values:
    """``gate_residual_msa`` and ``norm2_modulate`` in one call of a ``gate_residual_norm_modulate``
    candidate, given the inputs of diffusers' ``GATE_RESIDUAL_NORM2_MODULATE`` (rows as (S, H)): its
    (S, 2, H) output split into h1 and n2 (contiguous copies, no rounding). h1 is no input of the
    call, so its gradient is the one the call gives ``res``: in the op h1 is ``res + ...``, so that
    is h1's gradient summed over both readers, the call's own norm and ``gate_residual_mlp``."""
    given = _gate_norm2_inputs(s, v)
    res = given["res"][0]
    out = _run(cands[0], given | {"res": res, "y": given["y"][0]})
    h1, n2 = (out[:, i].contiguous().unsqueeze(0) for i in (0, 1))
    return {"h1": h1, "n2": n2, GRAD_OF + "h1": res}


def served_earlier(s: Side, v: Values) -> Values:
    """The computation of a stage whose value the call serving the stage before it wrote too."""
    return {}


def _attention(s: Side, v: Values) -> Values:
    return {"attn": s.model.get_submodule(f"{BLOCK}.attn")(v["n1"], s.rotary, None)}


def _ff(s: Side, v: Values) -> Values:
    return {"ff": s.model.get_submodule(f"{BLOCK}.ff")(v["n2"])}


def _norm_out(s: Side, v: Values) -> Values:
    return {"out": s.call("norm_out", v["h2"], v["temb"], s.timestep_indices)}


def _norm_out_candidate(s: Side, cands: tuple[Candidate, ...], v: Values) -> Values:
    projection, modulation = cands
    table = _run(
        projection, {"temb": v["temb"], "w": s.param("norm_out.linear.weight"), "b": s.param("norm_out.linear.bias")}
    )
    shift, scale = table.chunk(2, dim=-1)  # shift first, as MiniMaxH3AdaLayerNormOut
    inputs = {
        "x": v["h2"][0],
        "w": s.param("norm_out.norm.weight"),
        "sh": shift,
        "sc": scale,
        "idx": s.timestep_indices,
    }
    return {"out": _run(modulation, inputs).unsqueeze(0)}


TIME_MLP_PARAMS = tuple(f"time_embedder.linear_{i}.{k}" for i in (1, 2) for k in ("weight", "bias"))
_norm1, _norm1_candidate = _block_stage(NORM1_MODULATE, "n1", {"x": "h0"}, {"sh": "shift_msa", "sc": "scale_msa"})
_norm2, _norm2_candidate = _block_stage(NORM2_MODULATE, "n2", {"x": "h1"}, {"sh": "shift_mlp", "sc": "scale_mlp"})
_gate_msa, _gate_msa_candidate = _block_stage(GATE_RESIDUAL_MSA, "h1", {"res": "h0", "y": "attn"}, {"gate": "gate_msa"})
_gate_mlp, _gate_mlp_candidate = _block_stage(GATE_RESIDUAL_MLP, "h2", {"res": "h1", "y": "ff"}, {"gate": "gate_mlp"})

STAGES: tuple[Stage, ...] = (
    Stage("time_proj", (), ("timestep",), ("t_freq",), (), _time_proj),
    Stage(
        "timestep_mlp",
        ("timestep_mlp",),
        ("t_freq",),
        ("temb",),
        TIME_MLP_PARAMS,
        _timestep_mlp,
        _timestep_mlp_candidate,
    ),
    Stage(
        "adaln_projection",
        ("adaln_projection",),
        ("temb",),
        TABLES,
        (f"{BLOCK}.adaln_proj.linear.weight", f"{BLOCK}.adaln_proj.linear.bias"),
        _adaln,
        _adaln_candidate,
    ),
    Stage(
        "norm1_modulate",
        ("norm_modulate",),
        ("h0", "shift_msa", "scale_msa"),
        ("n1",),
        (f"{BLOCK}.norm1.weight",),
        _norm1,
        _norm1_candidate,
    ),
    Stage("attention", (), ("n1",), ("attn",), (), _attention),
    Stage(
        "gate_residual_msa", ("gate_residual",), ("h0", "attn", "gate_msa"), ("h1",), (), _gate_msa, _gate_msa_candidate
    ),
    Stage(
        "norm2_modulate",
        ("norm_modulate",),
        ("h1", "shift_mlp", "scale_mlp"),
        ("n2",),
        (f"{BLOCK}.norm2.weight",),
        _norm2,
        _norm2_candidate,
    ),
    Stage("ff", (), ("n2",), ("ff",), (), _ff),
    Stage(
        "gate_residual_mlp", ("gate_residual",), ("h1", "ff", "gate_mlp"), ("h2",), (), _gate_mlp, _gate_mlp_candidate
    ),
    Stage(
        "norm_out",
        ("adaln_projection", "norm_modulate"),
        ("h2", "temb"),
        ("out",),
        ("norm_out.norm.weight", "norm_out.linear.weight", "norm_out.linear.bias"),
        _norm_out,
        _norm_out_candidate,
    ),
)
STAGE_NAMES = tuple(s.name for s in STAGES)
STAGE_BY_NAME = {s.name: s for s in STAGES}
PARAMS = tuple(p for s in STAGES for p in s.params)


@dataclass(frozen=True)
class Pair:
    """Two consecutive stages that one call of a candidate of ``ops`` serves (``candidate``: the
    call, writing both stages' values), chosen as ``--candidate FIRST+SECOND=NAME``."""

    stages: tuple[str, str]
    ops: tuple[str, ...]
    candidate: CandidateImpl

    @property
    def name(self) -> str:
        return "+".join(self.stages)


PAIR = Pair(("gate_residual_msa", "norm2_modulate"), ("gate_residual_norm_modulate",), _gate_norm2_candidate)


# --------------------------------------------------------------------------------------------
# Choosing candidates: ``STAGE=NAME``, ``all=NAME`` and ``PAIR``'s, checked before anything runs.


@dataclass(frozen=True)
class Choice:
    """The candidate named for a stage: ``provider``, ``NAME`` or ``NAME[MODE]`` (that candidate as it
    runs under MODE; in a replay under another mode it is unavailable)."""

    name: str
    mode: str | None = None

    @property
    def label(self) -> str:
        return f"{self.name}[{self.mode}]" if self.mode else self.name


def labels(choices: dict[str, list]) -> dict[str, str]:
    """A job's ``choices`` (stage -> [name, mode]) as the names asked for (stage -> label), the
    ``candidates`` field of the chain and trajectory reports and of their problem settings."""
    return {stage: Choice(*choice).label for stage, choice in choices.items()}


def _registered(stage: Stage | Pair, name: str) -> list[Candidate] | None:
    """The stage's candidates called ``name``, one per op; None unless every op of the stage has one."""
    found = []
    for op in stage.ops:
        try:
            found.append(get_candidate(op, name))
        except KeyError:
            return None
    return found or None


def parse_choice(stage: Stage | Pair, text: str, modes: dict) -> Choice:
    """``text`` as a choice for ``stage``; ValueError with a one-line reason when it is not one."""
    name, _, rest = text.partition("[")
    mode = rest.removesuffix("]") if rest else None
    if rest and (not rest.endswith("]") or mode not in modes):
        raise ValueError(f"{stage.name}={text}: the mode in NAME[MODE] must be one of {', '.join(modes)}")
    if name == PROVIDER and mode is None:
        return Choice(PROVIDER)
    if not stage.ops:
        raise ValueError(f"{stage.name}={text}: no registry op serves {stage.name}; only '{PROVIDER}' runs there")
    found = _registered(stage, name)
    if found is None:
        raise ValueError(
            f"{stage.name}={text}: no candidate {name!r} for {' and '.join(stage.ops)}; "
            f"valid: {', '.join(valid_names(stage))}"
        )
    if mode is not None and not all(c.all_modes for c in found):
        raise ValueError(f"{stage.name}={text}: {name} does not run under modes, so NAME[MODE] does not apply")
    return Choice(name, mode)


def valid_names(stage: Stage | Pair) -> list[str]:
    names = {c.name for op in stage.ops for c in candidates_for(op)}
    return [PROVIDER, *sorted(n for n in names if _registered(stage, n))]


def parse_candidates(items: list[str], modes: dict) -> dict[str, Choice]:
    """Every stage's choice from ``STAGE=NAME`` / ``all=NAME`` / ``gate_residual_msa+norm2_modulate=NAME``
    items: ``rl_kernel`` where it exists, else the provider; ``all=NAME`` sets every stage NAME
    serves (never ``PAIR``); ``STAGE=NAME`` wins over ``all``. ``PAIR``'s item (NAME a candidate of
    its op) replaces its two stages' choices by one under ``PAIR.name``, in the first one's place.
    ValueError (one line) on an unknown stage, a pair other than ``PAIR``, ``PAIR``'s item together
    with an item for one of its stages, or a name the stage or pair has no candidate for."""
    chosen = {
        s.name: Choice(DEFAULT_CANDIDATE if s.ops and _registered(s, DEFAULT_CANDIDATE) else PROVIDER) for s in STAGES
    }
    explicit: dict[str, str] = {}
    for item in items:
        stage, sep, name = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--candidate {item!r}: expected STAGE=NAME")
        if "+" in stage and stage != PAIR.name:
            raise ValueError(f"--candidate {item!r}: no call serves the stages {stage!r}; the one pair is {PAIR.name}")
        if stage not in ("all", *STAGE_NAMES, PAIR.name):
            raise ValueError(
                f"--candidate {item!r}: unknown stage {stage!r}; valid: all, {', '.join(STAGE_NAMES)}, {PAIR.name}"
            )
        explicit[stage] = name
    if "all" in explicit:
        served = {}
        for s in STAGES:
            try:
                served[s.name] = parse_choice(s, explicit["all"], modes)
            except ValueError:
                continue  # all=NAME leaves the stages NAME cannot serve as they are
        if not served:
            raise ValueError(f"--candidate all={explicit['all']}: no stage can take that candidate")
        chosen.update(served)
    for s in STAGES:
        if s.name in explicit:
            chosen[s.name] = parse_choice(s, explicit[s.name], modes)
    if PAIR.name in explicit:
        item = f"{PAIR.name}={explicit[PAIR.name]}"
        clash = next((s for s in PAIR.stages if s in explicit), None)
        if clash:
            raise ValueError(f"--candidate {item} and {clash}={explicit[clash]}: one call serves both stages")
        pair = parse_choice(PAIR, explicit[PAIR.name], modes)
        first, second = PAIR.stages
        chosen = {(PAIR.name if k == first else k): c for k, c in chosen.items() if k != second}
        chosen[PAIR.name] = pair
    return chosen


# --------------------------------------------------------------------------------------------
# The provider model and the inputs.


def h3_module():
    return importlib.import_module(H3_MODULE)


def build_model(config: BlockConfig, device: torch.device) -> nn.Module:
    """A one-block ``MiniMaxH3Transformer3DModel`` (no token refiner; tiny input and output heads,
    which the chain does not use) with seeded weights in the checkpoint's mixed precision, on
    ``device``, with every parameter frozen (the replay passes its own parameter tensors)."""
    h3 = h3_module()
    with torch.device("meta"):
        model = h3.MiniMaxH3Transformer3DModel(
            num_attention_heads=config.heads,
            attention_head_dim=config.head_dim,
            hidden_size=config.hidden,
            num_layers=1,
            num_refiner_layers=0,
            ffn_dim=config.ffn,
            in_channels=4,
            audio_in_channels=8,
            text_dim=64,
            freq_dim=config.freq,
            time_embed_hidden_dim=config.time_hidden,
            time_embed_dim=config.time_embed,
            norm_eps=config.eps,
            qk_norm_eps=config.eps,
            final_norm_eps=config.eps,
        )
    nn.Module.to(
        model, torch.bfloat16
    )  # diffusers' ModelMixin.to warns about the FP32 modules, which are cast back next
    for name in model._keep_in_fp32_modules:
        model.get_submodule(name).float()
    model.to_empty(device="cpu")
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            p.copy_(_draw_weight(name, tuple(p.shape), p.dtype, WEIGHT_SALT + i))
    model.rope = h3.MiniMaxH3RotaryPosEmbed(
        model.config.rope_freq_dim, model.config.rope_theta
    )  # its buffer is computed
    return model.to(device).requires_grad_(False).eval()


def _draw_weight(name: str, shape: tuple[int, ...], dtype: torch.dtype, salt: int) -> torch.Tensor:
    if len(shape) == 2:
        return seeded_normal(PARAM_SEED, salt, shape, dtype, shape[1] ** -0.5)
    if "norm" in name:  # RMSNorm gains around 1
        return (1.0 + seeded_normal(PARAM_SEED, salt, shape, torch.float32, 0.1)).to(dtype)
    return seeded_normal(PARAM_SEED, salt, shape, dtype, 0.02)


@dataclass
class ChainInputs:
    """One sequence in the packed layout, on the CPU: ``timestep`` (3,) FP32 distinct noise levels,
    ``timestep_indices`` and ``token_tags`` (S,), ``position_ids`` (S, 3) on a GRID x GRID x frames
    grid, ``hidden`` (1, S, H) BF16 (the block's input) and ``grad_out`` (1, S, H) BF16."""

    timestep: torch.Tensor
    timestep_indices: torch.Tensor
    token_tags: torch.Tensor
    position_ids: torch.Tensor
    hidden: torch.Tensor
    grad_out: torch.Tensor

    def tensors(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def draw_inputs(config: BlockConfig, length: int) -> ChainInputs:
    seed = length
    idx = packed_index(seed, length)
    r = torch.arange(length)
    return ChainInputs(
        timestep=torch.rand(MODALITIES, generator=torch.Generator().manual_seed(seed * 1000 + 20)),
        timestep_indices=idx // MODALITIES,
        token_tags=idx % MODALITIES,
        position_ids=torch.stack([r // (GRID * GRID), (r // GRID) % GRID, r % GRID], dim=1),
        hidden=seeded_normal(seed, 21, (1, length, config.hidden), torch.bfloat16, 1.0),
        grad_out=seeded_normal(seed, GRAD_OUT_SALT, (1, length, config.hidden), torch.bfloat16),
    )


# --------------------------------------------------------------------------------------------
# Replaying.


class StageFailed(Exception):
    """A candidate call raised; ``stages``: the stages it serves."""

    def __init__(self, stages: tuple[str, ...], reason: str):
        super().__init__(f"{'+'.join(stages)}: {reason}")
        self.stages, self.reason = stages, reason


@dataclass
class Run:
    values: Values  # every chain value, detached
    grads: dict[str, torch.Tensor] = field(default_factory=dict)  # chain values and parameters (backward only)


def make_side(model: nn.Module, inputs: ChainInputs, device: torch.device, grad: bool, dtype=None) -> Side:
    """A run's Side: fresh parameter leaves (requiring grad when ``grad``), in ``dtype`` when given."""
    params = {}
    for name in PARAMS:
        t = model.get_parameter(name).detach().clone()
        params[name] = (t if dtype is None else t.to(dtype)).requires_grad_(grad)
    ti, tags = inputs.timestep_indices.to(device), inputs.token_tags.to(device)
    return Side(model, params, ti * MODALITIES + tags, ti, model.rope(inputs.position_ids.to(device)))


def replay(side: Side, impls: list[Impl], start: Values, grad_out: torch.Tensor | None = None) -> Run:
    """Run the stages in order, each fed what the earlier ones of this run wrote. With ``grad_out``
    the chain's output is back-propagated and the gradient of every chain value and parameter kept;
    a value a stage writes as ``GRAD_OF + X`` gives X's gradient and is not kept itself."""
    backward = grad_out is not None
    values = {k: t.detach().clone().requires_grad_(backward and t.is_floating_point()) for k, t in start.items()}
    with torch.set_grad_enabled(backward):
        for stage, impl in zip(STAGES, impls):
            new = impl(side, values)
            for t in new.values():
                if t.requires_grad:
                    t.retain_grad()
            values.update(new)
        if backward:
            values["out"].backward(grad_out)
    grads = {k: t.grad for k, t in [*values.items(), *side.params.items()] if t.grad is not None}
    grads |= {k.removeprefix(GRAD_OF): grads.pop(k) for k in list(grads) if k.startswith(GRAD_OF)}
    return Run({k: t.detach() for k, t in values.items() if not k.startswith(GRAD_OF)}, grads)


def isolated(side: Side, impls: list[Impl], provider: Run) -> dict[str, torch.Tensor]:
    """Each stage's output with its inputs taken from the provider's run: stage name -> output. A
    stage ``served_earlier`` takes its output from the call that served the stage before it, which
    got the provider's inputs too."""
    found, written = {}, {}
    with torch.no_grad():
        for st, impl in zip(STAGES, impls):
            if impl is not served_earlier:
                written = impl(side, provider.values)
            found[st.name] = st.output({**provider.values, **written})
    return found


@dataclass
class Resolved:
    """What serves one stage in the candidate chains: its computation, and the report's entry."""

    impl: Impl
    entry: dict  # {"name", "source"} (and "serves" for PAIR's call) or {"unavailable": reason}


def _guarded(served: Stage | Pair, cands: tuple[Candidate, ...]) -> Impl:
    stages = served.stages if isinstance(served, Pair) else (served.name,)

    def impl(side: Side, v: Values) -> Values:
        try:
            return served.candidate(side, cands, v)
        except Exception as exc:  # a candidate that raises loses its stages, not the replay
            raise StageFailed(stages, error_text(exc)) from exc

    return impl


def _serving(
    served: Stage | Pair, choice: Choice, mode: str, device: torch.device, backward: bool
) -> tuple[Impl | None, dict]:
    """The call of the chosen candidate that serves ``served`` under ``mode`` (raising StageFailed)
    and the report's entry; (None, entry) where diffusers' code serves instead: the provider was
    chosen, or the candidate cannot run here (the entry says why)."""
    if choice.name == PROVIDER:
        return None, {"name": PROVIDER, "source": f"diffusers {version('diffusers')} (the provider)"}
    if choice.mode is not None and choice.mode != mode:
        return None, {"unavailable": f"{choice.label} runs only under mode {choice.mode}; this replay's mode is {mode}"}
    cands = tuple(get_candidate(op, choice.name) for op in served.ops)
    problems = [p for c in cands if (p := unavailable_reason(c, device))]
    if backward:
        problems += [
            f"{c.name} gives no gradient for {', '.join(missing)} of {c.op}; --backward needs every one"
            for c in cands
            if (missing := [g for g in get_op(c.op).grads if g not in differentiated(c, get_op(c.op))])
        ]
    if problems:
        return None, {"unavailable": "; ".join(dict.fromkeys(problems))}
    source = " + ".join(dict.fromkeys(c.source(mode, device) for c in cands))
    return _guarded(served, cands), {"name": choice.label, "source": source}


def resolve(choices: dict[str, Choice], mode: str, device: torch.device, backward: bool) -> dict[str, Resolved]:
    """What serves each stage of the candidate chains under ``mode`` (stage name -> Resolved), from
    ``parse_candidates``' choices; a candidate that cannot run here leaves the provider, with the
    reason. Chosen under ``PAIR.name``, the pair's call serves its first stage and writes the
    second's value too (that stage's computation is ``served_earlier``); both entries are the
    candidate's, with ``serves`` naming the two stages."""
    chosen = {}
    for key, choice in choices.items():
        if key != PAIR.name:
            stage = STAGE_BY_NAME[key]
            impl, entry = _serving(stage, choice, mode, device, backward)
            chosen[key] = Resolved(impl or stage.provider, entry)
            continue
        impl, entry = _serving(PAIR, choice, mode, device, backward)
        first, second = (STAGE_BY_NAME[name] for name in PAIR.stages)
        if impl is None:
            chosen |= {first.name: Resolved(first.provider, entry), second.name: Resolved(second.provider, entry)}
        else:
            entry |= {"serves": list(PAIR.stages)}
            chosen |= {first.name: Resolved(impl, entry), second.name: Resolved(served_earlier, entry)}
    return chosen


def fall_back(chosen: dict[str, Resolved], failed: StageFailed, during: str) -> None:
    """The stages ``failed`` names served by their providers from now on, each entry saying that
    the candidate raised ``during`` (e.g. "the replay")."""
    entry = {"unavailable": f"raised during {during}: {failed.reason}"}
    for name in failed.stages:
        chosen[name] = Resolved(STAGE_BY_NAME[name].provider, entry)


def _repeat_fields(first: list[torch.Tensor], again: list[torch.Tensor]) -> dict:
    worst = max(count_differ(a, b) for a, b in zip(first, again))
    return {"repeatable": True} if worst == 0 else {"repeatable": False, "repeat_differ": worst}


def _compared(a: list[torch.Tensor], b: list[torch.Tensor]) -> dict:
    """``a[0]`` against ``b[0]`` bit for bit; repeatable when ``a[1]`` and ``b[1]`` repeat them."""
    cmp = compare(a[0], b[0])
    return cmp | _repeat_fields([a[0], b[0]], [a[1], b[1]])


def relative_error(t: torch.Tensor, golden: torch.Tensor) -> float:
    """max|t - golden| / max|golden|, in FP64 (0.0 against an all-zero golden that t matches)."""
    err = (t.double() - golden).abs().max()
    scale = golden.abs().max()
    return float(err / scale) if scale > 0 else float(err)


def replay_length(
    model: nn.Module,
    golden_model: nn.Module,
    chosen: dict[str, Resolved],
    inputs: ChainInputs,
    device: torch.device,
    backward: bool,
    golden_context: GoldenContext = contextlib.nullcontext,
) -> dict:
    """One sequence: the provider, candidate (chained) and isolated replays, each run REPEATS
    times, and the golden one (provider stages in FP64, inside ``golden_context``: the mode
    switched off where it can be), compared stage by stage. Returns the report's per-length entry
    (without its summary fields, which ``reports.chain`` derives from the stages)."""
    began = time.perf_counter()
    start = {"timestep": inputs.timestep.to(device), "h0": inputs.hidden.to(device)}
    grad_out = inputs.grad_out.to(device) if backward else None
    providers = [st.provider for st in STAGES]
    candidates = [chosen[st.name].impl for st in STAGES]
    provider = [replay(make_side(model, inputs, device, backward), providers, start, grad_out) for _ in range(REPEATS)]
    side = make_side(model, inputs, device, backward)
    _synchronize(device)
    chain_began = time.perf_counter()
    chained = [replay(side, candidates, start, grad_out)]
    _synchronize(device)
    chained_s = time.perf_counter() - chain_began
    chained += [
        replay(make_side(model, inputs, device, backward), candidates, start, grad_out) for _ in range(REPEATS - 1)
    ]
    alone = [isolated(make_side(model, inputs, device, False), candidates, provider[0]) for _ in range(REPEATS)]
    golden, golden_problem = None, None
    try:
        with golden_context():
            golden_side = make_side(golden_model, inputs, device, False, torch.float64)
            golden = replay(golden_side, [_time_proj_fp64, *providers[1:]], {k: t.double() for k, t in start.items()})
    except Exception as exc:  # e.g. a mode that cannot be switched off and has no FP64 kernel: the rest stands
        golden_problem = f"the FP64 chain failed: {error_text(exc)}"
    stages = []
    for st in STAGES:
        out_p = [st.output(r.values) for r in provider]
        out_c = [st.output(r.values) for r in chained]
        entry = {
            "stage": st.name,
            "ops": list(st.ops),
            "candidate": chosen[st.name].entry,
            "chained_vs_provider": _compared(out_c, out_p),
            "isolated_vs_provider": _compared([a[st.name] for a in alone], out_p),
            "chained_vs_golden": relative_error(out_c[0], st.output(golden.values)) if golden else None,
            "provider_vs_golden": relative_error(out_p[0], st.output(golden.values)) if golden else None,
        }
        if backward:
            entry["grads"] = {
                k: _compared([r.grads[k] for r in chained], [r.grads[k] for r in provider])
                for k in (*st.reads, *st.params)
            }
        stages.append(entry)
    _synchronize(device)
    found = {"wall_s": time.perf_counter() - began, "chained_s": chained_s, "stages": stages}
    return found | ({"golden_unavailable": golden_problem} if golden_problem else {})


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_chain(
    config: BlockConfig,
    lengths: list[int],
    choices: dict[str, Choice],
    mode: str,
    device: torch.device,
    backward: bool,
    emit: Callable[..., None],
    golden_context: GoldenContext = contextlib.nullcontext,
) -> None:
    """Replay every length under the current process's mode. A candidate that raises during a
    replay makes its stage unavailable (the provider takes its place) and the length is replayed
    again. Events: ``inputs`` (length, sha256) and ``length`` (length, data) per length."""
    model = build_model(config, device)
    golden_model = copy.deepcopy(model).double()
    chosen = resolve(choices, mode, device, backward)
    for length in lengths:
        inputs = draw_inputs(config, length)
        emit("inputs", length=length, sha256=fingerprint(inputs.tensors()))
        while True:
            try:
                data = replay_length(model, golden_model, chosen, inputs, device, backward, golden_context)
                break
            except StageFailed as failed:
                fall_back(chosen, failed, "the replay")
        emit("length", length=length, data=data)
