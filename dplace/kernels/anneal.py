"""Simulated annealing over placements, each judged by a list schedule of that placement (compiled).

A placement is judged by the makespan of one list schedule of it (parallel comm; sequential comm: the
judge :func:`_anneal` is given, :func:`_seq_schedule`, the simulation of the same rank order without
insertion, :func:`_seq_mixed` or the list schedule with insertion of :mod:`.seqjudge`): ops in decreasing
order of the placement's own upward rank (each op's time on its device plus the longest path after it,
edges between devices costing their transfer time; ties by topological position), each at its earliest
start on its device (into an idle gap when one is long enough). That is
``formulations.units.placement_order`` followed by ``dplace.simulate``; :func:`list_makespan` returns the
same number (a test compares them), written here as one loop over plain arrays so that a search can
judge tens of thousands of placements a second on graphs of a few hundred ops. Why not the compiled
``ScheduleState`` (:mod:`dplace.kernels.state`): called from Python once per placement it cost 1.4-1.7 ms
on InceptionV3 (numba unboxing its two named tuples of ~40 arrays on every call), this loop ~0.05 ms.
It is a search's judge only: what ``portfolio`` returns is timed by :func:`dplace.simulate`. Zero-time
ops: their instant counts as busy for an op that would span it (``ScheduleState`` would re-time them
instead); the schedule is still one the simulator gives its order (the test times it with the oracle).

:func:`anneal` moves whole units (colocation groups, single ops) to other allowed devices with room,
swaps two units of different devices, moves a whole block (a branch) to one device, and swaps two devices over a
run of units in topological order (:func:`_relabel_move`), accepting a worse placement with probability
``exp(-increase / temperature)``. It never returns a placement that breaks memory, pins or colocation
(moves keep them) and returns the best placement it judged.
"""
from __future__ import annotations

import numpy as np

from . import njit
from .placerank import op_rank, placement_rank, radix_sorted_ops, sorted_ops
from .ready import ready_at
from .seqjudge import seq_insert_schedule
from .seqorder import insert_at, largest_sends, link_schedule, link_schedule_in

# sequential comm's judges FAST, MIXED and LINKS in the walk: a simulation is stopped once it is sure to end above the
# acceptance threshold times (1 + CUT_SLACK) (:func:`_seq_run_cut`): the ranks' sums and the simulation's differ in
# their rounding only, far below this
CUT_SLACK = 1e-9


@njit
def _schedule(pl, dur, lat, bw, topo, esrc, ebytes, pred_ptr, pred_edge, rank, m, start, end, bs, be, cnt):
    """List schedule of ``pl`` by ``rank`` (ties: topological position); fills start/end, returns the
    makespan. bs/be (m, n): each device's busy intervals sorted by start, cnt[d] of them."""
    return _schedule_in(sorted_ops(topo, rank, -1.0), pl, dur, lat, bw, esrc, ebytes, pred_ptr, pred_edge, m, start,
                        end, bs, be, cnt)


@njit
def _schedule_in(order, pl, dur, lat, bw, esrc, ebytes, pred_ptr, pred_edge, m, start, end, bs, be, cnt):
    """:func:`_schedule` with its rank order given (``order``: every op, each after its predecessors)."""
    for d in range(m):
        cnt[d] = 0
    mk = 0.0
    for o in order:
        d = pl[o]
        r = ready_at(o, d, pl, end, pred_ptr, pred_edge, esrc, ebytes, lat, bw)
        p_o = dur[o, d]
        # earliest t >= r with [t, t + p_o) free (a zero-time op's instant counts as busy for ops that
        # would span it), inserted into d's busy intervals
        t = insert_at(bs, be, cnt, d, r, p_o)
        start[o] = t
        end[o] = t + p_o
        if end[o] > mk:
            mk = end[o]
    return mk


@njit
def _seq_schedule(pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, rank, m,
                  start, end, lfree, arr):
    """Sequential comm: the simulation of ``pl`` with each device running its ops in ``rank`` order
    (ties: topological position; no insertion), i.e. ``simulate(inst, pl, placement_order(inst, pl,
    insertion=False))``: in that order (topological) each op starts when its device is free and its
    inputs arrived, then sends its tensor once per other device that consumes it (the largest bytes),
    each when its link (d, d2) is free, links kept in the device's order as the simulator keeps them.
    O(E + n log n) per placement. lfree (m, m), arr (n * m): scratch."""
    order = radix_sorted_ops(topo, rank, -1.0)
    return _seq_run(order, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                    end, lfree, arr)


@njit
def _above(rank, cut):
    """Whether a placement whose ranks are ``rank`` is sure to take longer than ``cut`` in any order: its longest
    path (the largest rank) is above it."""
    if cut == np.inf:
        return False
    for x in rank:
        if x > cut:
            return True
    return False


@njit
def _seq_run(order, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start, end,
             lfree, arr):
    """Sequential comm: the simulation of ``pl`` with every op taken in ``order`` (an order of all ops where
    each comes after its predecessors): each device runs its ops in that order, each op starting when its
    device is free and its inputs arrived, then sending its tensor once per other device that consumes it
    (the largest bytes), each when its link is free, in that order (the device's: the simulator's). Returns
    the makespan; ``start`` / ``end`` filled."""
    return _seq_run_cut(order, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m,
                        start, end, lfree, arr, end, np.inf)


@njit
def _seq_run_cut(order, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start, end,
                 lfree, arr, rank, cut):
    """:func:`_seq_run`, stopped as soon as the makespan is sure to be above ``cut``: an op starting at ``s`` with
    rank ``rank[o]`` under ``pl`` (:func:`.placerank.placement_rank`: its time plus the longest path after it,
    each edge between devices costing its own transfer time) ends the schedule no earlier than ``s + rank[o]``
    (each consumer starts after the op's end, and after the transfer where it is on another device: the send
    carries at least that edge's bytes and waits for nothing that makes it shorter). Returns ``np.inf`` when stopped
    (``cut`` ``np.inf``: never; ``rank`` not read), else the makespan (then at most ``cut``)."""
    check = cut < np.inf
    dfree = np.zeros(m)
    nb = np.empty(m)
    for d in range(m):
        for d2 in range(m):
            lfree[d, d2] = 0.0
    mk = 0.0
    for o in order:
        d = pl[o]
        r = dfree[d]
        for j in range(pred_ptr[o], pred_ptr[o + 1]):
            p = esrc[pred_edge[j]]
            a = end[p] if pl[p] == d else arr[p * m + d]
            if a > r:
                r = a
        if check and r + rank[o] > cut:
            return np.inf
        f = r + dur[o, d]
        start[o], end[o] = r, f
        dfree[d] = f
        if f > mk:
            mk = f
        largest_sends(o, d, pl, edst, ebytes, succ_ptr, succ_edge, nb)
        for d2 in range(m):
            if nb[d2] >= 0.0:
                s = lfree[d, d2]
                s = f if f >= s else s
                a = s + lat[d, d2] + nb[d2] / bw[d, d2]
                lfree[d, d2] = a
                arr[o * m + d2] = a
    return mk


@njit
def _seq_mixed(pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, rank, m, start,
               end, bs, be, cnt, lfree, arr):
    """Sequential comm, judge MIXED: the better of two orders of ``pl``, each simulated exactly by
    :func:`_seq_run`: the rank order without insertion (:func:`_seq_schedule`, FAST) and the order of the
    starts (ties: topological position) of the parallel-comm list schedule with insertion of the same
    ranks (:func:`_schedule`: its transfers are pure delays, so an op goes into an idle gap its inputs
    reach; the sequential simulation then times that order with the links' queues). Returns (makespan,
    the better order: FAST's when they tie)."""
    o1 = radix_sorted_ops(topo, rank, -1.0)  # sorted_ops' order, sorted faster (and once for both schedules)
    return _seq_mixed_in(o1, pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m,
                         start, end, bs, be, cnt, lfree, arr)


@njit
def _seq_mixed_in(o1, pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                  end, bs, be, cnt, lfree, arr):
    """:func:`_seq_mixed` with its rank order given (``o1``)."""
    return _seq_mixed_cut(o1, pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m,
                          start, end, bs, be, cnt, lfree, arr, end, np.inf)


@njit
def _seq_mixed_cut(o1, pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                   end, bs, be, cnt, lfree, arr, rank, cut):
    """:func:`_seq_mixed_in` with each simulation stopped once it is sure to end above ``cut``
    (:func:`_seq_run_cut`, ``rank``: ``pl``'s ranks), the second also once it is sure to end above the first:
    the same value and order where the better is at most ``cut``, else ``np.inf``."""
    v1 = _seq_run_cut(o1, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                      end, lfree, arr, rank, cut)
    _schedule_in(o1, pl, dur, lat, bw, esrc, ebytes, pred_ptr, pred_edge, m, start, end, bs, be, cnt)
    o2 = radix_sorted_ops(topo, start, 1.0)
    # past the first: not the better one (no cut at all without one: ``rank`` may be a stand-in then)
    c2 = cut if v1 == np.inf or cut == np.inf else min(cut, v1 * (1.0 + CUT_SLACK))
    v2 = _seq_run_cut(o2, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                      end, lfree, arr, rank, c2)
    if v1 <= v2:
        return v1, o1
    return v2, o2


@njit
def _seq_links(pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, rank, m, start,
               end, bs, be, cnt, lfree, arr, ls, le, lcnt):
    """Sequential comm, judge LINKS: the best of three orders of ``pl``, each simulated exactly by
    :func:`_seq_run`: MIXED's two (:func:`_seq_mixed`) and the start order (ties: topological position)
    of :func:`dplace.kernels.seqorder.link_schedule` on the same ranks (the list schedule with insertion
    that keeps the links' queues). Returns (makespan, the best order: the first of the three on a tie);
    never above MIXED's."""
    return _seq_links_cut(radix_sorted_ops(topo, rank, -1.0), pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr,
                          pred_edge, succ_ptr, succ_edge, m, start, end, bs, be, cnt, lfree, arr, ls, le, lcnt, rank,
                          np.inf)


@njit
def _seq_links_cut(o1, pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                   end, bs, be, cnt, lfree, arr, ls, le, lcnt, rank, cut):
    """:func:`_seq_links` with its rank order given (``o1``), each simulation stopped once it is sure to end above
    ``cut`` (:func:`_seq_run_cut`, ``rank``: ``pl``'s ranks) or above the best of the orders simulated before it
    (the link schedule's first: it is the fastest most often, :mod:`dplace.kernels.seqorder`). The same value and
    order (the first of MIXED's two, then the link schedule's, on a tie) where the best is at most ``cut``, else
    ``np.inf``."""
    link_schedule_in(o1, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                     end, bs, be, cnt, ls, le, lcnt, arr)
    o3 = radix_sorted_ops(topo, start, 1.0)
    v3 = _seq_run_cut(o3, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                      end, lfree, arr, rank, cut)
    c1 = cut if v3 == np.inf else min(cut, v3 * (1.0 + CUT_SLACK))  # past the best so far: not the best
    v1 = _seq_run_cut(o1, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                      end, lfree, arr, rank, c1)
    _schedule_in(o1, pl, dur, lat, bw, esrc, ebytes, pred_ptr, pred_edge, m, start, end, bs, be, cnt)
    o2 = radix_sorted_ops(topo, start, 1.0)
    b = min(v1, v3)
    c2 = cut if b == np.inf else min(cut, b * (1.0 + CUT_SLACK))
    v2 = _seq_run_cut(o2, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                      end, lfree, arr, rank, c2)
    if v1 <= v2 and v1 <= v3:
        return v1, o1
    if v2 <= v3:
        return v2, o2
    return v3, o3


@njit
def _evaluate(pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m,
              rank, start, end, bs, be, cnt, seq, lfree, arr):
    placement_rank(pl, dur, lat, bw, topo, esrc, edst, ebytes, succ_ptr, succ_edge, rank)
    if seq:
        return _seq_schedule(pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge,
                             rank, m, start, end, lfree, arr)
    return _schedule(pl, dur, lat, bw, topo, esrc, ebytes, pred_ptr, pred_edge, rank, m, start, end, bs, be, cnt)


JUDGE_FAST, JUDGE_INSERT, JUDGE_BOTH, JUDGE_MIXED, JUDGE_LINKS = 0, 1, 2, 3, 4


@njit
def _judge(pl, args, mode, I, S, L, budget, cut=np.inf):
    """The makespan ``pl`` is judged by: in sequential comm FAST's one order, the better of MIXED's two or the best
    of LINKS' three (:func:`_judge_ranked`), ``_evaluate`` in parallel comm (and BOTH's walk), or the same ranks with
    insertion (INSERT). ``cut`` (sequential comm, FAST, MIXED, LINKS): ``np.inf`` where the value is sure to be
    above it (:func:`_seq_run_cut`), else the same value."""
    rank = args[12]
    if args[18] and (mode == JUDGE_FAST or mode == JUDGE_MIXED or mode == JUDGE_LINKS):
        placement_rank(pl, args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[9], args[10], rank)
        if _above(rank, cut):  # no order can bring it under: neither sorted nor simulated
            return np.inf
        return _judge_ranked(pl, args, mode, radix_sorted_ops(args[3], rank, -1.0), cut)
    if mode == JUDGE_FAST or mode == JUDGE_BOTH:
        return _evaluate(pl, *args[:21])
    placement_rank(pl, args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[9], args[10], rank)
    return seq_insert_schedule(I, S, L, pl, rank, args[3], budget)


@njit
def _both(pl, v, best, bestf, best_pl, args, I, S, L, budget, slack, ins):
    """BOTH, after ``pl`` was accepted at FAST value ``v`` (``args[12]`` holds its ranks): judged by
    INSERT too when ``v`` is within ``slack`` of the best FAST value seen; returns (best, bestf)."""
    if v <= bestf * (1.0 + slack):
        w = seq_insert_schedule(I, S, L, pl, args[12], args[3], budget)
        ins[0] += 1
        if w < best:
            best = w
            best_pl[:] = pl
    if v < bestf:
        bestf = v
    return best, bestf


@njit(borrow=True)
def _rank_update(pl, dur, lat, bw, topo, tpos, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, rank,
                 moved, nmoved, dirty, changed, old):
    """``rank`` (:func:`placement_rank` of the placement before ops ``moved[:nmoved]`` changed device) made
    ``pl``'s, re-computing only the ops whose rank can change: the moved ops, their producers, and the
    producers of every op whose rank changed, in reverse topological order (each op at most once, after all
    its consumers, by the same formula as :func:`placement_rank`, so the result is the same, bit for bit).
    Returns k: ``changed[:k]`` are the ops whose rank changed, ``old[:k]`` their ranks before (to undo).
    ``dirty`` (bool, n) is all False on entry and on return."""
    hi = -1
    ndirty = 0
    for i in range(nmoved):
        u = moved[i]
        if not dirty[u]:
            dirty[u] = True
            ndirty += 1
            if tpos[u] > hi:
                hi = tpos[u]
        for k in range(pred_ptr[u], pred_ptr[u + 1]):
            p = esrc[pred_edge[k]]
            if not dirty[p]:
                dirty[p] = True
                ndirty += 1
                if tpos[p] > hi:
                    hi = tpos[p]
    nch = 0
    i = hi
    while ndirty > 0:
        u = topo[i]
        i -= 1
        if not dirty[u]:
            continue
        dirty[u] = False
        ndirty -= 1
        r = op_rank(u, pl, dur, lat, bw, edst, ebytes, succ_ptr, succ_edge, rank)
        if r != rank[u]:
            changed[nch] = u
            old[nch] = rank[u]
            nch += 1
            rank[u] = r
            for k in range(pred_ptr[u], pred_ptr[u + 1]):
                p = esrc[pred_edge[k]]
                if not dirty[p]:
                    dirty[p] = True
                    ndirty += 1
    return nch


@njit(borrow=True)
def _resort(order, cand, rank, tpos, cap):
    """``cand`` = :func:`sorted_ops`' rank order for ``rank`` (decreasing rank, ties by topological
    position: the same permutation), by an insertion sort of ``order`` (the order of ranks that differ in a
    few ops); False (``cand`` unfinished) once it has moved ops more than ``cap`` places in all."""
    n = len(order)
    moves = 0
    for i in range(n):
        cand[i] = order[i]
    for i in range(1, n):
        o = cand[i]
        r = rank[o]
        tp = tpos[o]
        j = i - 1
        while j >= 0:
            p = cand[j]
            rp = rank[p]
            if rp < r or (rp == r and tpos[p] > tp):
                cand[j + 1] = p
                j -= 1
                moves += 1
            else:
                break
        cand[j + 1] = o
        if moves > cap:
            return False
    return True


@njit(inline="always")
def _add_members(moved, nm, unit_ptr, unit_members, u):
    """Unit ``u``'s ops appended to ``moved`` after its first ``nm``; returns the new count."""
    for q in range(unit_ptr[u], unit_ptr[u + 1]):
        moved[nm] = unit_members[q]
        nm += 1
    return nm


@njit
def _judge_ranked(pl, args, mode, o1, cut):
    """Sequential comm, FAST, MIXED or LINKS, ``args[12]`` holding ``pl``'s ranks and ``o1`` their order: the
    judge's value where it is at most ``cut``, else ``np.inf`` (each simulation stopped as soon as it is sure to end
    above: :func:`_seq_run_cut`). The callers have checked the longest path already (:func:`_above`)."""
    (dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, rank, start, end, bs, be,
     cnt, seq, lfree, arr) = args[:21]
    if mode == JUDGE_MIXED:
        return _seq_mixed_cut(o1, pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge,
                              m, start, end, bs, be, cnt, lfree, arr, rank, cut)[0]
    if mode == JUDGE_LINKS:
        return _seq_links_cut(o1, pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge,
                              m, start, end, bs, be, cnt, lfree, arr, args[21], args[22], args[23], rank, cut)[0]
    return _seq_run_cut(o1, pl, dur, lat, bw, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, start,
                        end, lfree, arr, rank, cut)


@njit
def _judge_moved(pl, args, mode, moved, nmoved, tpos, dirty, changed, old, order, cand, cut=np.inf):
    """The judge after ops ``moved[:nmoved]`` changed device, incrementally: the ranks by :func:`_rank_update`,
    their order by :func:`_resort` from ``order`` (the order before; a full sort when the insertion sort would
    move ops more than 4n places) into ``cand``, then what the judge does with that order: parallel comm the
    list schedule (:func:`_schedule_in`), sequential comm the judge's simulations (:func:`_judge_ranked`: FAST's
    one order, MIXED's two, LINKS' three). The same makespan as :func:`_judge` (tested
    step for step), ``cut`` as there (then ``cand`` is not sorted when the ranks alone put it above). Returns
    (makespan, k: the ops whose rank changed, ``changed[:k]`` / ``old[:k]``)."""
    (dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, rank, start, end, bs, be,
     cnt, seq, lfree, arr) = args[:21]
    nch = _rank_update(pl, dur, lat, bw, topo, tpos, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge,
                       rank, moved, nmoved, dirty, changed, old)
    if seq and _above(rank, cut):  # no order can bring it under: neither sorted nor simulated
        return np.inf, nch
    if not _resort(order, cand, rank, tpos, 4 * len(topo)):
        cand[:] = sorted_ops(topo, rank, -1.0)
    if seq:
        return _judge_ranked(pl, args, mode, cand, cut), nch
    return _schedule_in(cand, pl, dur, lat, bw, esrc, ebytes, pred_ptr, pred_edge, m, start, end, bs, be, cnt), nch


@njit
def _threshold(early, prune, cur, temp):
    """(the step's acceptance number, drawn now where ``early``, else -1; the judge's cut: with ``prune``, the
    value a placement must stay under to be accepted, ``cur - temp * log(u)``, times 1 + :data:`CUT_SLACK`, else
    ``np.inf``). A placement is accepted when its value ``v`` is at most ``cur`` or ``u < exp((cur - v) / temp)``,
    i.e. ``v < cur - temp * log(u)``."""
    if not early:
        return -1.0, np.inf
    u = np.random.random()
    if not prune or cur < 0:
        return u, np.inf
    if temp <= 0:
        return u, cur * (1.0 + CUT_SLACK)
    if u <= 0.0:
        return u, np.inf
    return u, (cur - temp * np.log(u)) * (1.0 + CUT_SLACK)


@njit
def _block_move(pl, unit_ptr, unit_members, unit_mem, allowed, capacity, used, blk_ptr, blk_units, nblk, m, mv_u,
                mv_d):
    """Moves every unit of a random block to a random device where each may go and the device has room
    for those it gains; records the block's units in ``mv_u`` and their devices before in ``mv_d``; returns how
    many (0: no move)."""
    k = np.random.randint(nblk)
    b = np.random.randint(m)
    gain = 0
    changed = False
    for j in range(blk_ptr[k], blk_ptr[k + 1]):
        u = blk_units[j]
        if pl[unit_members[unit_ptr[u]]] != b:
            if not allowed[u, b]:
                return 0
            gain += unit_mem[u]
            changed = True
    if not changed or used[b] + gain > capacity[b]:
        return 0
    for j in range(blk_ptr[k], blk_ptr[k + 1]):
        u = blk_units[j]
        mv_u[j - blk_ptr[k]] = u
        mv_d[j - blk_ptr[k]] = pl[unit_members[unit_ptr[u]]]
        for q in range(unit_ptr[u], unit_ptr[u + 1]):
            pl[unit_members[q]] = b
    return blk_ptr[k + 1] - blk_ptr[k]


@njit
def _relabel_move(pl, unit_ptr, unit_members, unit_mem, allowed, capacity, used, seg_units, lmax, m, mv_u, mv_d):
    """Swaps two random devices a and b over a random run of ``seg_units`` (units in topological order) of
    log-uniform length 2 to ``lmax`` - 1 (2 when ``lmax`` <= 3): its units on a go to b, those on b to a, the
    rest stay; only where each may go and a device that gains memory keeps room. Records the units moved in
    ``mv_u`` and their devices before in ``mv_d``; returns how many (0: no move)."""
    nu = len(seg_units)
    span = min(1 + int((max(2, lmax) - 1) ** np.random.random()), nu)
    s = np.random.randint(nu - span + 1)
    a = np.random.randint(m)
    b = np.random.randint(m - 1)
    if b >= a:
        b += 1
    ma = 0
    mb = 0
    k = 0
    for j in range(s, s + span):
        u = seg_units[j]
        d = pl[unit_members[unit_ptr[u]]]
        if d == a:
            if not allowed[u, b]:
                return 0
            ma += unit_mem[u]
            k += 1
        elif d == b:
            if not allowed[u, a]:
                return 0
            mb += unit_mem[u]
            k += 1
    if k == 0 or (mb > ma and used[a] - ma + mb > capacity[a]) or (ma > mb and used[b] - mb + ma > capacity[b]):
        return 0
    k = 0
    for j in range(s, s + span):
        u = seg_units[j]
        d = pl[unit_members[unit_ptr[u]]]
        if d == a or d == b:
            mv_u[k] = u
            mv_d[k] = d
            k += 1
            for q in range(unit_ptr[u], unit_ptr[u + 1]):
                pl[unit_members[q]] = b if d == a else a
    return k


@njit
def _anneal(pl, dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge,
            unit_ptr, unit_members, unit_mem, allowed, capacity, used, iters, t_hi, t_lo, seed, cur, seq,
            blk_ptr, blk_units, p_blk, judge, I, S, L, budget, slack, ins, inc, seg_units, p_rel, rel_max, prune):
    """``iters`` steps from ``pl`` (changed in place: it ends as the last accepted placement) with the
    temperature going geometrically from t_hi to t_lo; returns (best makespan, best placement, last
    accepted makespan, moves accepted, makespan at the start; ``cur`` < 0: judge the start first).
    Blocks (``blk_ptr``/``blk_units``: lists of unit indices, e.g. a branch's chain): with probability
    ``p_blk`` a step moves every unit of one block to one device instead. Relabel moves (``seg_units``: the units
    in topological order): with probability ``p_rel`` (drawn first) a step swaps two devices over a run of them,
    of log-uniform length up to ``rel_max`` (:func:`_relabel_move`).

    Sequential comm, ``judge`` (:data:`JUDGE_FAST`, :data:`JUDGE_INSERT`, :data:`JUDGE_BOTH`,
    :data:`JUDGE_MIXED`, :data:`JUDGE_LINKS`): what a placement's makespan is. FAST: :func:`_seq_schedule`
    (the rank order without insertion). MIXED / LINKS: the best of two / three orders (:func:`_seq_mixed`,
    :func:`_seq_links`). INSERT: the
    same ranks with insertion (:func:`dplace.kernels.seqjudge.seq_insert_schedule` on the compiled state
    ``I`` / ``S`` / ``L``, reset each time; ~60 times slower). BOTH: the walk (acceptance, ``cur``) by FAST,
    and each accepted placement judged FAST within ``slack`` of the best FAST value seen also judged by
    INSERT; the best kept and returned is INSERT's (``first`` too: the start's INSERT value).
    ``ins`` (float64, 2): [0] counts INSERT judgements; [1] the best FAST value seen (BOTH, kept across
    chunks; <= 0: none yet).
    Sequential comm, FAST, MIXED and LINKS: each step draws its acceptance number before the judge, so that the
    threshold a placement must stay under, ``cur - temp * log(u)``, is known; with ``prune`` the judge stops a
    simulation as soon as it is sure to end above it (:func:`_judge_ranked`): the same walk as without (tested), faster.
    Parallel comm: ``judge`` is ignored. With ``inc`` (parallel comm, and sequential comm's FAST, MIXED and LINKS)
    each placement is judged incrementally from the last accepted one (:func:`_judge_moved`: the same makespan
    as :func:`_judge`, ~30 % less time a step on NASNet-Mobile in parallel comm,
    ``benchmarks/bench_anneal_steps.py``), else from scratch (the reference the tests compare it with)."""
    np.random.seed(seed)
    n = len(pl)
    m = len(capacity)
    nu = len(unit_ptr) - 1
    rank = np.empty(n)
    start = np.empty(n)
    end = np.empty(n)
    bs = np.empty((m, n + 1))
    be = np.empty((m, n + 1))
    cnt = np.zeros(m, dtype=np.int64)
    lfree = np.zeros((m, m))
    arr = np.empty(n * m if seq else 0)
    mode = judge if seq else JUDGE_FAST
    nl = n + 1 if mode == JUDGE_LINKS else 1  # the links' busy intervals (judge LINKS only)
    ls = np.empty((m * m, nl))
    le = np.empty((m * m, nl))
    lcnt = np.zeros(m * m, dtype=np.int64)
    args = (dur, lat, bw, topo, esrc, edst, ebytes, pred_ptr, pred_edge, succ_ptr, succ_edge, m, rank, start,
            end, bs, be, cnt, seq, lfree, arr, ls, le, lcnt)
    if cur < 0:
        cur = _judge(pl, args, mode, I, S, L, budget)
    first = cur
    best = cur
    bestf = cur
    if mode == JUDGE_BOTH:  # cur: the walk's FAST value; best (and first): the start's INSERT value
        _evaluate(pl, *args[:21])
        first = best = seq_insert_schedule(I, S, L, pl, rank, topo, budget)
        ins[0] += 1
        bestf = ins[1] if 0 < ins[1] < cur else cur
    best_pl = pl.copy()
    inc = inc and (not seq or mode == JUDGE_FAST or mode == JUDGE_MIXED or mode == JUDGE_LINKS)
    # the acceptance number drawn before the judge
    early = seq and (mode == JUDGE_FAST or mode == JUDGE_MIXED or mode == JUDGE_LINKS)
    tpos = np.empty(n, dtype=np.int64)  # the incremental judge's scratch
    dirty = np.zeros(n, dtype=np.bool_)
    changed = np.empty(n, dtype=np.int64)
    old = np.empty(n)
    moved = np.empty(n, dtype=np.int64)
    cand = np.empty(n, dtype=np.int64)
    order = topo.copy()
    nch = 0
    if inc:  # the ranks and rank order of the placement the walk is at
        for i in range(n):
            tpos[topo[i]] = i
        placement_rank(pl, dur, lat, bw, topo, esrc, edst, ebytes, succ_ptr, succ_edge, rank)
        order[:] = sorted_ops(topo, rank, -1.0)
    ratio = (t_lo / t_hi) ** (1.0 / max(1, iters)) if t_hi > 0 and t_lo > 0 else 1.0
    temp = t_hi
    accepted = 0
    nblk = len(blk_ptr) - 1
    # a many-unit move's units and their devices before it (block and relabel moves)
    mv_u = np.empty(max(len(seg_units), len(blk_units)), dtype=np.int64)
    mv_d = np.empty(max(len(seg_units), len(blk_units)), dtype=np.int64)
    for _ in range(iters):
        temp *= ratio
        nr = 0
        if p_rel > 0.0 and np.random.random() < p_rel:
            nr = _relabel_move(pl, unit_ptr, unit_members, unit_mem, allowed, capacity, used, seg_units, rel_max, m,
                               mv_u, mv_d)
            if nr == 0:
                continue
        elif nblk > 0 and np.random.random() < p_blk:
            nr = _block_move(pl, unit_ptr, unit_members, unit_mem, allowed, capacity, used, blk_ptr, blk_units, nblk,
                             m, mv_u, mv_d)
            if nr == 0:
                continue
        if nr > 0:
            ua, cut = _threshold(early, prune, cur, temp)
            if inc:
                nm = 0
                for j in range(nr):
                    nm = _add_members(moved, nm, unit_ptr, unit_members, mv_u[j])
                v, nch = _judge_moved(pl, args, mode, moved, nm, tpos, dirty, changed, old, order, cand, cut)
            else:
                v = _judge(pl, args, mode, I, S, L, budget, cut)
            if v <= cur or (temp > 0 and (ua if early else np.random.random()) < np.exp((cur - v) / temp)):
                cur = v
                accepted += 1
                if inc:
                    order, cand = cand, order
                for j in range(nr):
                    u = mv_u[j]
                    used[mv_d[j]] -= unit_mem[u]
                    used[pl[unit_members[unit_ptr[u]]]] += unit_mem[u]
                if mode == JUDGE_BOTH:
                    best, bestf = _both(pl, v, best, bestf, best_pl, args, I, S, L, budget, slack, ins)
                elif v < best:
                    best = v
                    best_pl[:] = pl
            else:
                for j in range(nr):
                    u = mv_u[j]
                    for q in range(unit_ptr[u], unit_ptr[u + 1]):
                        pl[unit_members[q]] = mv_d[j]
                for i in range(nch if inc else 0):
                    rank[changed[i]] = old[i]
            continue
        u = np.random.randint(nu)
        a = pl[unit_members[unit_ptr[u]]]
        swap = np.random.random() < 0.3
        if swap:
            w = np.random.randint(nu)
            b = pl[unit_members[unit_ptr[w]]]
            if b == a or not allowed[u, b] or not allowed[w, a]:
                continue
            if used[b] - unit_mem[w] + unit_mem[u] > capacity[b] or used[a] - unit_mem[u] + unit_mem[w] > capacity[a]:
                continue
        else:
            w = -1
            b = np.random.randint(m - 1)
            if b >= a:
                b += 1
            if not allowed[u, b] or used[b] + unit_mem[u] > capacity[b]:
                continue
        for k in range(unit_ptr[u], unit_ptr[u + 1]):
            pl[unit_members[k]] = b
        if w >= 0:
            for k in range(unit_ptr[w], unit_ptr[w + 1]):
                pl[unit_members[k]] = a
        ua, cut = _threshold(early, prune, cur, temp)
        if inc:
            nm = _add_members(moved, 0, unit_ptr, unit_members, u)
            if w >= 0:
                nm = _add_members(moved, nm, unit_ptr, unit_members, w)
            v, nch = _judge_moved(pl, args, mode, moved, nm, tpos, dirty, changed, old, order, cand, cut)
        else:
            v = _judge(pl, args, mode, I, S, L, budget, cut)
        if v <= cur or (temp > 0 and (ua if early else np.random.random()) < np.exp((cur - v) / temp)):
            cur = v
            accepted += 1
            if inc:
                order, cand = cand, order
            used[a] -= unit_mem[u]
            used[b] += unit_mem[u]
            if w >= 0:
                used[b] -= unit_mem[w]
                used[a] += unit_mem[w]
            if mode == JUDGE_BOTH:
                best, bestf = _both(pl, v, best, bestf, best_pl, args, I, S, L, budget, slack, ins)
            elif v < best:
                best = v
                best_pl[:] = pl
        else:
            for k in range(unit_ptr[u], unit_ptr[u + 1]):
                pl[unit_members[k]] = a
            if w >= 0:
                for k in range(unit_ptr[w], unit_ptr[w + 1]):
                    pl[unit_members[k]] = b
            for i in range(nch if inc else 0):
                rank[changed[i]] = old[i]
    if mode == JUDGE_BOTH:
        ins[1] = bestf
    return best, best_pl, cur, accepted, first


def _arrays(inst):
    from . import inst_arrays

    return inst_arrays(inst)


def list_makespan(inst, placement) -> tuple[float, np.ndarray, np.ndarray]:
    """(makespan, start, end) of the list schedule of ``placement`` that :func:`anneal` judges by."""
    a = _arrays(inst)
    pl = np.asarray(placement, dtype=np.int64)
    n, m = a.n, a.m
    rank, start, end = np.empty(n), np.empty(n), np.empty(n)
    bs, be = np.empty((m, n + 1)), np.empty((m, n + 1))
    mk = _evaluate(pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge, a.succ_ptr,
                   a.succ_edge, m, rank, start, end, bs, be, np.zeros(m, dtype=np.int64), a.sequential,
                   np.zeros((m, m)), np.empty(n * m))
    return float(mk), start, end


class Annealer:
    """:func:`_anneal` on one instance, run in chunks (``step``) so that the caller can keep its clock."""

    def __init__(self, inst, placement, units: list[list[int]], allowed: list[list[int]],
                 blocks: list[list[int]] = (), p_block: float = 0.0, judge: int = JUDGE_FAST,
                 slack: float = 0.02, incremental: bool = True, p_relabel: float = 0.0,
                 relabel_max: int = 0, prune: bool = True) -> None:
        """``blocks``: lists of indices into ``units`` moved together with probability ``p_block`` a step.
        ``judge`` / ``slack``: sequential comm's judge (:func:`_anneal`; ignored in parallel comm).
        ``incremental``: the judge from the last accepted placement where it can be (parallel comm, sequential
        comm's FAST, MIXED and LINKS: :func:`_judge_moved`; False: from scratch, the reference). ``prune``: sequential
        comm's FAST, MIXED and LINKS stop a simulation once it is sure to end above the acceptance threshold
        (:func:`_anneal`; the same walk, faster; False: every simulation to its end)."""
        from . import CASCADE_BUDGET
        from .seqlinks import new_links
        from .state import inst_tuple, new_state

        a = self.a = _arrays(inst)
        self.judge = int(judge) if a.sequential else JUDGE_FAST
        # the compiled sequential state, else small stand-ins of its types (2 x 2: a 1-row link table's
        # columns would be contiguous, another type, another compilation)
        real = self.judge in (JUDGE_INSERT, JUDGE_BOTH)
        self.I = inst_tuple(a)
        self.S = new_state(a.n, a.m) if real else new_state(2, 2)
        self.L = new_links(a.n, a.m) if real else new_links(2, 2)
        self.budget = CASCADE_BUDGET
        self.slack = float(slack)
        self.incremental = bool(incremental)
        self.prune = bool(prune)
        self.ins = np.zeros(2)  # [INSERT judgements, BOTH's best FAST value]
        self.blk_ptr = np.concatenate([[0], np.cumsum([len(b) for b in blocks])]).astype(np.int64)
        self.blk_units = np.asarray([u for b in blocks for u in b], dtype=np.int64)
        self.p_blk = float(p_block) if len(blocks) else 0.0
        self.pl = np.asarray(placement, dtype=np.int64).copy()
        # a unit is where its first op is, or on its first allowed device when that is not (a start that splits
        # one is made whole: the walk's moves and memory count it there, and a relabel move leaves a split unit
        # split)
        for u, al in zip(units, allowed):
            d = int(self.pl[u[0]])
            self.pl[u] = d if d in al else al[0]
        sizes = [len(u) for u in units]
        self.unit_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.unit_members = np.asarray([o for u in units for o in u], dtype=np.int64)
        self.unit_mem = np.asarray([int(sum(int(a.mem[o]) for o in u)) for u in units], dtype=np.int64)
        # relabel moves: the units by their first op's topological position, runs of them up to relabel_max
        tp = inst.topo_pos
        self.seg_units = np.asarray(sorted(range(len(units)), key=lambda i: min(tp[o] for o in units[i])),
                                    dtype=np.int64)
        self.p_rel = float(p_relabel) if len(units) > 1 and a.m > 1 else 0.0
        self.rel_max = int(relabel_max) if relabel_max > 0 else max(2, len(units) // 4)
        self.allowed = np.zeros((len(units), a.m), dtype=np.bool_)
        for i, al in enumerate(allowed):
            self.allowed[i, al] = True
        self.used = np.zeros(a.m, dtype=np.int64)
        for i, u in enumerate(units):
            self.used[self.pl[u[0]]] += self.unit_mem[i]
        self.cur = -1.0
        self.start_value = float("nan")  # the start's makespan, known after the first step
        self.result = (float("inf"), self.pl.copy())  # (best makespan, its placement): one assignment
        self.accepted = 0
        self.steps = 0

    def step(self, iters: int, t_hi: float, t_lo: float, seed: int) -> float:
        a = self
        A = self.a
        best, best_pl, cur, acc, first = _anneal(self.pl, A.dur, A.lat, A.bw, A.topo, A.esrc, A.edst, A.ebytes, A.pred_ptr,
                                          A.pred_edge, A.succ_ptr, A.succ_edge, a.unit_ptr, a.unit_members,
                                          a.unit_mem, a.allowed, A.capacity, a.used, iters, t_hi, t_lo, seed,
                                          self.cur, A.sequential, a.blk_ptr, a.blk_units, a.p_blk, self.judge,
                                          self.I, self.S, self.L, self.budget, self.slack, self.ins,
                                          self.incremental, a.seg_units, a.p_rel, a.rel_max, self.prune)
        if self.cur < 0:
            self.start_value = float(first)
        self.cur = float(cur)
        self.accepted += int(acc)
        self.steps += iters
        if best < self.result[0]:
            self.result = (float(best), best_pl.copy())
        return self.result[0]


def _seq_order(inst, placement, links: bool) -> tuple[float, list[list[int]]]:
    """(makespan, per-device order) of ``placement`` by judge MIXED (:func:`_seq_mixed`) or LINKS
    (:func:`_seq_links`), on fresh work arrays."""
    a = _arrays(inst)
    pl = np.asarray(placement, dtype=np.int64)
    n, m = a.n, a.m
    rank, start, end = np.empty(n), np.empty(n), np.empty(n)
    bs, be = np.empty((m, n + 1)), np.empty((m, n + 1))
    placement_rank(pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.succ_ptr, a.succ_edge, rank)
    args = (pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge, a.succ_ptr,
            a.succ_edge, rank, m, start, end, bs, be, np.zeros(m, dtype=np.int64), np.zeros((m, m)), np.empty(n * m))
    if links:
        mk, order = _seq_links(*args, np.empty((m * m, n + 1)), np.empty((m * m, n + 1)), np.zeros(m * m, dtype=np.int64))
    else:
        mk, order = _seq_mixed(*args)
    lists: list[list[int]] = [[] for _ in range(m)]
    for o in order.tolist():
        lists[int(pl[o])].append(o)
    return float(mk), lists


def seq_mixed(inst, placement) -> tuple[float, list[list[int]]]:
    """Sequential comm: (makespan, per-device order) of ``placement`` by judge MIXED (:func:`_seq_mixed`);
    ``dplace.simulate`` of that order gives that makespan (tests/kernels/test_seqjudge.py)."""
    return _seq_order(inst, placement, links=False)


def seq_links(inst, placement) -> tuple[float, list[list[int]]]:
    """Sequential comm: (makespan, per-device order) of ``placement`` by judge LINKS (:func:`_seq_links`);
    ``dplace.simulate`` of that order gives that makespan (tests/kernels/test_seqjudge.py)."""
    return _seq_order(inst, placement, links=True)
