"""``optimizer/reservations/milp.py`` with spend commitments, on problems written in the test whose
optimum is worked out by hand: the solution's counts, steps, dispatch, spend per commitment,
model size and names (docs/testing.md, mutation testing of ``reserve/milp.py``).

One week (168 h), one scenario. Keys: 0 = p5 at 10 $/h on demand, 1 = g6e at 2 $/h. Classes:
0 = p5 that may run on spot at 4 $/h (2 nodes), 1 = g6e firm (3 nodes), 2 = p5 firm (1 node).
Product: a p5 reservation at 6 $/h (dearer than spot). Spend commitments, applied in this
order: ``isp`` covers p5 at 3 $/h per node-hour (replacing its 10 $/h), in 3 $/h steps;
``csp`` covers p5 at 3.5 $/h and g6e at 0.7 $/h, in 0.7 $/h steps.

The cheapest way to serve each node-hour: p5 (firm or spot-ok) through ``isp`` at 3 $/h
(below csp's 3.5, spot's 4, the reservation's 6 and on-demand's 10); g6e through ``csp`` at 0.7
(below 2). So isp is bought at 3 nodes × 3 = 9 $/h (3 steps), csp at 3 × 0.7 = 2.1 $/h
(3 steps), nothing reserved, nothing on spot or on demand: 11.1 $/h × 168 h = 1,864.8 $.
"""

from __future__ import annotations

import numpy as np

from ptplan.reservations import milp
from ptplan.reservations.problem import DemandClass, Problem, ProductRow, Risk, SpendRow

H = 168.0
KEYS = [("aws", "us-east-1", "p5.48xlarge"), ("aws", "us-east-1", "g6e.xlarge")]


def optimum(got: float, best: float) -> None:
    """The objective ``solve`` reports: the primary cost at the tie-broken purchase, which
    may use the tie-break's slack of TIE_TOL = 1e-7 of the optimum (the dispatch is not in
    the second objective; CBC lands 1.2e-7 above), never less than the optimum; within the
    1e-6 that ``reserve.check.verify`` allows."""
    assert best * (1 - 1e-9) <= got <= best * (1 + 1e-6)


def close(got: list[np.ndarray], want: list[float]) -> None:
    """One (1, 1) array per class or commitment, to 1e-5 (the
    solver's feasibility tolerance and the tie-break's slack)."""
    assert [a.shape for a in got] == [(1, 1)] * len(want)
    np.testing.assert_allclose([float(a[0, 0]) for a in got], want, rtol=1e-6, atol=1e-5)


def _spend(
    name: str, kind: str, rates: dict[int, tuple[float, float]], step: float, weeks: int = 1
) -> SpendRow:
    return SpendRow(
        name=name,
        kind=kind,
        provider="aws",
        term_years=1,
        rates=rates,
        step=step,
        source="test",
        assumption=False,
        active=np.ones(weeks),
    )


def _problem(
    nodes: tuple[float, float, float] = (2.0, 3.0, 1.0), risk: Risk | None = None
) -> Problem:
    spot_ok, g6e, firm = nodes
    classes = [
        DemandClass(0, 4.0, np.array([[spot_ok]])),
        DemandClass(1, None, np.array([[g6e]])),
        DemandClass(0, None, np.array([[firm]])),
    ]
    ri = ProductRow("ri", 0, 1, 6.0, 0.0, "test", False, np.ones(1))
    return Problem(
        name="t",
        weeks=1,
        scenarios=["only"],
        weights=[1.0],
        multipliers=[1.0],
        prob=np.array([1.0]),
        keys=KEYS,
        on_demand=[10.0, 2.0],
        classes=classes,
        products=[ri],
        existing_nodes=np.zeros((2, 1)),
        existing_cost_usd=0.0,
        risk=risk,
        spend=[
            _spend("isp", "ec2_instance_savings_plan", {0: (3.0, 10.0)}, 3.0),
            _spend("csp", "compute_savings_plan", {0: (3.5, 10.0), 1: (0.7, 2.0)}, 0.7),
        ],
    )


def test_the_cheapest_commitment_serves_each_class() -> None:
    """The answer of the module docstring, field by field. Spent: isp 2 × 3 (spot-ok p5) +
    1 × 3 (firm p5) = 9 $/h; csp 3 × 0.7 = 2.1 $/h. A spot-ok node covered beyond its demand
    is not a saving: with spot 4 $/h dearer than csp's 3.5, a spot variable below 0 would
    let csp cover the same 2 nodes again and "save" 0.5 $/h each."""
    for solver in ("highs", "cbc"):
        sol = milp.solve(_problem(), solver)
        assert (sol.counts, sol.steps, sol.status) == ([0], [3, 3], "optimal")
        optimum(sol.objective, 11.1 * H)
        close(sol.covered, [2.0, 3.0, 1.0])
        close(sol.spent, [9.0, 2.1])
        close(sol.used, [0.0, 0.0, 0.0])
        close(sol.spot, [0.0, 0.0, 0.0])
        # variables: x; y × 2; u for 3 classes; v for class 0; z: class 0 × 2 commitments,
        # class 1 × csp, class 2 × 2. Rows: 3 cover, a capacity row per key, a spend row per
        # commitment, and the tie-break's bound on the cost.
        assert (sol.variables, sol.integers, sol.constraints) == (12, 3, 8)


def test_spot_when_it_is_cheaper_than_every_commitment() -> None:
    """Spot-ok p5 only (2 nodes), with isp at 5 $/h per node-hour: spot (4 $/h) wins; no
    commitment, no coverage: 2 × 4 × 168 = 1,344 $."""
    pb = _problem((2.0, 0.0, 0.0))
    pb.classes = pb.classes[:1]
    pb.spend = [_spend("isp", "ec2_instance_savings_plan", {0: (5.0, 10.0)}, 5.0)]
    sol = milp.solve(pb)
    assert (sol.counts, sol.steps) == ([0], [0])
    optimum(sol.objective, 2 * 4.0 * H)
    close(sol.spot, [2.0])
    close(sol.covered, [0.0])
    close(sol.spent, [0.0])


def test_a_reservation_below_every_commitment_is_bought() -> None:
    """The reservation at 2.5 $/h undercuts isp's 3: the 3 p5 nodes (spot-ok and firm) are
    reserved, g6e still through csp: (3 × 2.5 + 2.1) × 168."""
    pb = _problem()
    pb.products = [ProductRow("ri", 0, 1, 2.5, 0.0, "test", False, np.ones(1))]
    sol = milp.solve(pb)
    assert (sol.counts, sol.steps) == ([3], [0, 3])
    optimum(sol.objective, (3 * 2.5 + 2.1) * H)
    close(sol.used, [2.0, 0.0, 1.0])
    close(sol.covered, [0.0, 3.0, 0.0])
    close(sol.spent, [0.0, 2.1])


def test_nothing_to_serve_costs_nothing() -> None:
    """No demand in the horizon: nothing bought and an objective of exactly 0, with and
    without spend commitments."""
    sol = milp.solve(_problem((0.0, 0.0, 0.0)))
    assert (sol.counts, sol.steps, sol.objective) == ([0], [0, 0], 0.0)
    pb = _problem((0.0, 0.0, 0.0))
    pb.spend = []  # no second (tie-break) solve
    sol = milp.solve(pb)
    assert (sol.counts, sol.steps, sol.objective) == ([0], [], 0.0)


def test_cvar_with_commitments_of_one_scenario_is_its_cost() -> None:
    """One scenario: CVaR of any level is that scenario's cost, so any weight gives 1,864.8."""
    sol = milp.solve(_problem(risk=Risk(0.9, 0.7)))
    assert sol.steps == [3, 3]
    optimum(sol.objective, 11.1 * H)


def test_model_names_of_commitments_and_spend_rows() -> None:
    """``ReserveModel.names`` for the spend part: y per commitment, z per scenario,
    commitment, class and week, a spend row per scenario, commitment and week."""
    names = milp.build(_problem()).names
    spend = {k: v for k, v in names.items() if k[0] in "yz" or k.startswith("spend")}
    assert spend == {
        "y_0": ("commit", "isp"),
        "y_1": ("commit", "csp"),
        "z_0_0_0_0": ("spend", "only:isp:0:0"),
        "z_0_1_0_0": ("spend", "only:csp:0:0"),
        "z_0_1_1_0": ("spend", "only:csp:1:0"),
        "z_0_0_2_0": ("spend", "only:isp:2:0"),
        "z_0_1_2_0": ("spend", "only:csp:2:0"),
        "spend_0_0_0": ("spend", "only:isp:0"),
        "spend_0_1_0": ("spend", "only:csp:0"),
    }


def test_a_tie_between_plans_goes_to_the_compute_plan() -> None:
    """Firm p5 only (1 node), the reservation, isp and csp all at 6.5 $/h a node: equally
    cheap (6.5 × 168 = 1,092 $), and the tie goes to the most flexible, the Compute SP
    (weights 3, 2 and 1 per dollar), with either solver."""
    pb = _problem((0.0, 0.0, 1.0))
    pb.products = [ProductRow("ri", 0, 1, 6.5, 0.0, "test", False, np.ones(1))]
    pb.spend = [
        _spend("isp", "ec2_instance_savings_plan", {0: (6.5, 10.0)}, 6.5),
        _spend("csp", "compute_savings_plan", {0: (6.5, 10.0)}, 6.5),
    ]
    for solver in ("highs", "cbc"):
        sol = milp.solve(pb, solver)
        assert (sol.counts, sol.steps) == ([0], [0, 1])
        optimum(sol.objective, 6.5 * H)
