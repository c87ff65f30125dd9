"""dplace: device placement and scheduling of ML operator graphs.

Data flows one way: instance -> method -> Result -> simulate/check -> report.
"""
import sys as _sys


class _OrToolsFirst:
    """OR-Tools before highspy: highspy (loaded by PuLP) and OR-Tools ship clashing HiGHS libraries, and
    whichever loads second in a process fails to import (dplace runs HiGHS for MILPs in a child process
    instead). Importing OR-Tools (0.3 s of CPU, with pandas) only when PuLP or highspy is about to be
    imported keeps that order without paying it in runs that use neither (a heuristic's ``solve``)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in ("pulp", "highspy"):
            _sys.meta_path[:] = [f for f in _sys.meta_path if f is not _OrToolsFirst]
            from ortools.sat.python import cp_model  # noqa: F401
        return None


if "pulp" in _sys.modules or "highspy" in _sys.modules:  # too late to order: as before, OR-Tools now
    from ortools.sat.python import cp_model as _cp_model  # noqa: F401,I001
elif _OrToolsFirst not in _sys.meta_path:
    _sys.meta_path.insert(0, _OrToolsFirst)

from .bounds import check_memory_feasible, critical_path_length, lower_bound, lower_bound_parts
from .budget import Budget
from .verify.check import CheckReport, check
from .errors import DplaceError, InfeasibleError, InvalidInstanceError, OptionError, SolverError
from .instance.io import instance_from_dict, instance_to_dict, load_instance, save_instance
from .instance.model import Device, Edge, Instance, Link, Op
from .registry import get_method, method_info, methods, register, solve
from .result import Result, make_result, result_from_dict
from .schedule.simulate import Schedule, simulate
from .schedule.state import ScheduleState

__all__ = [
    "Budget", "CheckReport", "Device", "DplaceError", "Edge", "InfeasibleError", "Instance", "InvalidInstanceError",
    "Link", "Op", "OptionError", "Result", "Schedule", "ScheduleState", "SolverError", "check", "check_memory_feasible",
    "critical_path_length", "get_method", "instance_from_dict", "instance_to_dict", "load_instance",
    "lower_bound", "lower_bound_parts", "make_result", "method_info", "methods", "register",
    "result_from_dict", "save_instance", "simulate", "solve",
]
__version__ = "0.1.0"
