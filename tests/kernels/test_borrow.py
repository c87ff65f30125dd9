"""Kernels made with ``njit(borrow=True)`` (numba's ``_nrt=False``: array arguments borrowed, no reference
counts) must allocate nothing, call nothing that allocates, and return no array: numba compiles a borrowing
kernel's callees under its flags (an allocating callee then fails to compile, depending on which kernel a
process compiles first), and an array returned without its reference count would be freed under the caller."""
from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest

pytest.importorskip("numba")

from dplace import kernels  # noqa: E402
from dplace.formats.generate import transformer_training  # noqa: E402

# calls that allocate through numba's runtime
ALLOCATING = {"empty", "zeros", "full", "ones", "array", "arange", "copy", "concatenate", "empty_like",
              "zeros_like", "full_like", "argsort", "sort", "unique", "cumsum", "List", "Dict"}


def _callees(fn):
    """(name, object) of every call in ``fn``'s source that resolves through its module's globals."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    g = fn.__globals__
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name):
            yield f.id, g.get(f.id)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            base = g.get(f.value.id)
            yield f"{f.value.id}.{f.attr}", getattr(base, f.attr, None) if base is not None else None
        elif isinstance(f, ast.Attribute):  # a method of a value: x.copy(), lst.append()
            yield f".{f.attr}", None


def _allocations(dispatcher):
    """The allocating calls reachable from ``dispatcher`` through njit kernels (name paths)."""
    seen, found, stack = set(), [], [(dispatcher, dispatcher.py_func.__name__)]
    while stack:
        d, path = stack.pop()
        if id(d) in seen:
            continue
        seen.add(id(d))
        for name, obj in _callees(d.py_func):
            short = name.rsplit(".", 1)[-1]
            if short in ALLOCATING and (obj is None or getattr(obj, "__module__", "") .startswith("numpy")
                                        or name.startswith(("np.", "."))):
                found.append(f"{path} -> {name}")
            elif hasattr(obj, "py_func"):
                stack.append((obj, f"{path} -> {name}"))
    return found


def test_borrowing_kernels_are_listed():
    import dplace.kernels.lists  # noqa: F401  (imports the state, link and rule kernels)

    names = {d.py_func.__name__ for d in kernels.BORROWING}
    assert {"data_ready", "_link_arrival", "_retime", "_replay", "commit_at", "split_cost"} <= names
    import numba

    pinned = numba.__version__ == kernels.LIGHT_LOAD_NUMBA  # elsewhere they keep numba's counts
    assert all(d.targetoptions.get("_nrt", True) is (not pinned) for d in kernels.BORROWING)


def test_no_borrowing_kernel_reaches_an_allocation():
    import dplace.kernels.lists  # noqa: F401

    bad = [a for d in kernels.BORROWING for a in _allocations(d)]
    assert not bad, bad


def test_the_allocation_finder_finds_them(tmp_path, monkeypatch):
    """It finds an allocation in a kernel (heft_loop: np.empty) and one two calls away (a kernel calling a
    kernel that calls np.zeros), and none in ``_retime``, whose ``_replay`` now borrows its scratch."""
    import importlib

    from dplace.kernels import state
    from dplace.kernels.lists import heft_loop

    assert any(a.endswith("np.empty") for a in _allocations(heft_loop))
    (tmp_path / "borrowcase.py").write_text(
        "import numpy as np\n\n\nclass D:\n    def __init__(self, fn):\n        self.py_func = fn\n\n\n"
        "def f(S):\n    return g(S)\n\n\ndef g(S):\n    return np.zeros(3)\n\n\nf, g = D(f), D(g)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("borrowcase")
    assert _allocations(mod.f) == ["f -> g -> np.zeros"]
    assert state._replay in kernels.BORROWING and not _allocations(state._retime)


FRESH = """
import json
from numba.core import types
from dplace import kernels
from dplace.formats.generate import transformer_training
from dplace.heuristics.heft import heft_schedule
from dplace.kernels.lists import run_dpos
from dplace.kernels.seqstate import ArraySeqState
for comm in ("parallel", "sequential"):
    inst = transformer_training(200, 3, comm=comm, seed=1)
    heft_schedule(inst, True, link_aware=comm == "sequential", lookahead=2.0)
    run_dpos(inst, True, True, True)
st = ArraySeqState(inst)  # m-ETF's and m-SCT's compiled sequential state
for o in sorted(range(inst.n), key=lambda o: inst.topo_pos[o]):
    st.est(o, o % inst.m)
    st.commit(o, o % inst.m)
assert st.makespan > 0

def arrays_in(t):
    return isinstance(t, types.Array) or (isinstance(t, types.BaseTuple) and any(arrays_in(x) for x in t))

print(json.dumps([[d.py_func.__module__ + "." + d.py_func.__name__,
                   [arrays_in(s.return_type) for s in d.nopython_signatures]] for d in kernels.BORROWING]))
"""


def test_borrowing_kernels_compile_fresh_and_return_no_array(tmp_path):
    """From an empty numba cache (numba compiles each borrowing kernel's callees under its flags, so an
    allocation reached from one fails here), HEFT and DPOS in both comm modes and the compiled sequential
    state compile and run, every borrowing kernel is compiled by them, and none returns an array (callers
    loaded from the disk cache carry their callees' code, so only a fresh compile lists the callees'
    signatures). ~40 s of compiling."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), DPLACE_KERNEL="numba")
    out = subprocess.run([sys.executable, "-c", FRESH], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    sigs = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(sigs) >= 28
    assert not [name for name, arr in sigs if not arr], "borrowing kernels this run did not compile"
    assert not [name for name, arr in sigs if any(arr)], "borrowing kernels that return an array"


def test_borrowing_kernels_give_the_reference_schedules(monkeypatch):
    """The compiled HEFT (borrowing kernels inside) equals the pure-Python reference, both comm modes."""
    from dplace.heuristics.heft import heft_schedule

    for comm in ("parallel", "sequential"):
        inst = transformer_training(150, 3, comm=comm, seed=4)
        monkeypatch.setenv("DPLACE_KERNEL", "numba")
        a = heft_schedule(inst, True, link_aware=True, lookahead=10.0)
        monkeypatch.setenv("DPLACE_KERNEL", "python")
        b = heft_schedule(inst, True, link_aware=True, lookahead=10.0)
        assert list(a.placement) == list(b.placement)
        assert np.array_equal(np.asarray(a.start), np.asarray(b.start))
