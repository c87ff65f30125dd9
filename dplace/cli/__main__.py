"""``python -m dplace.cli``: the ``dplace`` command."""
import sys

from . import main

sys.exit(main())
