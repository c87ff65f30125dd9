import importlib.util
import os
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("DPLACE_PROGRESS", "quiet")  # tests that check progress ask for it explicitly

# CI runs the same examples every time (reproducible failures); locally hypothesis explores new ones.
from hypothesis import settings as _hsettings  # noqa: E402

_hsettings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    _hsettings.load_profile("ci")


import pytest  # noqa: E402


@pytest.fixture
def benchmark_script():
    """``load(name)``: the script ``benchmarks/<name>.py`` as a module (the scripts are not a package)."""
    def load(name: str):
        path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load
