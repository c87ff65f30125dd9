"""``python -m dplace.cli``: the ``dplace`` command."""
from . import run

run()
