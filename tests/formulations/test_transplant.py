"""Pieces' schedules put into a whole answer (formulations/transplant.py) and mirrored pairs chained
(formulations/stems.py): kept only when the simulation is faster; the deadline; the pairs' instances."""
from dplace.budget import Budget
from dplace.formulations.stems import chained, mirrored_pairs, pair_pieces, widened
from dplace.formulations.transplant import transplant
from dplace.instance.model import Device, Edge, Instance, Op
from dplace.schedule.simulate import simulate


def _two_chains(k: int = 4) -> Instance:
    ops = [Op(f"{c}{i}", 10.0, 1) for c in "ab" for i in range(k)]
    edges = [Edge(f"{c}{i}", f"{c}{i + 1}", 1.0) for c in "ab" for i in range(k - 1)]
    return Instance("two", [Device("d0", 100), Device("d1", 100)], ops, edges)


def _piece(inst: Instance, names: list[str], devs: list[int], **kw) -> dict:
    t, out = 0.0, []
    for _ in names:
        out.append(t)
        t += 10.0
    return {"members": [inst.op_index[x] for x in names], "placement": devs, "start": out, **kw}


def test_a_faster_piece_is_kept_and_the_answer_is_the_simulations():
    inst = _two_chains()
    pl = [0] * inst.n  # both chains on one device: 80 µs
    sch = simulate(inst, pl)
    piece = _piece(inst, [f"b{i}" for i in range(4)], [1] * 4)
    new, od, got, st = transplant(inst, pl, sch, [piece], budget=Budget(10.0))
    assert sch.makespan == 80.0 and st.kept == 1 and got.makespan == 40.0 == st.makespan
    assert simulate(inst, new, od).makespan == got.makespan
    assert len({new[inst.op_index[f"a{i}"]] for i in range(4)} | {new[inst.op_index[f"b{i}"]] for i in range(4)}) == 2


def test_a_slower_piece_is_not_kept():
    inst = _two_chains()
    pl = [0] * 4 + [1] * 4  # 40 µs, the optimum
    sch = simulate(inst, pl)
    piece = _piece(inst, ["b0", "b1"], [0, 0], fixed_devices=True)  # b0, b1 beside the a chain: slower
    new, od, got, st = transplant(inst, pl, sch, [piece], budget=Budget(10.0))
    assert st.kept == 0 and st.tried == 1 and new == pl and got.makespan == sch.makespan == 40.0


def test_transplant_stops_at_its_deadline():
    inst = _two_chains()
    pl = [0] * inst.n
    sch = simulate(inst, pl)
    piece = _piece(inst, [f"b{i}" for i in range(4)], [1] * 4)
    new, _, got, st = transplant(inst, pl, sch, [piece], budget=Budget(0.0))
    assert st.stopped == "time limit" and st.tried == 0 and new == pl and got.makespan == 80.0


def _mirrored(cells: int = 3, width: int = 3) -> Instance:
    """A forward pass of cells (a join, then `width` parallel ops) and its backward mirror, each backward op
    tied to its forward twin by colocation."""
    ops, edges = [], []
    prev = "f_in"
    ops.append(Op(prev, 5.0, 1, colocation="g_in"))
    for c in range(cells):
        j = f"f_j{c}"
        for w in range(width):
            x = f"f_x{c}_{w}"
            ops.append(Op(x, 3.0 + w, 1, colocation=f"g_x{c}_{w}"))
            edges += [Edge(prev, x, 4.0), Edge(x, j, 4.0)]
        ops.append(Op(j, 1.0, 1, colocation=f"g_j{c}"))
        prev = j
    ops.append(Op("b_loss", 1.0, 1))
    edges.append(Edge(prev, "b_loss", 1.0))
    bj = f"b_j{cells - 1}"
    ops.append(Op(bj, 2.0, 1, colocation=f"g_j{cells - 1}"))
    edges.append(Edge("b_loss", bj, 4.0))
    for c in reversed(range(cells)):
        nxt = f"b_j{c - 1}" if c else "b_in"
        ops.append(Op(nxt, 2.0 if c else 10.0, 1, colocation=f"g_j{c - 1}" if c else "g_in"))
        for w in range(width):
            x = f"b_x{c}_{w}"
            ops.append(Op(x, 6.0 + 2 * w, 1, colocation=f"g_x{c}_{w}"))
            edges += [Edge(bj, x, 4.0), Edge(x, nxt, 4.0)]
        bj = nxt
    return Instance("mirror", [Device(f"d{i}", 10**6) for i in range(3)], ops, edges)


def test_mirrored_pairs_and_their_chained_instance():
    inst = _mirrored()
    ids = inst.columns.ids
    pairs = mirrored_pairs(inst)
    assert len(pairs) == 3
    a, b = pairs[0]
    g = inst.group_of
    assert g[a[0]] == g[b[-1]] and g[a[-1]] == g[b[0]]  # P's ends tied to Q's ends, crosswise
    sub, members = chained(inst, a, b)
    assert members == a + b and sub.n == len(a) + len(b)
    assert any(e.src == ids[a[-1]] and e.dst == ids[b[0]] for e in sub.edges)  # Q after P
    pl = [0] * inst.n
    sub2, members2 = chained(inst, a, b, pl)
    assert members2 == members and sub2.n > sub.n
    pinned = {op.id: op.device for op in sub2.ops if op.id.startswith("~") and op.id != "~rest"}
    assert pinned and all(d == "d0" for d in pinned.values())
    sch = simulate(inst, pl)
    wa, wb = widened(inst, sch, a, b)
    assert set(a) <= set(wa) and set(b) <= set(wb) and wa[0] == a[0] and not set(wa) & set(wb)


def test_pair_pieces_are_pieces_of_two_parts_within_the_budget():
    inst = _mirrored()
    pl = [0] * inst.n
    sch = simulate(inst, pl)
    pieces = pair_pieces(inst, budget=Budget(5.0), method="heft", placement=pl, schedule=sch)
    assert len(pieces) == 1
    p = pieces[0]
    assert len(p["members"]) == len(p["placement"]) == len(p["start"]) == len(p["part"])
    assert set(p["part"]) == {0, 1} and p["fixed_devices"]
    assert pair_pieces(inst, budget=Budget(0.0), method="heft") == []
    _, _, got, st = transplant(inst, pl, sch, pieces, budget=Budget(5.0))
    assert got.makespan <= sch.makespan and got.memory_ok
