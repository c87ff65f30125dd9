"""Compiled list schedulers for parallel comm: HEFT's and DPOS's whole loop (priority order, placement
rules, est/commit of :mod:`dplace.kernels.state`), the upward rank and the priority order. Each gives
what the pure-Python reference (heuristics/heft.py, heuristics/fastt.py, dplace/schedule/ranks.py) gives, float
for float: same summation order, same tie-breaking (tests compare them)."""
from __future__ import annotations

import numpy as np

from . import njit
from . import seqstate as sq
from .levels import _longest_from, longest_from, op_costs  # noqa: F401 - re-exported: the rank kernels' parts
from .orders import RETIMED, device_free
from .rules import rules_assign, rules_candidates, rules_fits, rules_forced
from .state import commit, commit_at, est_at, ready_on

@njit
def _before(rank, tp, a, b):
    ra, rb = rank[a], rank[b]
    return ra > rb or (ra == rb and tp[a] < tp[b])


@njit
def _kahn_push(heap, size, o, rank, tp):
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if not _before(rank, tp, o, heap[p]):
            break
        heap[i] = heap[p]
        i = p
    heap[i] = o
    return size + 1


@njit
def priority_order(rank, tp, pred_ptr, succ_ptr, succ_edge, edst):
    """Kahn's algorithm always taking the ready op of largest rank, ties to the smaller topological
    position (``priority_order(inst, lambda o: (-rank[o], tp[o]))``)."""
    n = len(rank)
    indeg = np.empty(n, dtype=np.int64)
    heap = np.empty(n, dtype=np.int64)
    size = 0
    for o in range(n):
        indeg[o] = pred_ptr[o + 1] - pred_ptr[o]
    out = np.empty(n, dtype=np.int64)
    cnt = 0
    for o in range(n):
        if indeg[o] == 0:
            size = _kahn_push(heap, size, o, rank, tp)
    while size > 0:
        u = heap[0]
        size -= 1
        x = heap[size]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= size:
                break
            if c + 1 < size and _before(rank, tp, heap[c + 1], heap[c]):
                c += 1
            if not _before(rank, tp, heap[c], x):
                break
            heap[i] = heap[c]
            i = c
        if size > 0:
            heap[i] = x
        out[cnt] = u
        cnt += 1
        for k in range(succ_ptr[u], succ_ptr[u + 1]):
            v = edst[succ_edge[k]]
            indeg[v] -= 1
            if indeg[v] == 0:
                size = _kahn_push(heap, size, v, rank, tp)
    return out[:cnt]


@njit(borrow=True)
def _ready_all(I, S, L, o, cand, nc, ready, harm=None):
    """data_ready of o on cand[:nc] into ready[:nc]: parallel comm (``L`` None) or sequential (``L`` the
    links of :mod:`dplace.kernels.seqstate`; ``harm``: an array for each device's ``L.harm``)."""
    if L is None:
        ready_on(I, S, o, cand, nc, ready)
    elif harm is None:
        for i in range(nc):
            ready[i] = sq.data_ready(I, S, L, o, cand[i])
    else:
        for i in range(nc):
            ready[i] = sq.data_ready(I, S, L, o, cand[i], True)
            harm[i] = L.harm[0]


@njit(borrow=True)
def _commit_at(I, S, L, o, d, ready, t, insertion):
    if L is None:
        return commit_at(I, S, o, d, ready, t, insertion)
    return sq.commit_at(I, S, L, o, d, ready, t, insertion)


@njit(borrow=True)
def _commit(I, S, L, o, d, insertion):
    if L is None:
        return commit(I, S, o, d, 0.0, False, insertion)
    return sq.commit(I, S, L, o, d, 0.0, False, insertion)


@njit(borrow=True)
def split_cost(I, S, o, d):
    """``heuristics.heft.split_cost``: the link time o's tensors would need on d to reach its successors
    not yet committed whose committed inputs (other than o's) are all on other devices."""
    total = 0.0
    for j in range(I.succ_ptr[o], I.succ_ptr[o + 1]):
        e = I.succ_edge[j]
        v = I.edst[e]
        if S.placement[v] >= 0:
            continue
        c = np.inf
        for k in range(I.pred_ptr[v], I.pred_ptr[v + 1]):
            p = I.esrc[I.pred_edge[k]]
            dp = S.placement[p]
            if p == o or dp < 0:
                continue
            if dp == d:
                c = np.inf
                break
            x = I.lat[d, dp] + I.ebytes[e] / I.bw[d, dp]
            if x < c:
                c = x
        if c < np.inf:
            total += c
    return total


@njit
def heft_loop(I, S, R, order, insertion, L=None, harm=None, look=0.0, follow=None, trace=None):
    """HEFT's loop (heuristics/heft.py): each op on the candidate device of smallest EFT (first one on
    ties), then committed there at that est (what ``commit`` would compute again). ``L``: the link
    state in sequential comm; ``harm`` (an array of m floats, sequential comm): the link-aware test,
    EFT + the most a committed send would arrive later + ``look`` x :func:`split_cost` (``heft_links``).
    ``follow`` (per op the op whose device it takes when that one is placed and among its candidates,
    -1: none): ``heft_links``' co-placement of a backward op with its forward op. ``trace`` (an
    (len(order), 3) float array, benchmarks/bench_cascades.py): per commit k, the ops it re-timed, the
    margin of its choice (second-best score - best; inf with one candidate) and the most another
    device's free time grew."""
    m = len(I.capacity)
    cand = np.empty(m, dtype=np.int64)
    ready = np.empty(m)
    free0 = np.empty(m)
    for k in range(len(order)):
        o = order[k]
        nc = rules_candidates(I, R, o, cand)
        if follow is not None and follow[o] >= 0:
            nc = _keep_device(cand, nc, S.placement[follow[o]])
        _ready_all(I, S, L, o, cand, nc, ready, harm)
        best_i, best_f, best_s, second = -1, np.inf, 0.0, np.inf
        for i in range(nc):
            d = cand[i]
            s = est_at(I, S, o, d, ready[i], insertion)
            f = s + I.dur[o, d]
            if harm is not None:
                f += harm[i]
                if look:
                    f += look * split_cost(I, S, o, d)
            if f < best_f:
                best_i, best_f, best_s, second = i, f, s, best_f
            elif f < second:
                second = f
        d = cand[best_i]
        if trace is not None:
            r0 = S.cnt[RETIMED]
            for dd in range(m):
                free0[dd] = device_free(S, dd)
        _commit_at(I, S, L, o, d, ready[best_i], best_s, insertion)
        if trace is not None:
            trace[k, 0] = S.cnt[RETIMED] - r0
            trace[k, 1] = second - best_f
            trace[k, 2] = 0.0
            for dd in range(m):
                if dd != d and device_free(S, dd) - free0[dd] > trace[k, 2]:
                    trace[k, 2] = device_free(S, dd) - free0[dd]
        rules_assign(I, R, o, d)


@njit
def _keep_device(cand, nc, d):
    """``cand[:nc]`` narrowed to ``d`` when ``d`` is among them (``heuristics.heft.coplaced``); its new count."""
    for i in range(nc):
        if cand[i] == d:
            cand[0] = d
            return 1
    return nc


@njit
def critical_path(rank, tp, pred_ptr, succ_ptr, succ_edge, edst):
    """heuristics.fastt.critical_path: the entry op of largest rank, then the successor of largest rank
    (ties: topological position)."""
    n = len(rank)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    o = -1
    for x in range(n):
        if pred_ptr[x + 1] == pred_ptr[x] and (o < 0 or _before(rank, tp, x, o)):
            o = x
    path = [o]
    while succ_ptr[o + 1] > succ_ptr[o]:
        b = -1
        for k in range(succ_ptr[o], succ_ptr[o + 1]):
            x = edst[succ_edge[k]]
            if b < 0 or _before(rank, tp, x, b):
                b = x
        o = b
        path.append(o)
    return np.array(path, dtype=np.int64)


@njit(borrow=True)
def _choose_cp_device(I, R, path, i, mark, stamp):
    """heuristics.fastt._choose_cp_device; ``mark``/``stamp`` replace its per-device set of groups."""
    best_avg, best_cnt, best_d = np.inf, 0, -1
    m = len(I.capacity)
    for d in range(m):
        if not rules_fits(I, R, path[i], d):
            continue
        stamp += 1
        used = R.used[d]
        cap = I.capacity[d]
        total, count = 0.0, 0
        for j in range(i, len(path)):
            p = path[j]
            if R.placed[p]:
                continue
            f = rules_forced(I, R, p)
            if f >= 0 and f != d:
                continue
            g = I.group_of[p]
            if g >= 0:
                need = 0 if (R.group_dev[g] >= 0 or mark[g] == stamp) else R.group_mem[g]
            else:
                need = I.mem[p]
            if used + need > cap:
                break
            used += need
            if g >= 0:
                mark[g] = stamp
            total += I.dur[p, d]
            count += 1
        if count == 0:
            continue
        avg = total / count
        # key (avg, -count, d): d increases, so only a smaller avg or a larger count wins
        if best_d < 0 or avg < best_avg or (avg == best_avg and count > best_cnt):
            best_avg, best_cnt, best_d = avg, count, d
    return best_d, stamp


@njit(borrow=True)
def dpos_rest_device(I, S, R, o, cand):
    """The device of an op DPOS places after its time limit (``heuristics.fastt.dpos_rest_device``): of
    ``Rules.choose_or_fallback(o)``, the first predecessor's device when it is one of them, else the first."""
    nc = rules_candidates(I, R, o, cand)
    if I.pred_ptr[o] < I.pred_ptr[o + 1]:
        d = S.placement[I.esrc[I.pred_edge[I.pred_ptr[o]]]]
        for i in range(nc):
            if cand[i] == d:
                return d
    return cand[0]


@njit
def dpos_loop(I, S, R, order, path, insertion, use_cp, cp_one_device, stop, L=None):
    """DPOS's loop (heuristics.fastt._dpos_schedule, parallel comm); returns (the critical-path devices
    used, in order; how many ops of ``order`` DPOS's rule placed). ``stop[0]``: that many at most (a timer
    lowers it at the time limit: the kernel runs without the GIL); the ops after it go, in order, to
    :func:`dpos_rest_device`: placed, not timed (``S.placement`` only: no commit, whose re-timing in
    sequential comm costs as much as DPOS's own ops); the caller appends them to their devices' orders."""
    cp_pos = np.full(I.dur.shape[0], -1, dtype=np.int64)
    if use_cp:
        for i in range(len(path)):
            cp_pos[path[i]] = i
    mark = np.zeros(len(R.group_dev), dtype=np.int64)
    stamp = 0
    cand = np.empty(len(I.capacity), dtype=np.int64)
    ready = np.empty(len(I.capacity))
    cp_dev = -1
    cp_devs = [-1]
    cp_devs.pop()
    placed = len(order)
    for k in range(len(order)):
        o = order[k]
        if k >= stop[0]:  # the time limit: the rest appended, each on its rest device
            placed = min(placed, k)
            d = dpos_rest_device(I, S, R, o, cand)
            S.placement[o] = d  # untimed: the Result is simulated
            rules_assign(I, R, o, d)
            continue
        d = -1
        if cp_pos[o] >= 0:
            f = rules_forced(I, R, o)
            if f >= 0:
                d = f
            elif cp_dev >= 0 and (cp_one_device or rules_fits(I, R, o, cp_dev)):
                d = cp_dev
            else:
                nd, stamp = _choose_cp_device(I, R, path, cp_pos[o], mark, stamp)
                if nd >= 0:
                    cp_dev = d = nd
                    cp_devs.append(nd)
        if d < 0:
            best_i, best_f, best_s = -1, np.inf, 0.0
            nc = rules_candidates(I, R, o, cand)
            _ready_all(I, S, L, o, cand, nc, ready)
            for i in range(nc):
                c = cand[i]
                st = est_at(I, S, o, c, ready[i], insertion)
                ft = st + I.dur[o, c]
                if ft < best_f:
                    best_i, best_f, best_s = i, ft, st
            d = cand[best_i]
            _commit_at(I, S, L, o, d, ready[best_i], best_s, insertion)
        else:
            _commit(I, S, L, o, d, insertion)
        rules_assign(I, R, o, d)
    return np.array(cp_devs, dtype=np.int64), placed


@njit
def _ties_by_topo(order, rank, tp):
    """Within each run of equal ranks in ``order``, the ops by topological position; then whether the
    result is a topological order (every edge forward)."""
    n = len(order)
    i = 0
    while i < n:
        j = i + 1
        while j < n and rank[order[j]] == rank[order[i]]:
            j += 1
        if j - i > 1:
            run = order[i:j].copy()
            keys = np.empty(j - i, dtype=np.int64)
            for k in range(j - i):
                keys[k] = tp[run[k]]
            srt = np.argsort(keys)
            for k in range(j - i):
                order[i + k] = run[srt[k]]
        i = j


@njit
def _is_topological(order, esrc, edst):
    pos = np.empty(len(order), dtype=np.int64)
    for i in range(len(order)):
        pos[order[i]] = i
    for e in range(len(esrc)):
        if pos[esrc[e]] >= pos[edst[e]]:
            return False
    return True


def rank_order(rank, a):
    """:func:`priority_order` by one sort: decreasing rank, ties by topological position. Both take the
    same ops in the same order whenever that sorted order is topological (then the op it puts next
    always is ready, and no ready op comes before it): checked, else Kahn's algorithm runs. An upward
    rank with costs >= 0 never decreases along an edge, so the sort is the usual case."""
    if len(rank) == len(a.topo_pos) and np.isfinite(rank).all():
        order = np.argsort(-rank, kind="stable")
        _ties_by_topo(order, rank, a.topo_pos)
        if _is_topological(order, a.esrc, a.edst):
            return order
    return priority_order(rank, a.topo_pos, a.pred_ptr, a.succ_ptr, a.succ_edge, a.edst)


def _prepare(inst, op_cost: str, comm_cost: str):
    from . import inst_arrays
    from .levels import upward_rank
    from .rules import new_rules
    from .state import inst_tuple, new_state

    a = inst_arrays(inst)
    rank = upward_rank(a, op_cost, comm_cost)
    order = rank_order(rank, a)
    I = inst_tuple(a)
    L = sq.set_link_policy(sq.new_links(a.n, a.m), a.n) if a.sequential else None
    return a, rank, order, I, new_state(a.n, a.m), new_rules(I, a.n, a.m), L


def run_heft(inst, insertion: bool = True, link_aware: bool = False, lookahead: float = 0.0, coplace: bool = False):
    """HEFT on ``inst``: an :class:`~dplace.kernels.state.ArrayState`; ``link_aware`` (sequential comm):
    ``heft_links``'s test with split-cost weight ``lookahead``, each backward op on its forward op's
    device where it may go (``coplace``)."""
    from ..instance.columns import forward_of_index
    from .state import ArrayState

    _, _, order, I, S, R, L = _prepare(inst, "mean", "mean")
    if link_aware and L is not None and coplace:
        follow = np.ascontiguousarray(forward_of_index(inst), dtype=np.int64)
        heft_loop(I, S, R, order, insertion, L, np.zeros(len(I.capacity)), float(lookahead), follow)
    elif link_aware and L is not None:
        heft_loop(I, S, R, order, insertion, L, np.zeros(len(I.capacity)), float(lookahead))
    else:
        heft_loop(I, S, R, order, insertion, L)
    return ArrayState(I, S)


def run_dpos(inst, insertion: bool, use_cp: bool, cp_one_device: bool, stop: np.ndarray | None = None):
    """DPOS on ``inst``: (ArrayState, critical path, critical-path devices used, ops placed by DPOS's rule).
    ``stop``: :func:`dpos_loop`'s (an int64 array of one; the caller's timer may lower it while it runs)."""
    from .state import ArrayState

    a, rank, order, I, S, R, L = _prepare(inst, "max", "max")
    path = (critical_path(rank, a.topo_pos, a.pred_ptr, a.succ_ptr, a.succ_edge, a.edst) if use_cp
            else np.empty(0, dtype=np.int64))
    if stop is None:
        stop = np.full(1, a.n, dtype=np.int64)
    cp_devs, placed = dpos_loop(I, S, R, order, path, insertion, use_cp, cp_one_device, stop, L)
    return ArrayState(I, S), path.tolist(), cp_devs.tolist(), int(placed)
