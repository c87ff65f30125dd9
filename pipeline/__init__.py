"""Pipelined model parallelism on chains of layers (``dplace.pipeline``).

Source: Beaumont, Eyraud-Dubois, Shilova, "Pipelined Model Parallelism: Complexity Results and
Memory Considerations" (Euro-Par 2021): model and NCA §3, 1F1B* §5.1 (Alg. 1, Thm. 3), k-periodic
patterns §5.2 (Thm. 4), contiguous vs general allocations §6 (Thm. 5, Lemma 2, Thm. 6).

This is a different problem from DAG placement (the objective is the period of a steady-state
pipeline, not one step's makespan), so nothing here is registered with :mod:`dplace.registry`.

Modules, in the order data flows:

- :mod:`.chain` the ``dplace-chain/1`` format; :mod:`.convert` PipeDream profiles and instances into chains
- :mod:`.pattern` k-periodic patterns, the validator, communication layers, the packed pattern
- :mod:`.star` 1F1B* (Algorithm 1)
- :mod:`.bounds` proven lower bounds on T/k; :mod:`.solution` the answer and its claim
- :mod:`.dp` the exact contiguous DP; :mod:`.cpsat` CP-SAT allocation models (contiguous, general)
- :mod:`.kperiodic` Theorem 4's patterns and the search over k; :mod:`.solve` the one entry point
- :mod:`.paper` the theorems' chains; :mod:`.draw` text and matplotlib drawings; :mod:`.cli` ``dplace pipeline``
"""
from .bounds import contiguous_lower_bound, general_lower_bound
from .chain import (CHAIN_FORMAT, Chain, Layer, chain_from_dict, chain_to_dict, communication_time, load_chain,
                    make_chain, save_chain)
from .cpsat import contiguous_cpsat, general_cpsat
from .dp import contiguous_dp
from .draw import draw_pattern, save_gantt
from .kperiodic import contiguous_theorem4, k_search, theorem4_pattern
from .paper import theorem4_chain, theorem5_chain, theorem6_chain
from .pattern import (Pattern, PatternOp, PatternReport, expand_communication, k_periodic, nca_from_shifts,
                      packed_pattern, pattern_from_times, single_batch_times, theorem4_nca, validate_pattern)
from .solution import (K_PERIODIC_CONTIGUOUS, K_PERIODIC_GENERAL, ONE_PERIODIC_CONTIGUOUS, SCOPES,
                       PipelineSolution, describe_status)
from .solve import solve_pipeline
from .star import StarPattern, one_f_one_b_star

__all__ = [
    "CHAIN_FORMAT", "Chain", "Layer", "chain_from_dict", "chain_to_dict", "communication_time", "load_chain",
    "make_chain", "save_chain", "chain_from_instance", "chain_from_pipedream",
    "Pattern", "PatternOp", "PatternReport", "expand_communication", "k_periodic", "nca_from_shifts",
    "packed_pattern", "pattern_from_times", "single_batch_times", "theorem4_nca", "validate_pattern",
    "StarPattern", "one_f_one_b_star",
    "K_PERIODIC_CONTIGUOUS", "K_PERIODIC_GENERAL", "ONE_PERIODIC_CONTIGUOUS", "SCOPES", "PipelineSolution",
    "describe_status", "contiguous_lower_bound", "general_lower_bound",
    "contiguous_dp", "contiguous_cpsat", "general_cpsat", "contiguous_theorem4", "k_search", "theorem4_pattern",
    "solve_pipeline", "theorem4_chain", "theorem5_chain", "theorem6_chain", "draw_pattern", "save_gantt",
]


def __getattr__(name: str):  # the converters load on first use, so `python -m dplace.pipeline.convert` runs cleanly
    if name in ("chain_from_instance", "chain_from_pipedream"):
        from . import convert

        return getattr(convert, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
