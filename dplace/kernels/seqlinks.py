"""The link state of the compiled sequential-comm schedule (:mod:`dplace.kernels.seqstate`): each directed
link's sends in send order (the producers' execution order on their device) and ``data_ready``, the
arrival of an op's inputs on a device with the sends it would add or lengthen walked along their links
(``ScheduleState.data_ready`` / ``_link_arrival`` in sequential mode, float for float)."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from . import njit
from .orders import RETIMED

Links = namedtuple("Links", "pos tx_s tx_f tx_b lprev lnext has lk ln need_b plist glist pend heap_t heap_x cnt harm "
                             "dmask stamp pol tleft")

# ``Links.pol``: the link policy (see :func:`frozen`): the ops re-timed after which a commit's sends stop moving
# the sends behind them (-1: never), commits between two replays then, commits since the last replay, the
# number of the commit under way (``stamp`` of a send: the commit that made or lengthened it)
FREEZE_AFTER, REPLAY_EVERY, SINCE_REPLAY, COMMIT_NO = 0, 1, 2, 3


def fits(n: int, m: int) -> bool:
    """Whether the link arrays of an ``n``-op, ``m``-device instance are small enough to allocate
    (the per-link producer lists are ``m * m * n`` int64, touched only where used)."""
    return m * m * (n + 1) <= 1 << 31  # (dplace.schedule.simulate.seq_kernel_wanted asks the same)


def new_links(n: int, m: int) -> Links:
    nk = n * m
    # a send's fields side by side, one 64-byte row each (start, arrival, bytes, lprev, lnext, queued,
    # exists): the re-timing reads them together. All zero at first (np.zeros: pages are touched only
    # where sends are), so "exists" marks a send and lprev / lnext are set when it is made
    raw = np.zeros(nk * 8 + 8, dtype=np.float64)
    off = (-raw.ctypes.data % 64) // 8
    row = raw[off:off + nk * 8].reshape(nk, 8)
    irow = row.view(np.int64)
    return Links(
        pos=np.zeros(n), tx_s=row[:, 0], tx_f=row[:, 1], tx_b=row[:, 2],
        lprev=irow[:, 3], lnext=irow[:, 4], has=irow[:, 6],
        lk=np.empty((m * m, n + 1), dtype=np.int64), ln=np.zeros(m * m, dtype=np.int64),
        need_b=np.full(n, -1.0), plist=np.empty(n + 1, dtype=np.int64),
        glist=np.empty(n + 1, dtype=np.int64), pend=irow[:, 5],
        heap_t=np.empty(nk + n + 2), heap_x=np.empty(nk + n + 2, dtype=np.int64),
        cnt=np.zeros(1, dtype=np.int64), harm=np.zeros(1), dmask=np.zeros(n, dtype=np.int64),
        stamp=irow[:, 7], pol=np.array([-1, 0, 0, 0], dtype=np.int64),
        tleft=np.empty(nk, dtype=np.int64),  # dplace.kernels.state._replay's scratch
    )


def set_link_policy(L: Links, n: int, moves: float | None = None, replays: int | None = None) -> Links:
    """Give ``L`` the list schedulers' link policy for an ``n``-op instance (:data:`dplace.kernels.LINK_MOVES`,
    :data:`dplace.kernels.LINK_REPLAYS` unless given): exact until the commits have re-timed ``moves`` x n ops,
    then frozen links with ``replays`` replays spread over the commits."""
    from . import LINK_MOVES, LINK_REPLAYS

    moves = LINK_MOVES if moves is None else moves
    replays = LINK_REPLAYS if replays is None else replays
    L.pol[FREEZE_AFTER] = -1 if moves < 0 else int(moves * n)
    L.pol[REPLAY_EVERY] = max(1, n // max(1, replays)) if replays > 0 else 0
    L.pol[SINCE_REPLAY] = 0
    return L


@njit(inline="always")
def frozen(S, L):
    """Whether the links are frozen: once the commits have re-timed ``L.pol[FREEZE_AFTER]`` ops (not
    -1), a commit's new or longer sends are timed behind the sends before them, but the sends behind them on their
    links keep their times (the simulator's rule would delay them, and what waits for them: the cascades that make
    exact list scheduling cost ~n^2 on large graphs); the state is replayed exactly every ``REPLAY_EVERY``
    commits and after the last."""
    return L.pol[FREEZE_AFTER] >= 0 and S.cnt[RETIMED] >= L.pol[FREEZE_AFTER]


@njit(inline="always")
def _bisect_pos(L, l, x):
    """bisect_left of label x among link l's producers (by their labels)."""
    lo, hi = 0, L.ln[l]
    while lo < hi:
        mid = (lo + hi) >> 1
        if L.pos[L.lk[l, mid]] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(borrow=True)
def _link_arrival(I, S, L, dp, d, ps, k, has_harm):
    """``ScheduleState._link_arrival``: latest arrival on d of the sends of producers ps[:k] (each
    with need_b bytes) on link (dp, d), walking the link from the first of them. Only sends that move
    are walked one by one; past the last that moves, the walk jumps to the next producer's place (bisect)
    and reads the arrival of the send just before it, which is all the walk would have kept: on HEFT's
    36k-op sequential Transformer 15.8M of its 18.8M steps were such non-moving sends."""
    m = I.lat.shape[0]
    end, pos, lk = S.end, L.pos, L.lk
    lat, bw = I.lat[dp, d], I.bw[dp, d]
    for a in range(1, k):  # by label (insertion sort: a handful of producers)
        x = ps[a]
        b = a - 1
        while b >= 0 and pos[ps[b]] > pos[x]:
            ps[b + 1] = ps[b]
            b -= 1
        ps[b + 1] = x
    l = dp * m + d
    n_l = L.ln[l]
    i = _bisect_pos(L, l, pos[ps[0]])
    prev_f = L.tx_f[lk[l, i - 1] * m + d] if i else 0.0
    moved = False
    out = 0.0
    tx_b, tx_f, harm = L.tx_b, L.tx_f, L.harm
    fz = frozen(S, L)
    for a in range(k + 1):  # a == k: the sends after the last of them, while they move (with has_harm)
        if a < k:
            p = ps[a]
            bound = pos[p]
        elif has_harm:
            bound = np.inf
        else:
            break
        if fz and a < k:  # frozen: the sends in between keep their times
            moved = False
        while moved and i < n_l and pos[lk[l, i]] < bound:  # sends of other producers before p, moved
            q = lk[l, i]
            y = q * m + d
            s = end[q] if end[q] >= prev_f else prev_f
            f = s + lat + tx_b[y] / bw
            moved = f != tx_f[y]
            if f - tx_f[y] > harm[0]:
                harm[0] = f - tx_f[y]
            prev_f = f
            i += 1
        if not moved and a < k:  # the rest keep their times: the one just before p is what counts
            lo, hi = i, n_l
            while lo < hi:
                mid = (lo + hi) >> 1
                if pos[lk[l, mid]] < bound:
                    lo = mid + 1
                else:
                    hi = mid
            if lo > i:
                prev_f = tx_f[lk[l, lo - 1] * m + d]
                i = lo
        if a == k:
            break
        y = p * m + d
        has = L.has[y] != 0
        if has:
            i += 1  # lk[l, i] is p
        b = L.need_b[p]
        if not has or moved or b != tx_b[y]:
            s = end[p] if end[p] >= prev_f else prev_f
            f = s + lat + b / bw
            if has and f - tx_f[y] > harm[0]:
                harm[0] = f - tx_f[y]  # (a send that others wait for: its consumers too)
            moved = True
        else:
            f = tx_f[y]
        prev_f = f
        if f > out:
            out = f
    return out


@njit(borrow=True)
def data_ready(I, S, L, o, d, harm=False):
    """``ScheduleState.data_ready(o, d)`` in sequential mode: inputs on d at the latest arrival, each
    link's sends re-walked where o would add or lengthen one; with ``harm``, ``L.harm[0]`` gets the most
    a committed send would arrive later (the walk goes on past o's sends while they move)."""
    m = I.lat.shape[0]
    L.harm[0] = 0.0
    pl, end = S.placement, S.end
    t = 0.0
    k = 0
    ps, nb = L.plist, L.need_b
    for j in range(I.pred_ptr[o], I.pred_ptr[o + 1]):
        e = I.pred_edge[j]
        p = I.esrc[e]
        dp = pl[p]
        if dp < 0:
            raise ValueError("ScheduleState: a predecessor is not committed")
        if dp == d:
            a = end[p]
            if a > t:
                t = a
            continue
        if nb[p] < 0.0:
            ps[k] = p
            k += 1
        if I.ebytes[e] > nb[p]:
            nb[p] = I.ebytes[e]
    if k:
        gl = L.glist
        for dp in range(m):  # per link (dp, d): the producers o reads over it
            g = 0
            for j in range(k):
                if pl[ps[j]] == dp:
                    gl[g] = ps[j]
                    g += 1
            if g == 0:
                continue
            grows = False
            for j in range(g):
                p = gl[j]
                y = p * m + d
                if not L.has[y] or nb[p] > L.tx_b[y]:
                    grows = True
                else:
                    nb[p] = L.tx_b[y]
            a = 0.0
            if grows:
                a = _link_arrival(I, S, L, dp, d, gl, g, harm)
            else:
                for j in range(g):
                    f = L.tx_f[gl[j] * m + d]
                    if f > a:
                        a = f
            if a > t:
                t = a
        for j in range(k):
            nb[ps[j]] = -1.0
    return t

