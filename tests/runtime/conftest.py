"""The runtime tests import TensorFlow at collection: load OR-Tools' pywraplp first, as
``dplace.runtime.zoo._tf`` does (pywraplp loaded after TensorFlow segfaults in Solve, e.g. in
m_sct_capped's LP run by a later test of the same process)."""
try:
    import ortools.linear_solver.pywraplp  # noqa: F401
except ImportError:
    pass
