"""One error hierarchy for the whole project.

Messages name the field and the value, e.g. ``op 'conv1': time must be >= 0, got -3``.
The CLI turns any :class:`DplaceError` into one line on stderr and exit code 2.
"""


class DplaceError(Exception):
    """Base class of every error dplace raises on purpose."""


class InvalidInstanceError(DplaceError, ValueError):
    """The input (instance, result, chain, option) is malformed."""


class InfeasibleError(DplaceError):
    """The problem has no solution (e.g. the ops cannot fit on the devices)."""


class SolverError(DplaceError):
    """A solver failed or returned something unusable."""
