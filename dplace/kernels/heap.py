"""The queues of the compiled schedules: the re-timing heap of both compiled schedule states
(:mod:`dplace.kernels.state`, parallel comm; :mod:`dplace.kernels.seqstate`, sequential), a binary min-heap
of (time, item) pairs in two arrays ``ht`` / ``hx`` of which ``[:size]`` is in use, ordered as Python's tuples
(time, then item), so items pop in the order :mod:`heapq` pops the reference's ``(time, item)`` tuples (each
function returns the new size); and :func:`enqueue` / :func:`release`, the first-in first-out queue of
Kahn's algorithm that replays and completions walk."""
from __future__ import annotations

from . import njit


@njit(borrow=True)
def hpush(ht, hx, size, t, x):
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if ht[p] < t or (ht[p] == t and hx[p] <= x):
            break
        ht[i], hx[i] = ht[p], hx[p]
        i = p
    ht[i], hx[i] = t, x
    return size + 1


@njit(borrow=True)
def sift_down(ht, hx, i, size, t, x):
    """Put (t, x) at slot i of the heap ``[:size]`` and move it down to its place."""
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hx[c + 1] < hx[c])):
            c += 1
        if t < ht[c] or (t == ht[c] and x <= hx[c]):
            break
        ht[i], hx[i] = ht[c], hx[c]
        i = c
    ht[i], hx[i] = t, x


@njit(borrow=True)
def hpop(ht, hx, size):
    """Drop the smallest pair (the caller read it at ``ht[0], hx[0]``)."""
    size -= 1
    sift_down(ht, hx, 0, size, ht[size], hx[size])
    return size


@njit(borrow=True)
def heapify(ht, hx, size):
    """``[:size]`` made a heap (``heapq.heapify``'s result differs in layout only, not in pop order)."""
    for i in range(size // 2 - 1, -1, -1):
        sift_down(ht, hx, i, size, ht[i], hx[i])
    return size


@njit(inline="always")
def enqueue(queue, qn, v):
    """``v`` joins ``queue[:qn]`` at its end; returns the queue's new length."""
    queue[qn] = v
    return qn + 1


@njit(inline="always")
def release(left, v, queue, qn):
    """One more input of ``v`` is done (Kahn's algorithm): ``left[v]`` counts down and, at 0, ``v`` joins
    ``queue[:qn]`` at its end. Returns the queue's new length."""
    return release_as(left, v, v, queue, qn)


@njit(inline="always")
def release_as(left, v, x, queue, qn):
    """``release`` with ``v`` queued as the item ``x`` (e.g. ops as -1 - o beside sends)."""
    left[v] -= 1
    return enqueue(queue, qn, x) if left[v] == 0 else qn
