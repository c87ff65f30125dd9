"""Loading compiled kernels in a fresh process: the cached code is read without numba's registry refresh
(:func:`dplace.kernels.light_load`), and a kernel not in the cache still compiles."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("numba")

KERNEL = '''
import numpy as np
from dplace.kernels import njit


@njit
def prefix(x):
    out = np.empty(len(x) + 1)  # an array made by the compiled code: numba's runtime must be set up
    out[0] = 0.0
    for i in range(len(x)):
        out[i + 1] = out[i] + x[i]
    return out
'''

RUN = '''
import json, sys
import numpy as np
import kmod
from numba.core.caching import FunctionCache
out = kmod.prefix(np.arange(5.0)).tolist()
print(json.dumps({"out": out, "hits": sum(kmod.prefix.stats.cache_hits.values()),
                  "light": type(kmod.prefix._cache) is not FunctionCache,
                  "refreshed": "numba.np.linalg" in sys.modules}))
'''


def _run(folder):
    p = subprocess.run([sys.executable, "-c", RUN], cwd=folder, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(folder), "NUMBA_CACHE_DIR": str(folder / "nbcache")})
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def test_a_cached_kernel_loads_without_numbas_registry_refresh(tmp_path):
    """First process: a cache miss, compiled (numba's compiler refreshes its registries itself). Second
    process: the same kernel read from the cache, same result, and numba's registries (``numba.np.linalg``
    among them, imported only by a refresh) never loaded."""
    (tmp_path / "kmod.py").write_text(textwrap.dedent(KERNEL))
    first = _run(tmp_path)
    assert first["out"] == [0.0, 0.0, 1.0, 3.0, 6.0, 10.0] and first["hits"] == 0 and first["light"]
    second = _run(tmp_path)
    assert second["out"] == first["out"]
    assert second["hits"] == 1 and second["light"]
    assert not second["refreshed"]


def test_light_load_leaves_other_numba_versions_to_numba(monkeypatch):
    import numba

    from dplace import kernels

    kernels._light_cache_class.cache_clear()
    monkeypatch.setattr(numba, "__version__", "0.0.1")
    try:
        assert kernels._light_cache_class() is None

        @kernels.njit
        def f(x):
            return x + 1

        assert type(f._cache).__name__ == "FunctionCache" and f(1) == 2
    finally:
        kernels._light_cache_class.cache_clear()



AFTER_WARM = r'''
import os, sys
from dplace.cli.warm import compiled_count
from dplace.formats.generate import transformer_training
from dplace.registry import method_info, methods, solve

rows = []
for comm in ("parallel", "sequential"):
    big = transformer_training(12000, 4, seed=3, comm=comm)  # the sizes where auto picks the kernels
    for m in ("heft", "dpos", "m_etf"):
        solve(big, m, time_limit_s=60)
        rows.append((comm, m, compiled_count()))
os.environ["DPLACE_KERNEL"] = "numba"  # every family at every size, every kernel-using method
mid = transformer_training(800, 3, seed=5)
for m in methods():
    if method_info(m).kind != "exact":
        solve(mid, m, time_limit_s=60)
        rows.append(("numba", m, compiled_count()))
from dplace.formulations.anneal import anneal_placement, kernel_ready
assert kernel_ready()  # portfolio skips its annealing under 30 s while the kernel is not compiled
for comm in ("parallel", "sequential"):
    t = transformer_training(400, 4, seed=9, comm=comm)
    anneal_placement(t, solve(t, "m_topo").placement, time_limit_s=0.5)
    rows.append(("anneal", comm, compiled_count()))
    solve(t, "portfolio", time_limit_s=4)  # its stages: annealing, LNS, final orders
    rows.append(("portfolio", comm, compiled_count()))
print(rows)
print(compiled_count())
'''


@pytest.mark.slow
def test_after_warm_no_solve_compiles_a_kernel(tmp_path):
    """``dplace warm`` (make install runs it) leaves nothing for a solve to compile: in a fresh process the
    heuristics on a 12k-op Transformer (both comm modes, the policy's own choice) and every kernel-using
    method with the compiled path forced, the annealing and ``portfolio`` (both comm modes) compile no kernel
    signature (numba's cache misses: 0)."""
    exe = Path(sys.executable).parent / "dplace"
    warm = subprocess.run([str(exe), "warm"], capture_output=True, text=True, timeout=1800)
    assert warm.returncode == 0, warm.stderr[-2000:]
    p = subprocess.run([sys.executable, "-c", AFTER_WARM], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "DPLACE_PROGRESS": "quiet", "DPLACE_KERNEL": "auto"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split("\n")[-2] == "0", p.stdout


def test_set_mode_is_the_one_writer_of_the_setting(monkeypatch):
    from dplace import kernels

    monkeypatch.setenv("DPLACE_KERNEL", "auto")
    kernels.set_mode("python")
    assert kernels.mode() == "python" and not kernels.enabled()
    kernels.set_mode("numba")
    assert kernels.mode() == "numba"
    with pytest.raises(ValueError, match="numba, python or auto"):
        kernels.set_mode("fast")
