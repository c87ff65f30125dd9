"""``python -m dplace.study ...``: ``dplace bench`` without the main CLI."""
import sys

from .cli import main

sys.exit(main())
