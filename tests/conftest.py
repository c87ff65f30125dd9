import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("DPLACE_PROGRESS", "quiet")  # tests that check progress ask for it explicitly

# CI runs the same examples every time (reproducible failures); locally hypothesis explores new ones.
from hypothesis import settings as _hsettings  # noqa: E402

_hsettings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    _hsettings.load_profile("ci")
