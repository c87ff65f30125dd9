"""A study (``dplace bench``): every (instance, method, repeat) pair with a time limit each, one row per
pair, gaps to the best proven bound. Modules in the order data flows:

- :mod:`~dplace.study.plan`: instance files, method specs, the tasks and what makes a saved row reusable;
- :mod:`~dplace.study.pair`: one pair solved, simulated and checked into a row, wherever it runs;
- executors: :mod:`~dplace.study.local` (a pool of worker processes, or in this process) and
  :mod:`~dplace.study.ray_tasks` (Ray tasks, a local Ray or a cluster);
- :mod:`~dplace.study.run`: :func:`run_bench`, resume, Ctrl-C, progress, then the reports;
- :mod:`~dplace.study.report`: ``results.csv``, ``results.json``, ``report.md`` and the plots, from the rows;
- :mod:`~dplace.study.cli`: the ``dplace bench`` command.

Each pair runs ``dplace.solve`` in a worker with its own time limit and a hard wall limit (the worker is
killed on overrun: a ``timeout`` row). A method that raises, a worker that dies, an instance that cannot
be read by the worker: each is a row with its error, never a crash of the study. Every finished pair is
written atomically as ``OUT/rows/<pair>.json``; re-running with the same ``--out`` skips the pairs whose
row was made with the same settings — method and its options, time limit, seed, instance file (sha256)
and dplace version (:data:`~dplace.study.plan.RESUME_KEY`) — and reruns the others, saying so on stderr.
At the end :mod:`~dplace.study.report` regenerates the reports from the rows of the pairs asked for.

Ctrl-C (or SIGTERM): the pairs running are stopped (local workers killed, Ray tasks cancelled, an
in-process pair's solver stopped through :mod:`dplace.interrupt`) and not recorded — a resumed run reruns
them —, the reports are written from the finished rows and say the study was interrupted; the command
exits with 130. A second Ctrl-C exits at once.

Executors: ``local`` keeps a pool of worker processes (one per core by default; a worker killed on a
timeout is replaced); ``ray`` submits each pair as a Ray task (a local Ray with ``--workers`` CPUs, or
an existing cluster with ``--address``) and cancels it with force on overrun. ``workers=0`` runs the
pairs in this process (no hard limit; for tests and debugging). Local workers write their stdout/stderr
(solver logs) to ``OUT/logs/worker-<i>.log``. On a Ray cluster every node needs dplace installed.

Methods: ``--methods a,b`` (default: every registered method, each left out of instances larger than its
registered ``max_ops``); a spec may carry options, ``heft:insertion=false``, so one study sweeps them.
Definitions of the gaps in :mod:`dplace.study.report`.
"""
from .plan import DEFAULT_TIME_LIMIT_S, RESUME_KEY, load_suite, parse_method_spec, parse_methods, plan
from .report import aggregate, report_markdown, summarize
from .run import EXECUTORS, BenchRun, run_bench

__all__ = ["BenchRun", "DEFAULT_TIME_LIMIT_S", "EXECUTORS", "RESUME_KEY", "aggregate", "load_suite",
           "parse_method_spec", "parse_methods", "plan", "report_markdown", "run_bench", "summarize"]
