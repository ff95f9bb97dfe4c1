"""The exact reference: the best plan for a small instance, by mixed-integer programming.

The engine is a greedy heuristic; to know how far from the best it lands, this module
states the same promises (DESIGN.md §1) as a MIP and solves it with HiGHS (the optional
extra `tandem[exact]`). Only for small instances (at most `MAX_NODES` nodes): the model
has integer counts per node and per domain, not one variable per pod, which keeps it
small and avoids most symmetry between identical pods.

Model, per unit `u` (unit gang: `y_u` = functional, else it places nothing):
- `z[u, d]`: the unit's domain at its required pack level; exactly one iff `y_u`.
- per role: leaders `a[n]` and workers `w[n]` per eligible node, complete replicas
  `x[e]` per domain `e` of the replica's pack level (the unit's, or the role's if
  narrower): `sum a in e = x[e]`, `sum w in e = (pods-1) x[e]`. Any leaders and workers
  inside one domain make complete replicas, so counts are exact for the replica gang.
  `sum x >= minReplicas * y_u`; `x` only inside the chosen `z` domain; `<= desired`.
- node capacity in every resource the snapshot knows, on the snapshot's free capacity.
- affinity `from -> to` at level L ("any pod shares", as the engine checks it): an L
  domain is active when it holds a pod of a `to` replica of the same unit; a `from`
  replica is satisfied when one of its pods is in an active domain. Per replica domain,
  satisfied replicas `s[e] <= x[e]` and `<=` the `from` pods in active domains (every
  such pod can be given to a different replica). Required: `s[e] = x[e]`. When a role is
  the `from` of several rules and has multi-pod replicas, only leaders count (a sound,
  slightly conservative simplification; the plan is rebuilt from it exactly).

Objective, lexicographic, solved in two stages so big weights never meet a MIP gap:
1. functional units (weight per unit: equal for `order="none"`, `2^(n-1-i)` for
   `order="strict"`, i.e. the best plan that never gives up an earlier unit for later
   ones), then the number of `from` replicas of Preferred rules that are satisfied.
   Solved to proven optimality (gap 0) within the time limit.
2. with stage 1's result fixed: most replicas (extras up to desired), then, with that
   count fixed too, fewest (unit, node) pairs used (tightness). Extras come before
   tightness: the other way round the solver would refuse every extra that needs one
   more node, which no scheduler does. Cosmetic: shorter time limits, and tightness is
   only improved, not proven.

`objective="replicas"`: the reference that sees extras (issue 10), lexicographic, by
sequential solves — each tier's optimum is fixed as a constraint before the next, so no
weight ever has to separate two tiers and a MIP gap on one tier cannot leak into another:
1. units' minimums in placement order. `order="strict"`: units are taken in blocks of
   `LEX_BLOCK` (16); within a block unit `j` weighs `2^(15-j)`, more than all later units
   of the block together (`2^(15-j) - 1`), so the block's optimum is the lexicographic
   best of its functional vector; it is fixed (every `y`), then the next block is solved.
   The objective is an integer below `2^16`, solved with an absolute gap of 0.5, so the
   weights never approach the solver's tolerances (one 2^35 weight for 36 units would).
   `order="none"`: one solve, the number of functional units.
2. with every unit's `y` fixed: the number of complete replicas placed (minimums and
   extras, each role up to its desired count; a replica counts when all its pods are
   placed, which the model's replica gang makes the only way to place pods).
3. with that count fixed: `from` replicas of Preferred rules that share their domain.
4. cosmetic, with `polish_time_limit`: fewest (unit, node) pairs, improved, not proven.
Every tier gets `time_limit` seconds; `ExactResult.tiers` reports each solve, and
`proven` is true only when tiers 1-3 all are proven optimal (else the plan is the best
found, still feasible: a tier that is not proven fixes its incumbent, not its bound).

`ratio=True` (the default with `objective="replicas"`): extras in the ratio of the
desired counts, as the engine keeps them (docs/placement.md, Phase 2): a role above its
minimum has at most `ceil(c_o * d_r / d_o)` replicas for every other role `o` of its unit
(`c` placed, `d` desired, `m` minimum): a binary `b_r` says "above the minimum",
`c_r <= m_r + (d_r - m_r) b_r` and `d_o c_r - d_r c_o <= d_o - 1 + M (1 - b_r)` with
`M = d_o (d_r - 1) + 1` (the left side is at most `d_o d_r`). This is the engine's promise
("no role's extras run ahead of the slowest role's fraction, rounded up; what the minimum
phase placed is never taken back"), so every plan the engine may produce is feasible here
and the optimum is an upper bound it can be compared with fairly. The one exception the
engine makes is mirrored: the `to` role of a Required rule is never bound by the rule
(the minimum gang may need more `to` replicas than the minimum, and the engine never
takes back a `to` replica a `from` replica depends on); it still bounds the other roles.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Literal, Mapping, Sequence

import numpy as np

from tandem.placement import Plan, PodAssignment, ReplicaAssignment, RoleDemand, UnitDemand, UnitPlacement
from tandem.topology import ClusterSnapshot, TopologyView

if TYPE_CHECKING:  # an optional extra (`tandem[exact]`), imported when a solve starts
    from highspy import Highs, HighsLp

MAX_NODES = 32
LEX_BLOCK = 16  # units per solve of the minimums tier with order="strict" (weights < 2^16)
Order = Literal["none", "strict"]
Objective = Literal["functional", "replicas"]


class ExactSolverUnavailable(RuntimeError):
    """highspy is not installed."""


@dataclass(frozen=True)
class Tier:
    """One solve of a lexicographic objective (`objective="replicas"`)."""

    name: str  # "minimums" (or "minimums[16:32]" for a later block of units), "replicas", "affinity", "tightness"
    status: str  # HiGHS model status
    proven: bool
    value: float  # the tier's objective in the solution kept
    bound: float  # its dual bound
    seconds: float

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "status": self.status,
            "proven": self.proven,
            "value": self.value,
            "bound": self.bound if np.isfinite(self.bound) else None,
            "seconds": round(self.seconds, 4),
        }


@dataclass(frozen=True)
class ExactResult:
    plan: Plan
    order: str
    proven: bool  # stage 1 proven optimal; with objective="replicas", tiers 1-3 all proven
    status: str  # HiGHS model status of stage 1 (objective="replicas": of the first tier not proven, else "Optimal")
    functional: int
    preferred_satisfied: int
    objective: float  # stage 1 (objective="replicas": the replicas tier)
    bound: float  # its dual bound
    seconds: float
    polished: bool  # stage 2 proven optimal too (objective="replicas": the tightness solve)
    goal: str = "functional"  # the `objective` option solved for
    replicas: int = 0  # complete replicas placed
    ratio: bool = False  # extras were kept in the ratio of the desired counts
    tiers: tuple[Tier, ...] = ()  # objective="replicas": every solve, in order


def exact(
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    units: Sequence[UnitDemand],
    *,
    order: Order = "none",
    objective: Objective = "functional",
    time_limit: float = 20.0,
) -> Plan:
    """Same signature as `tandem.placement.place`: the exact optimum's plan."""
    return solve(snapshot, views, units, order=order, objective=objective, time_limit=time_limit).plan


def solve(
    snapshot: ClusterSnapshot,
    views: Mapping[str, TopologyView],
    units: Sequence[UnitDemand],
    *,
    order: Order = "none",
    objective: Objective = "functional",
    ratio: bool | None = None,
    time_limit: float = 20.0,
    polish_time_limit: float | None = 5.0,
) -> ExactResult:
    """Solve to optimality within `time_limit` seconds per stage; see the module docstring.

    `objective="functional"`: functional units (weighed by `order`), then Preferred
    affinity; stage 2 adds replicas and tightness. `polish_time_limit=None` skips stage
    2: the plan then holds whatever extras stage 1 happened to choose.

    `objective="replicas"`: the lexicographic reference — units' minimums (by `order`;
    `"strict"` is the engine's promise), then complete replicas placed, then Preferred
    affinity, each solved within `time_limit`; `polish_time_limit` is for tightness
    (`None` skips it). `ratio` (default: true for `"replicas"`, false otherwise) keeps
    extras in the ratio of the desired counts, as the engine does.
    """
    highspy = _highspy()
    if order not in ("none", "strict"):
        raise ValueError(f"order must be 'none' or 'strict', got {order!r}")
    if objective not in ("functional", "replicas"):
        raise ValueError(f"objective must be 'functional' or 'replicas', got {objective!r}")
    if len(snapshot.node_names) > MAX_NODES:
        raise ValueError(f"the exact solver is for small instances: {len(snapshot.node_names)} nodes > {MAX_NODES}")
    if ratio is None:
        ratio = objective == "replicas"
    started = time.perf_counter()
    model = _Model.build(snapshot, views, units, order, ratio=ratio)

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 0.5)  # the stage 1 objective is integer
    h.passModel(model.lp(highspy))
    if objective == "replicas":
        return _lexicographic(h, highspy, model, order, time_limit, polish_time_limit, started)
    h.run()
    status = h.getModelStatus()
    proven = status in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kModelEmpty)
    info = h.getInfo()
    if info.primal_solution_status != 2:  # no feasible solution: place nothing
        values = np.zeros(model.size)
        objective_value, bound = 0.0, float(info.mip_dual_bound)
    else:
        values = np.array(h.getSolution().col_value)
        objective_value, bound = float(info.objective_function_value), float(info.mip_dual_bound)
    values = np.rint(values)
    polished = False
    if polish_time_limit is not None and values.any():
        values, polished = _polish(h, highspy, model, values, polish_time_limit)
    plan = model.plan(values, f"order={order}")
    return ExactResult(
        plan=plan,
        order=order,
        proven=proven,
        status=h.modelStatusToString(status),
        functional=sum(int(values[u.y]) for u in model.units),
        preferred_satisfied=int(sum(values[s] for u in model.units for s in u.preferred)),
        objective=objective_value,
        bound=bound,
        seconds=time.perf_counter() - started,
        polished=polished,
        goal=objective,
        replicas=model.replica_count(values),
        ratio=ratio,
    )


def _highspy() -> ModuleType:
    try:
        import highspy
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ExactSolverUnavailable(
            "the exact solver needs highspy: pip install 'tandem[exact]' (or highspy==1.15.1)"
        ) from exc
    return highspy


def _lexicographic(
    h: Highs, highspy: ModuleType, model: "_Model", order: str, time_limit: float, polish_time_limit: float | None, started: float
) -> ExactResult:
    """`objective="replicas"`: tiers solved one after another, each optimum fixed (module docstring)."""
    columns = np.arange(model.size, dtype=np.int32)
    values = np.zeros(model.size)  # placing nothing is always feasible
    tiers: list[Tier] = []

    def run(name: str, cost: np.ndarray, limit: float) -> Tier:
        nonlocal values
        h.changeColsCost(model.size, columns, cost)
        h.setOptionValue("time_limit", float(limit))
        h.setSolution(model.size, columns, values.astype(float))
        begun = time.perf_counter()
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        if info.primal_solution_status == 2:
            found = np.rint(np.array(h.getSolution().col_value))
            if float(cost @ found) >= float(cost @ values) - 1e-6:  # never worse than the start
                values = found
        proven = status in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kModelEmpty)
        bound = float(info.mip_dual_bound)
        tier = Tier(name, h.modelStatusToString(status), proven, float(cost @ values), bound, time.perf_counter() - begun)
        tiers.append(tier)
        return tier

    def fix_at_least(cols: np.ndarray, value: float) -> None:
        if cols.size:
            h.addRow(value, highspy.kHighsInf, cols.size, cols, np.ones(cols.size))

    # 1. minimums, in placement order (blocks of LEX_BLOCK units) or by count.
    ys = np.array([u.y for u in model.units], np.int32)
    open_ys = [int(y) for y in ys if model.upper[y] > 0]
    if order == "strict":
        blocks = [ys[i : i + LEX_BLOCK] for i in range(0, ys.size, LEX_BLOCK)]
    else:
        blocks = [ys]
    for start, block in zip(range(0, ys.size, LEX_BLOCK), blocks):
        if not any(int(y) in open_ys for y in block):
            continue
        cost = np.zeros(model.size)
        if order == "strict":
            cost[block] = [2.0 ** (LEX_BLOCK - 1 - j) for j in range(block.size)]
        else:
            cost[block] = 1.0
        name = "minimums" if start == 0 or order != "strict" else f"minimums[{start}:{start + block.size}]"
        run(name, cost, time_limit)
        for y in block:
            h.changeColBounds(int(y), float(values[y]), float(values[y]))

    # 2. complete replicas; 3. Preferred affinity — each fixed before the next.
    replicas = np.array([x for u in model.units for role in u.roles for x in role.replicas.values()], np.int32)
    preferred = np.array([s for u in model.units for s in u.preferred], np.int32)
    for name, cols in (("replicas", replicas), ("affinity", preferred)):
        if not cols.size or not values[ys].any():
            continue
        cost = np.zeros(model.size)
        cost[cols] = 1.0
        tier = run(name, cost, time_limit)
        fix_at_least(cols, tier.value)

    # 4. cosmetic: fewest (unit, node) pairs.
    polished = False
    used = np.array([c for u in model.units for c in u.used.values()], np.int32)
    if polish_time_limit is not None and used.size and values[ys].any():
        cost = np.zeros(model.size)
        cost[used] = -1.0
        polished = run("tightness", cost, max(0.1, polish_time_limit)).proven

    lexicographic = [t for t in tiers if t.name != "tightness"]
    unproven = [t for t in lexicographic if not t.proven]
    replica_tier = next((t for t in tiers if t.name == "replicas"), None)
    return ExactResult(
        plan=model.plan(values, f"order={order}, objective=replicas"),
        order=order,
        proven=not unproven,
        status=unproven[0].status if unproven else "Optimal",
        functional=int(values[ys].sum()) if ys.size else 0,
        preferred_satisfied=int(values[preferred].sum()) if preferred.size else 0,
        objective=replica_tier.value if replica_tier else 0.0,
        bound=replica_tier.bound if replica_tier else 0.0,
        seconds=time.perf_counter() - started,
        polished=polished,
        goal="replicas",
        replicas=model.replica_count(values),
        ratio=model.ratio,
        tiers=tuple(tiers),
    )


def _polish(h: Highs, highspy: ModuleType, model: "_Model", values: np.ndarray, time_limit: float) -> tuple[np.ndarray, bool]:
    """Stage 2, keeping stage 1's functional units and affinity: most replicas, then fewest nodes.

    Two solves: the replica count is proven optimal (`True` in the result) when the time
    allows; the node count after it is only improved for a fraction of the time (it is
    cosmetic, and proving it is where the symmetry between identical nodes costs most).
    """
    for unit in model.units:
        h.changeColBounds(unit.y, float(values[unit.y]), float(values[unit.y]))
    preferred = [s for unit in model.units for s in unit.preferred]
    if preferred:
        target = float(sum(values[s] for s in preferred))
        h.addRow(target, highspy.kHighsInf, len(preferred), np.array(preferred, np.int32), np.ones(len(preferred)))
    replicas = np.array([x for unit in model.units for role in unit.roles for x in role.replicas.values()], np.int32)
    used = np.array([c for unit in model.units for c in unit.used.values()], np.int32)
    columns = np.arange(model.size, dtype=np.int32)

    cost = np.zeros(model.size)
    cost[replicas] = 1.0
    h.changeColsCost(model.size, columns, cost)
    h.setOptionValue("time_limit", float(time_limit))
    h.setSolution(model.size, columns, values.astype(float))
    h.run()
    if h.getInfo().primal_solution_status != 2:
        return values, False
    values = np.rint(np.array(h.getSolution().col_value))
    proven = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    if replicas.size:
        h.addRow(float(values[replicas].sum()), highspy.kHighsInf, replicas.size, replicas, np.ones(replicas.size))

    cost = np.zeros(model.size)
    cost[used] = -1.0
    h.changeColsCost(model.size, columns, cost)
    h.setOptionValue("time_limit", max(0.1, time_limit / 5))
    h.setSolution(model.size, columns, values.astype(float))
    h.run()
    if h.getInfo().primal_solution_status == 2:
        values = np.rint(np.array(h.getSolution().col_value))
    return values, proven


# ----------------------------------------------------------------------------- the model


@dataclass
class _RoleVars:
    demand: RoleDemand
    depth: int  # depth of the replica's pack domain
    leaders: dict[int, int] = field(default_factory=dict)  # node -> column
    workers: dict[int, int] = field(default_factory=dict)
    replicas: dict[int, int] = field(default_factory=dict)  # replica domain -> column


@dataclass
class _UnitVars:
    demand: UnitDemand
    view: TopologyView
    depth: int
    y: int
    domains: dict[int, int]
    roles: list[_RoleVars]
    preferred: list[int] = field(default_factory=list)  # satisfied-count columns of Preferred rules
    used: dict[int, int] = field(default_factory=dict)  # node -> column


@dataclass
class _Model:
    """Columns and rows in plain lists, handed to HiGHS as one row-wise LP."""

    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    row_lower: list[float] = field(default_factory=list)
    row_upper: list[float] = field(default_factory=list)
    starts: list[int] = field(default_factory=lambda: [0])
    index: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    units: list[_UnitVars] = field(default_factory=list)
    ratio: bool = False

    @property
    def size(self) -> int:
        return len(self.lower)

    def replica_count(self, values: np.ndarray) -> int:
        """Complete replicas placed (by functional units: the others place nothing)."""
        return int(sum(values[x] for u in self.units for role in u.roles for x in role.replicas.values()))

    def var(self, upper: float, lower: float = 0.0) -> int:
        self.lower.append(lower)
        self.upper.append(upper)
        self.cost.append(0.0)
        return len(self.lower) - 1

    def row(self, terms: Sequence[tuple[int, float]], lower: float, upper: float) -> None:
        for col, coef in terms:
            self.index.append(col)
            self.value.append(coef)
        self.starts.append(len(self.index))
        self.row_lower.append(lower)
        self.row_upper.append(upper)

    def lp(self, highspy: ModuleType) -> HighsLp:
        lp = highspy.HighsLp()
        lp.num_col_ = self.size
        lp.num_row_ = len(self.row_lower)
        lp.col_cost_ = np.array(self.cost, dtype=float)
        lp.col_lower_ = np.array(self.lower, dtype=float)
        lp.col_upper_ = np.array(self.upper, dtype=float)
        lp.row_lower_ = np.array(self.row_lower, dtype=float)
        lp.row_upper_ = np.array(self.row_upper, dtype=float)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.array(self.starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.array(self.index, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(self.value, dtype=float)
        lp.integrality_ = [highspy.HighsVarType.kInteger] * self.size
        lp.sense_ = highspy.ObjSense.kMaximize
        return lp

    # ------------------------------------------------------------------ building

    @classmethod
    def build(
        cls,
        snapshot: ClusterSnapshot,
        views: Mapping[str, TopologyView],
        units: Sequence[UnitDemand],
        order: str,
        *,
        ratio: bool = False,
    ) -> "_Model":
        model = cls(ratio=ratio)
        free = snapshot.free
        usage: dict[tuple[int, int], list[tuple[int, float]]] = {}
        for unit in units:
            model.units.append(model._unit(snapshot, views[unit.topology], unit, usage))
            if ratio:
                model._ratio(model.units[-1])
        for (node, resource), terms in sorted(usage.items()):
            model.row(terms, -np.inf, float(free[node, resource]))
        ceiling = sum(model.upper[s] for u in model.units for s in u.preferred)
        count = len(model.units)
        for i, unit_vars in enumerate(model.units):
            model.cost[unit_vars.y] = (ceiling + 1) * (2 ** (count - 1 - i) if order == "strict" else 1)
            for s in unit_vars.preferred:
                model.cost[s] = 1.0
        return model

    def _unit(
        self,
        snapshot: ClusterSnapshot,
        view: TopologyView,
        unit: UnitDemand,
        usage: dict[tuple[int, int], list[tuple[int, float]]],
    ) -> _UnitVars:
        depth = view.depth(unit.pack_required)
        y = self.var(1)
        domains = {d: self.var(1) for d in range(view.domain_count(depth))}
        self.row([(z, 1.0) for z in domains.values()] + [(y, -1.0)], 0, 0)
        vars_ = _UnitVars(unit, view, depth, y, domains, [])
        for demand in unit.roles:
            vars_.roles.append(self._role(snapshot, view, vars_, demand, usage))
        by_name = {role.demand.name: role for role in vars_.roles}
        sources = [rule.from_role for rule in unit.affinity]
        for rule in unit.affinity:
            source, target = by_name[rule.from_role], by_name[rule.to_role]
            leaders_only = sources.count(rule.from_role) > 1 and source.demand.pods_per_replica > 1
            self._affinity(view, vars_, source, target, view.depth(rule.level), rule.required, leaders_only)
        pods_at: dict[int, list[int]] = {}
        for role in vars_.roles:
            for node, col in list(role.leaders.items()) + list(role.workers.items()):
                pods_at.setdefault(node, []).append(col)
        most = sum(r.demand.desired * r.demand.pods_per_replica for r in vars_.roles)
        for node, cols in sorted(pods_at.items()):
            used = self.var(1)
            vars_.used[node] = used
            self.row([(c, 1.0) for c in cols] + [(used, -float(most))], -np.inf, 0)
        return vars_

    def _role(
        self,
        snapshot: ClusterSnapshot,
        view: TopologyView,
        unit: _UnitVars,
        demand: RoleDemand,
        usage: dict[tuple[int, int], list[tuple[int, float]]],
    ) -> _RoleVars:
        pods = demand.pods_per_replica
        depth = unit.depth if demand.pack_required is None else max(unit.depth, view.depth(demand.pack_required))
        role = _RoleVars(demand, depth)
        missing = snapshot.missing_resources(demand.leader.requests)
        if pods > 1:
            missing += snapshot.missing_resources(demand.worker.requests)
        if demand.desired == 0 or missing:
            if demand.minimum > 0:
                self.upper[unit.y] = 0.0
            return role
        most = demand.desired
        leader_ok = snapshot.eligible(demand.leader.node_selector, demand.leader.tolerations) & view.usable
        worker_ok = snapshot.eligible(demand.worker.node_selector, demand.worker.tolerations) & view.usable
        leader, worker = snapshot.vector(demand.leader.requests), snapshot.vector(demand.worker.requests)
        role.leaders = {int(n): self.var(most) for n in np.nonzero(leader_ok)[0]}
        if pods > 1:
            role.workers = {int(n): self.var(most * (pods - 1)) for n in np.nonzero(worker_ok)[0]}
        for cols, vec in ((role.leaders, leader), (role.workers, worker)):
            for node, col in cols.items():
                for resource in np.nonzero(vec)[0]:
                    usage.setdefault((node, int(resource)), []).append((col, float(vec[resource])))
        per_domain: dict[int, list[int]] = {}
        for e in range(view.domain_count(depth)):
            members = [int(n) for n in view.members(depth, e)]
            leaders = [role.leaders[n] for n in members if n in role.leaders]
            workers = [role.workers[n] for n in members if n in role.workers]
            if not leaders or (pods > 1 and not workers):
                for col in leaders + workers:
                    self.upper[col] = 0.0
                continue
            x = self.var(most)
            role.replicas[e] = x
            self.row([(c, 1.0) for c in leaders] + [(x, -1.0)], 0, 0)
            if pods > 1:
                self.row([(c, 1.0) for c in workers] + [(x, -float(pods - 1))], 0, 0)
            per_domain.setdefault(int(view.ancestor[depth][unit.depth][e]), []).append(x)
        self.row([(x, 1.0) for x in role.replicas.values()] + [(unit.y, -float(demand.minimum))], 0, np.inf)
        for d, z in unit.domains.items():
            self.row([(x, 1.0) for x in per_domain.get(d, [])] + [(z, -float(most))], -np.inf, 0)
        return role

    def _ratio(self, unit: _UnitVars) -> None:
        """Extras in the ratio of the desired counts (see the module docstring)."""
        roles = [r for r in unit.roles if r.demand.desired > 0]
        needed = {rule.to_role for rule in unit.demand.affinity if rule.required}
        for r in roles:
            d_r, m_r = r.demand.desired, r.demand.minimum
            if d_r <= m_r or not r.replicas or r.demand.name in needed:
                continue
            above = self.var(1)  # b_r: the role has extras
            c_r = [(x, 1.0) for x in r.replicas.values()]
            self.row(c_r + [(above, -float(d_r - m_r))], -np.inf, float(m_r))
            for o in roles:
                if o is r:
                    continue
                d_o = o.demand.desired
                big = float(d_o * (d_r - 1) + 1)
                terms = [(x, float(d_o)) for x in r.replicas.values()] + [(x, -float(d_r)) for x in o.replicas.values()]
                self.row(terms + [(above, big)], -np.inf, float(d_o - 1) + big)

    def _affinity(
        self,
        view: TopologyView,
        unit: _UnitVars,
        source: _RoleVars,
        target: _RoleVars,
        depth: int,
        required: bool,
        leaders_only: bool,
    ) -> None:
        """Satisfied `from` replicas per replica domain; see the module docstring."""
        active: dict[int, int] = {}
        for a in range(view.domain_count(depth)):
            members = [int(n) for n in view.members(depth, a)]
            cols = [target.leaders[n] for n in members if n in target.leaders]
            cols += [target.workers[n] for n in members if n in target.workers]
            if cols:
                active[a] = self.var(1)
                self.row([(active[a], 1.0)] + [(c, -1.0) for c in cols], -np.inf, 0)
        most = source.demand.desired
        pods = most * source.demand.pods_per_replica
        for e, x in source.replicas.items():
            s = self.var(most)
            self.row([(s, 1.0), (x, -1.0)], -np.inf, 0)
            if depth <= source.depth:
                a = int(view.ancestor[source.depth][depth][e])
                if a in active:
                    self.row([(s, 1.0), (active[a], -float(most))], -np.inf, 0)
                else:
                    self.upper[s] = 0.0
            else:
                cells = []
                for cell in np.nonzero(view.ancestor[depth][source.depth] == e)[0]:
                    a = int(cell)
                    members = [int(n) for n in view.members(depth, a)]
                    cols = [source.leaders[n] for n in members if n in source.leaders]
                    if not leaders_only:
                        cols += [source.workers[n] for n in members if n in source.workers]
                    if not cols or a not in active:
                        continue
                    q = self.var(pods)
                    self.row([(q, 1.0)] + [(c, -1.0) for c in cols], -np.inf, 0)
                    self.row([(q, 1.0), (active[a], -float(pods))], -np.inf, 0)
                    cells.append(q)
                self.row([(s, 1.0)] + [(q, -1.0) for q in cells], -np.inf, 0)
            if required:
                self.row([(x, 1.0), (s, -1.0)], -np.inf, 0)
            else:
                unit.preferred.append(s)

    # ------------------------------------------------------------------ reading the solution

    def plan(self, values: np.ndarray, how: str) -> Plan:
        out = []
        for unit in self.units:
            demand, view = unit.demand, unit.view
            if values[unit.y] < 0.5:
                empty = tuple((r.demand.name, ()) for r in unit.roles)
                out.append(UnitPlacement(demand, "Unschedulable", f"not functional in the exact optimum ({how})", empty, None))
                continue
            pods_of: dict[str, list[int]] = {}
            for role in unit.roles:
                pods_of[role.demand.name] = [n for cols in (role.leaders, role.workers) for n, c in cols.items() for _ in range(int(values[c]))]
            roles = tuple((role.demand.name, self._replicas(unit, role, values, pods_of)) for role in unit.roles)
            counts = {name: len(reps) for name, reps in roles}
            full = all(counts[r.name] >= r.desired for r in demand.roles)
            chosen = [d for d, z in unit.domains.items() if values[z] > 0.5]
            domain = f"{view.level_names[unit.depth]}/{view.domain_name(unit.depth, chosen[0])}" if chosen else None
            message = "" if full else "placed " + ", ".join(f"{r.name} {counts[r.name]}/{r.desired}" for r in demand.roles)
            out.append(UnitPlacement(demand, "Placed" if full else "MinimumPlaced", message, roles, domain))
        return Plan(tuple(out))

    def _replicas(
        self, unit: _UnitVars, role: _RoleVars, values: np.ndarray, pods_of: Mapping[str, list[int]]
    ) -> tuple[ReplicaAssignment, ...]:
        """Group leaders and workers of each replica domain into replicas.

        Pods in a domain where an affinity rule of this role (as `from`) is met go to
        different replicas first, so as many replicas as the model counted are satisfied.
        """
        view = unit.view
        names = view.snapshot.node_names
        rules = []
        for rule in unit.demand.affinity:
            if rule.from_role == role.demand.name:
                depth = view.depth(rule.level)
                rules.append((depth, {int(view.dom[depth][n]) for n in pods_of.get(rule.to_role, [])}))

        def met(node: int) -> int:
            return sum(int(view.dom[depth][node]) in near for depth, near in rules)

        out: list[ReplicaAssignment] = []
        pods = role.demand.pods_per_replica
        for e in sorted(role.replicas):
            count = int(values[role.replicas[e]])
            members = [int(n) for n in view.members(role.depth, e)]
            leaders = sorted((n for n in members if n in role.leaders for _ in range(int(values[role.leaders[n]]))), key=lambda n: (-met(n), n))
            workers = sorted((n for n in members if n in role.workers for _ in range(int(values[role.workers[n]]))), key=lambda n: (-met(n), n))
            groups: list[list[int]] = [[leader] for leader in leaders[:count]]
            if pods > 1:
                good = [w for w in workers if met(w) > 0]
                rest = [w for w in workers if met(w) == 0]
                for group in groups:
                    if met(group[0]) == 0 and good:
                        group.append(good.pop(0))
                rest = good + rest
                for group in groups:
                    while len(group) < pods:
                        group.append(rest.pop(0))
            for group in groups:
                index = len(out)
                out.append(
                    ReplicaAssignment(
                        index,
                        tuple(PodAssignment(unit.demand.pod_name(role.demand.name, index, p), names[n]) for p, n in enumerate(group)),
                    )
                )
        return tuple(out)
