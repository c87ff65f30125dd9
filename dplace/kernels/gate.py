"""When the Baechi / Celeritas kernels run: from ``dplace.kernels.LARGE`` ops (even when numba is already
loaded: mid-size graphs keep the reference's timing), and m-ETF / m-SCT's list scheduler from ``LIST_FROM`` ops already:
there the compiled scheduler saves more than importing numba costs (36k-op Transformer: m_etf 3.0 s ->
1.2 s of CPU for the whole method with the import). Small graphs, the exact methods' hints included,
stay on the reference and never wait for numba's import or a first compile.
"""
from __future__ import annotations

from . import enabled

LIST_FROM = 10_000  # ops


def worth(n: int, least: int | None = None) -> bool:
    """True when a kernel should run on ``n`` ops; ``least``: a size from which it runs in any case."""
    from . import LARGE, SMALL

    return n >= max(SMALL, LARGE if least is None else least) and enabled()


def size(inst) -> int:
    """The op count that decides for ``inst``: a graph derived from a larger one (a coarse graph, marked
    ``_from_ops`` by :func:`dplace.heuristics.coarsen.coarsen`) counts as that one, so a 13k-node coarse
    graph of a 360k-op graph runs compiled where numba is already loaded."""
    return max(inst.n, getattr(inst, "_from_ops", 0))
