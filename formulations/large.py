"""The large-graph stage of ``portfolio`` (and ``refine`` on large graphs): a proven bound (segments,
twin stems), every start re-ordered, the segments' schedules stitched, annealing or the twin-part search,
then the group-move LNS (:func:`.lns.improve`) until the deadline.
"""
from __future__ import annotations

import math
from typing import Any

from dplace import progress
from dplace.budget import Budget
from dplace.instance.model import Instance
from dplace.schedule.simulate import simulate
from dplace.verify import claims

from .lns import improve
from .units import placement_order

__all__ = ["LATE_GAIN", "PARALLEL_FIRST", "PRE_ANNEAL", "TWINS_FIRST", "portfolio_large"]

LATE_GAIN = 1e-3  # the annealing goes on (instead of the LNS) while its last quarter gained this much
# sequential comm: this share of the annealing's time anneals the placement in parallel comm first (:func:`_parallel_first`).
# A setting of ours, barely swept (portfolio 60 s, one run each, session 15, load 3.4-4.6): bundled InceptionV3
# converted to sequential comm 0.2: 379,146 µs, 0.4: 367,475-367,601 (two runs), 0.6: 355,259; NASNet-Mobile
# 273,556 / 274,354-274,663 / 275,899; 0 (main before): 423,100-438,892 and 288,138-288,640.
# Session 20, with judge mixed (benchmarks/RESULTS.md, "Which method when: sequential comm"): portfolio 60 s,
# 0.4 / 0.6 alternated three times each, load 2.0-3.9: NASNet-Mobile means 260,178 / 258,547, InceptionV3
# 360,913 / 363,310 (spreads ~9-13k): no gain, so 0.4 stays; 0 is ~40k worse on InceptionV3 (30-s chains).
# Session 32 (NASNet-Mobile, portfolio 60 s, alternated): 0.4 255,121 / 252,078 / 253,196 us, 0.7 251,316 / 253,360 /
# 250,706 / 255,722 / 253,934 / 256,251, 0.85 248,449 / 253,778 / 254,907: no gain shown. In 26 runs the answer
# ended 0.1-8.6k above the parallel-comm makespan this stage reached (244.0-254.4k; correlation 0.71): the sequential
# annealing repairs that placement's link queues and ends near its parallel value, so that value's spread is the
# answers' (benchmarks/RESULTS.md, "Which method when: sequential comm", session 32). Session 33, bundled InceptionV3,
# eight alternated pairs: 0.7 mean 348,927 us, 0.4 351,592 (lower in six; paired spread 6.2k, t = -1.2): not shown.
PARALLEL_FIRST = 0.4
# two tied parts (twin_stems): the twin-stem bound first and the whole graph's segment bound only when the
# stems are not proven (on bundled InceptionV3 the segment bound, 264,037 µs in ~8 s, is below the twin-stem
# bound's ~307k, and ~280k where the stems are unproven; its time goes to the annealing: 33.5 -> 40-43 s in the
# first round). False: the order before (segment bound, then twin stems). Measured (session 20, portfolio 60 s,
# alternated, load 2.4-3.9): parallel mean 352,494 -> 343,265 µs (seven pairs, new lower in six), sequential
# 369,082 -> 359,265 (two pairs); benchmarks/RESULTS.md, "Branchy (NAS-style) graphs".
TWINS_FIRST = True
# Parallel comm, two or more annealing chains: the second begins from the stitched placement
# (:func:`.stitch.stitch`) instead of the best start's, where there is one: two basins instead of one (the chains
# still meet at the best one's best, SYNC). Which start ends best is not told by its makespan, nor steady from run
# to run (benchmarks/bench_starts.py anneal: 30-s runs from the stitched and from dpos's placement came out either
# way round in two measurements), and the stitch itself depends on CP-SAT's choice among the segments' optimal
# schedules. The evidence is the alternated portfolio runs (NASNet-Mobile: lower in 5 of 5 pairs, mean 250,654
# against 253,558 µs; benchmarks/RESULTS.md, "Branchy (NAS-style) graphs", session 21).
STITCH_CHAIN = True
# sequential comm: the parallel-comm annealing of :func:`_parallel_first` runs as the parallel path's does (chains
# synchronised, the second from the stitched placement); False: one unsynchronised annealing from the best start
PAR_FIRST_AS_PARALLEL = True
# sequential comm, off by default: the placements the parallel-comm annealing of :func:`_parallel_first` went
# through (its best, at most every 0.5 s) timed in sequential comm too, and the sequential annealing begun from the
# best of them (off: from that annealing's last best, or the best start). Measured (benchmarks/RESULTS.md, "Which
# method when: sequential comm", session 27, bench_flags.py, portfolio 60 s): Inception-v3 (PipeDream) off 559,232-
# 576,859 us in four runs, on 539,057-576,765 in ten (the same code's spread: 539-577k); NASNet-Mobile off 253,804 /
# 255,894 / 254,294, on 256,215 / 257,383 / 263,160 (a snapshot taken in the last two). No gain shown, so it is off.
PAR_FIRST_SNAPSHOTS = False
# sequential comm: the annealing's chains meet at the best chain's best this many times a round (what
# :data:`.anneal.SYNC` is in parallel comm); 0: never. Off: it helps NASNet-Mobile a little and costs bundled
# InceptionV3 more (session 31, `benchmarks/bench_flags.py F --method portfolio --time-limit 60 --set
# dplace.formulations.large.SEQUENTIAL_SYNC=0 --set dplace.formulations.large.SEQUENTIAL_SYNC=3`, alternated, load
# 0.5-1.9; benchmarks/RESULTS.md, "Which method when: sequential comm"): NASNet-Mobile 0 -> 253,857 / 258,246 /
# 257,115 / 263,465 / 255,209 / 255,589 / 250,226 us (mean 256,215), 3 -> 250,819 / 254,566 / 250,247 / 254,098 /
# 253,615 / 256,104 / 252,766 (mean 253,174); bundled InceptionV3 0 -> 349,616 / 343,550 / 353,698 / 346,294
# (mean 348,290), 3 -> 371,893 / 354,309 / 352,754 / 366,920 (mean 361,469). Tried on NASNet-Mobile with it on, no
# gain shown: 6 meetings (249,418 / 262,633 / 258,767), the second chain at 0.3 instead of 0.1 times the
# temperatures (255,045 / 251,689 / 257,552), anneal.SEQUENTIAL_T (3e-4, 3.3e-5) and (1e-3, 3.3e-5) (253,516 /
# 258,029 / 257,395 and 253,280 / 256,441 / 262,364).
SEQUENTIAL_SYNC = 0
SNAPSHOTS_JUDGED = 40  # at most the newest this many of them
# The start from the cheapest forced cut (one more start, and the annealing's second chain from it, hot, the chains
# not meeting) only on graphs whose work is at most this many times their critical path's: near-chains, where the
# cuts memory forces decide the makespan. `benchmarks/bench_cutstart.py --old 5e272c7` (60 s): ResNeXt-50 (1.07)
# 706,464 -> 661,006 us sequential (three runs), 654,303-660,081 -> 645,720 / 645,720 / 660,081 parallel;
# ResNet-101 (1.06) parallel 427,781 -> 424,674; ResNet-50 (1.10) the same within 1k. Not on branchy graphs,
# where what runs beside the path decides more: on Inception-v3 (PipeDream, 1.64) the cut start was the fastest
# start and the annealing from it ended 2-34k above the old code's in 6 of 6 runs (parallel 557,014 / 552,182 ->
# 591,126 / 566,572; the chain on the bundled InceptionV3, 2.98: 339,502 -> 342,086)
CUTS_SPREAD = 1.25
# parallel comm, up to anneal.MAX_OPS ops: this share of the time left before the annealing goes, after it, to
# CP-SAT on ranges of the critical path with their colocation mates (:func:`.ranges.range_lns`), each step
# RANGE_STEP_S at most; 0: off (the annealing and the group-move LNS as before). Off: no gain shown on NASNet-Mobile
# (`benchmarks/bench_flags.py nas_par.json --method portfolio --time-limit 60 --rounds 3`, alternated, session 28):
# 0.35: 252,781 / 255,049 / 252,187 us against 252,903 / 247,332 / 254,536; 0.12: 251,989 / 249,865 / 251,188
# against 251,744 / 251,350 / 248,688 (the range steps gained 0.3-1.4k us after an annealing that, shorter,
# ended that much higher or more).
RANGE_LNS = 0.0
RANGE_STEP_S = 5.0
# parallel comm, where the annealing applies, two or more cores, off by default: while the proven bounds run
# (CP-SAT with one worker: the other core idles, ~11 of NASNet-Mobile's 60 s), one annealing chain from the best
# heuristic start runs beside them, and its best is one more start ("pre_anneal", :class:`_PreChain`). Measured
# (session 29, `benchmarks/bench_flags.py F --method portfolio --time-limit 60 --set
# dplace.formulations.large.PRE_ANNEAL=False --set ''` with it on then; benchmarks/RESULTS.md, "Which method
# when: branchy graphs"): NASNet-Mobile off 250,539 / 249,600 / 249,154 us, on 250,457 / 247,930 / 249,837;
# bundled InceptionV3 off 338,281 / 346,330, on 343,178 / 338,622; Inception-v3 (PipeDream) off 558,126 /
# 554,256, on 571,824 / 565,476: the annealing from the chain's best stayed near it (575,406 -> 571,824,
# 565,639 -> 565,476), a basin it did not leave. So it is off.
PRE_ANNEAL = False


def portfolio_large(inst: Instance, starts: dict[str, Any], *, budget: Budget, seed: int = 0,
                    bound_share: float = 0.25, twins_share: float = 0.6, anneal_share: float = 0.8, options: dict[str, Any] | None = None,
                    extra: dict[str, Any] | None = None, should_stop=None):
    """The large-graph stage of ``portfolio``: a proven bound and the group-move LNS in the budget.

    ``starts``: heuristic name -> Result (already run). Within ``budget``: the
    segment bound (:func:`dplace.formulations.bounds_segments.segment_bound`, at most ``bound_share`` of what is left;
    on two tied parts that begin with chains the twin-stem bound first, and the segment bound only when its stems
    are not proven: :data:`TWINS_FIRST`),
    the segments' schedules put together (:func:`.stitch.stitch`, start "stitch"), then each start re-ordered by :func:`placement_order` (kept when faster), on graphs of two parts tied by
    colocation the best start's placement searched for ``twins_share`` of what is left by
    :func:`.twins.search` (start "twins") — or, where :func:`.anneal.applies` (both comm modes, up to
    :data:`.anneal.MAX_OPS` ops), annealed for ``anneal_share`` of what is left instead, longer while it still improves (start "anneal";
    on near-chains whose critical path memory cuts, a second chain from the cheapest cut's placement, start "cuts":
    :func:`_cuts_start`) —, then :func:`improve` from the best until the deadline. In parallel comm on two or
    more cores, :data:`PRE_ANNEAL` (off) runs one annealing chain beside the bounds (start "pre_anneal").
    Returns a Result named "portfolio" whose bound names its source;
    ``extra["starts"]`` holds every start's makespan and ``extra["winner"]`` the one the LNS began from."""
    from dplace.bounds import lower_bound_with_source
    from dplace.formulations.bounds_segments import segment_bound
    from dplace.result import Result

    left = budget.left
    extra = dict(extra or {})
    lb, src = lower_bound_with_source(inst)
    best = None  # (makespan, name, placement, order, its simulated schedule)
    tried: dict[str, float] = {}  # every start's makespan (after re-ordering), by name
    stitched: list[int] | None = None  # the stitched placement (a second annealing chain's start)
    pre = _PreChain.begin(inst, starts, budget.share(bound_share), seed, (options or {}).get("workers"),
                          should_stop) if left() > 1.0 and bound_share > 0 else None
    if left() > 1.0 and bound_share > 0:
        from dplace.formulations.bounds_twins import twin_stems

        seg_cache: dict[Any, Any] = {}
        proven_stems = False
        if TWINS_FIRST and twin_stems(inst) is not None:  # two tied parts that begin with chains
            proven_stems, lb, src = _twin_bound(inst, budget, bound_share, should_stop, seg_cache, lb, src, extra)
        sols: list[dict[str, Any]] = []
        if not proven_stems and left() > 1.0:
            progress.phase("segment bound")
            sb = segment_bound(inst, budget=budget.share(bound_share), should_stop=should_stop, solutions=sols,
                               cache=seg_cache)
            extra["segment_bound"] = {"value": sb.value, "segments": sb.n_segments, "proven_optimal": sb.proven_optimal,
                                      "memory_cuts": sb.memory_cuts, "time_s": round(sb.time_s, 3)}
            if sb.best[0] > lb:
                lb, src = sb.best
            if not TWINS_FIRST and twin_stems(inst) is not None and left() > 1.0:
                _, lb, src = _twin_bound(inst, budget, bound_share, should_stop, seg_cache, lb, src, extra)
        elif proven_stems:
            extra["segment_bound"] = {"skipped": "the twin stems are proven (TWINS_FIRST)"}
        progress.update(bound=lb)
        if sols and left() > 1.0 and inst.n <= 20000:  # the segments' schedules put together: one more start
            # (on a 36k-op Transformer it was 1 % worse than heft and cost ~10 s of the budget)
            from .stitch import stitch

            progress.phase("stitch the segments' schedules")
            spl, sod = stitch(inst, sols)
            cands = [(simulate(inst, spl, sod), sod)]
            if left() > 2.0 and inst.n <= 20000:
                alt = placement_order(inst, spl)
                cands.append((simulate(inst, spl, alt), alt))
            ok = [c for c in cands if c[0].memory_ok]
            if ok:
                stitched = list(spl)
                s_best, s_od = min(ok, key=lambda c: c[0].makespan)
                best = (s_best.makespan, "stitch", spl, [list(x) for x in s_od], s_best)
                tried["stitch"] = s_best.makespan
    progress.phase("re-order the starts")
    for name, res in starts.items():
        if should_stop is not None and should_stop() and best is not None:
            break
        if res is None or res.placement is None or not res.memory_ok or res.transform is not None:
            continue
        order = [list(x) for x in (res.order if res.order is not None else res.schedule.order)]
        cands = [(res.makespan, order, res.schedule)]
        if left() > 2.0 and inst.n <= 20000:
            alt = placement_order(inst, res.placement)
            s_alt = simulate(inst, res.placement, alt)
            cands.append((s_alt.makespan, alt, s_alt))
        mk, od, sch = min(cands, key=lambda c: c[0])
        tried[name] = mk
        if best is None or mk < best[0]:
            best = (mk, name, list(res.placement), od, sch)
    if pre is not None:
        best = pre.finish(inst, best, tried, extra)
    if best is None:
        return None
    progress.update(incumbent=best[0])  # each stage below reports its best when it is lower
    from . import anneal

    ranged = RANGE_LNS > 0 and inst.comm == "parallel" and anneal.applies(inst) and anneal_share > 0
    reserve = RANGE_LNS * left() if ranged else 0.0
    if anneal.applies(inst) and anneal_share > 0:
        cuts = None
        if left() > 3.0 and not (should_stop is not None and should_stop()):
            best, cuts = _cuts_start(inst, best, tried)
        if left() > 3.0 and not (should_stop is not None and should_stop()):
            best = _anneal_start(inst, best, tried, budget.child(reserve=reserve), anneal_share, seed,
                                 (options or {}).get("workers"), should_stop, extra, stitched=stitched, cuts=cuts)
        if ranged and left() > 2.0 and not (should_stop is not None and should_stop()):
            best = _range_start(inst, best, tried, budget.child(reserve), seed,
                                (options or {}).get("workers"), lb, should_stop, extra)
    elif inst.n <= 20000 and left() > 2.0 and not (should_stop is not None and should_stop()):
        best = _twins_start(inst, best, tried, budget, twins_share, seed, should_stop)
    extra.update(winner=best[1], start_makespan=best[0], starts=tried)
    progress.update(incumbent=best[0])
    pl, od, st = improve(inst, best[2], best[3], budget=budget.child(reserve=0.2), seed=seed,
                         should_stop=should_stop, target=lb, schedule=best[4])
    extra["lns"] = {"moves_tried": st.moves_tried, "moves_kept": st.moves_kept, "repairs": st.repairs, "kicks": st.kicks,
                    "start_makespan": st.start_makespan, "makespan": st.makespan, "wall_s": round(st.wall_s, 3)}
    extra.update(lns_stopped=st.stopped, lns_steps=st.iterations, lns_improvements=st.moves_kept,
                 stage="lns" if st.makespan < best[0] else "start")
    sch = st.schedule  # the LNS's own simulated schedule of (pl, od)
    if (inst.comm == "sequential" and anneal.applies(inst) and left() > 0.15
            and not (should_stop is not None and should_stop())):
        # the answer's placement in its own list orders (the LNS re-orders only a kept move, and only while
        # 10 simulations' time is left): kept when faster. Up to 5,000 ops (anneal.applies): a list schedule
        # and two simulations, ~0.03 s on NASNet-Mobile's 1,842 ops, inside the 0.2 s the LNS leaves
        pl, od, sch = _final_orders(inst, pl, od, sch, extra)
        progress.update(incumbent=sch.makespan)
    res = Result(instance=inst, method="portfolio", status="feasible", placement=list(pl), order=[list(x) for x in od],
                 schedule=sch, options=dict(options or {}), extra=extra)
    return claims.settle(res, [claims.Bound(lb, src)])


def _annealed_order(inst: Instance, pl: list[int]) -> tuple:
    """(simulated schedule, order) of an annealed placement: the faster of :func:`placement_order` and the order
    the annealing judged it by (:func:`.anneal.judged_order`: zero-time ops where its kernel put them, no
    insertion in sequential comm)."""
    from .anneal import judged_order

    return min(((simulate(inst, pl, o), o) for o in (placement_order(inst, pl), judged_order(inst, pl))),
               key=lambda c: c[0].makespan)


class _PreChain:
    """One annealing chain (:func:`.anneal.anneal_placement`, one worker) in a thread, from the best heuristic
    start, while the bounds run: :data:`PRE_ANNEAL`. Stopped by :meth:`finish` (or its budget, the bounds'
    share), whose best placement becomes the start "pre_anneal"."""

    def __init__(self, inst: Instance, placement: list[int], budget: Budget, seed: int, should_stop) -> None:
        import threading

        self.done = threading.Event()
        self.out: tuple | None = None
        self.error: BaseException | None = None

        def stop() -> bool:
            return self.done.is_set() or (should_stop is not None and should_stop())

        def run() -> None:
            from .anneal import anneal_placement

            try:
                self.out = anneal_placement(inst, placement, budget=budget, seed=seed + 7, workers=1,
                                            should_stop=stop)
            except BaseException as exc:  # noqa: BLE001 — handed to the caller's thread by finish()
                self.error = exc

        self.thread = threading.Thread(target=run, name="dplace-pre-anneal", daemon=True)
        self.thread.start()

    @classmethod
    def begin(cls, inst: Instance, starts: dict[str, Any], budget: Budget, seed: int, workers: int | None,
              should_stop) -> "_PreChain | None":
        """A chain from the fastest memory-feasible start, or None where it does not apply (sequential comm, the
        annealing not applicable or its kernel not compiled yet, one core, :data:`PRE_ANNEAL` off)."""
        import os

        from . import anneal

        cores = workers or os.cpu_count() or 1
        if not PRE_ANNEAL or inst.comm != "parallel" or cores < 2 or not anneal.applies(inst) \
                or not anneal.kernel_ready():
            return None
        ok = [r for r in starts.values() if r is not None and r.placement is not None and r.memory_ok
              and r.transform is None]
        if not ok:
            return None
        first = min(ok, key=lambda r: r.makespan)
        return cls(inst, list(first.placement), budget, seed, should_stop)

    def finish(self, inst: Instance, best: tuple | None, tried: dict[str, float],
               extra: dict[str, Any]) -> tuple | None:
        """Stops the chain; its best placement, ordered as :func:`_anneal_start` orders the annealing's, is the
        start "pre_anneal" (``tried``, ``extra["pre_anneal"]``), the new best when it is faster."""
        self.done.set()
        self.thread.join()
        if self.error is not None:
            raise self.error
        if self.out is None:
            return best
        pl, st = self.out
        extra["pre_anneal"] = {"start_makespan": st.start_makespan, "makespan": st.makespan, "steps": st.steps,
                               "wall_s": round(st.wall_s, 3), "stopped": st.stopped}
        sch, od = _annealed_order(inst, pl)
        if not sch.memory_ok:
            return best
        tried["pre_anneal"] = sch.makespan
        if best is None or sch.makespan < best[0]:
            return (sch.makespan, "pre_anneal", list(pl), [list(x) for x in od], sch)
        return best


def _range_start(inst: Instance, best: tuple, tried: dict[str, float], budget: Budget, seed: int,
                 workers: int | None, lb: float, should_stop, extra: dict[str, Any]) -> tuple:
    """The best start improved by :func:`.ranges.range_lns` within ``budget`` (``extra["ranges"]``); the new
    best start when it is faster (recorded as "ranges" in ``tried``)."""
    import os

    from .ranges import range_lns

    progress.phase("ranges of the critical path by CP-SAT")
    k = max(1, min(8, workers or os.cpu_count() or 1))
    pl, od, sch, st = range_lns(inst, best[2], best[3], budget=budget, step_s=RANGE_STEP_S, workers=k, seed=seed,
                                lower_bound=lb, should_stop=should_stop, schedule=best[4])
    extra["ranges"] = {"ranges": st.ranges, "steps": st.steps, "kept": st.kept, "start_makespan": st.start_makespan,
                       "makespan": st.makespan, "wall_s": round(st.wall_s, 3), "stopped": st.stopped,
                       "gains": [[a, b, round(g, 3)] for a, b, g in st.gains]}
    if sch.memory_ok:
        tried["ranges"] = sch.makespan
        if sch.makespan < best[0]:
            return (sch.makespan, "ranges", pl, od, sch)
    return best


def _twin_bound(inst: Instance, budget: Budget, bound_share: float, should_stop, seg_cache: dict, lb: float, src: str,
                extra: dict[str, Any]) -> tuple[bool, float, str]:
    """The twin-stem bound (:func:`dplace.formulations.bounds_twins.twin_stem_bound`, ``bound_share`` of the
    time left) into ``extra["twin_stem_bound"]``; returns (its stems proven optimal, the bound, its source)."""
    from dplace.formulations.bounds_twins import twin_stem_bound

    progress.phase("twin-stem bound")
    tb = twin_stem_bound(inst, budget=budget.share(bound_share), should_stop=should_stop, cache=seg_cache)
    if tb is None:
        return False, lb, src
    extra["twin_stem_bound"] = {"value": tb.value, "stem": tb.stem, "rests": list(tb.rest_bounds),
                                "stems_optimal": tb.optimal, "time_s": round(tb.time_s, 3)}
    if tb.value > lb:
        lb, src = tb.value, "twin_stems"
    return bool(tb.optimal), lb, src


def _final_orders(inst: Instance, pl: list[int], od, sch, extra: dict[str, Any]) -> tuple:
    """Sequential comm: (placement, order, schedule) of the answer, its order replaced by
    ``placement_order``'s or judge LINKS's (:func:`dplace.kernels.anneal.seq_links`: the best of MIXED's
    two orders and the links-aware list schedule's) when one simulates
    faster (``extra["final_order"]``: which, and the makespans)."""
    from dplace.kernels.anneal import seq_links

    got = {"lns": sch.makespan}
    best = (sch, od, "lns")
    for name, alt in (("placement_order", placement_order(inst, pl)), ("links", seq_links(inst, pl)[1])):
        s = simulate(inst, pl, alt)
        got[name] = s.makespan
        if s.memory_ok and s.makespan < best[0].makespan * (1 - 1e-12):
            best = (s, alt, name)
    extra["final_order"] = {"kept": best[2], "makespans": got}
    return pl, [list(x) for x in best[1]], best[0]


def _cuts_start(inst: Instance, best: tuple, tried: dict[str, float]) -> tuple[tuple, list[int] | None]:
    """On graphs whose work is at most :data:`CUTS_SPREAD` times their critical path's: the placement of the
    critical path's cheapest forced cut (:func:`.cutstart.cut_start`; None where memory forces no cut that costs
    :data:`.cutstart.MIN_SHARE` of the path), timed by :func:`placement_order` as one more start ("cuts" in
    ``tried``; the best start when it is faster). Returns the best start and that placement (None: none), which
    the annealing searches on a chain of its own (:func:`_anneal_start`)."""
    from .cutstart import cut_start

    if _spread(inst) > CUTS_SPREAD:
        return best, None
    pl = cut_start(inst)
    if pl is None:
        return best, None
    od = placement_order(inst, pl)
    sch = simulate(inst, pl, od)
    if not sch.memory_ok:  # pragma: no cover - cut_start places within every device's memory
        return best, None
    tried["cuts"] = sch.makespan
    if sch.makespan < best[0]:
        best = (sch.makespan, "cuts", pl, od, sch)
    return best, pl


def _spread(inst: Instance) -> float:
    """The ops' smallest times in all over the critical path's: 1 for a chain, NASNet-Mobile's 3.3."""
    from dplace.bounds import critical_path_length

    on = critical_path_length(inst)
    return sum(min(row) for row in inst.dur) / on if on > 0 else math.inf


def _anneal_start(inst: Instance, best: tuple, tried: dict[str, float], budget: Budget, share: float, seed: int,
                  workers: int | None, should_stop, extra: dict[str, Any],
                  stitched: list[int] | None = None, cuts: list[int] | None = None) -> tuple:
    """The best start's placement improved by :func:`.anneal.anneal_placement` for ``share`` of the time
    left (chains: ``workers``, default the CPU count, at most 4) and, while a run's best still fell by
    :data:`LATE_GAIN` of its start in its last quarter, again from its best at the comm mode's cold
    temperature for ``share`` of what is left then (``extra["anneal"]["more"]``: those runs); ordered by
    :func:`placement_order` or the annealing's own order; the new best start when it is faster (recorded
    as "anneal" in ``tried``). The chains meet at the best chain's best :data:`.anneal.SYNC` times a round in parallel
    comm, :data:`SEQUENTIAL_SYNC` times in sequential comm (``extra["anneal"]["syncs"]``). On NASNet-Mobile the LNS
    after the annealing gained nothing in 10 s while
    the annealing was still improving (benchmarks/RESULTS.md, "Branchy (NAS-style) graphs")."""
    import os

    from .anneal import SYNC, anneal_placement, kernel_ready, temperatures

    if not kernel_ready() and share * budget.left() < 30.0:  # compiling it would take most of the time
        extra["anneal"] = {"skipped": "the annealing kernel is not compiled yet (~10 s) and less than 30 s is left"}
        return best
    k = max(1, min(4, workers or os.cpu_count() or 1))
    start = best[2]
    if inst.comm == "sequential" and PARALLEL_FIRST > 0:
        start, best = _parallel_first(inst, best, tried, budget.share(share * PARALLEL_FIRST).child(reserve=0.5), seed, k,
                                      should_stop, extra, stitched)
    progress.phase("anneal: placements judged by their list schedules")
    sync = SYNC if inst.comm == "parallel" else SEQUENTIAL_SYNC
    # parallel comm: the second chain begins from the stitched placement when it is not the best start
    # (STITCH_CHAIN): the segments' exact pieces are another basin than the list schedulers' placements
    others = _second_starts(stitched, start, k) if inst.comm == "parallel" else []
    hot = False
    if cuts is not None and k > 1 and list(cuts) != list(start):
        # memory shapes the path: the second chain searches the cheapest forced cut's placement as hot as the
        # best start's, and the chains do not meet (the best start's chain leads at first and would pull it back)
        others, hot, sync = [cuts], True, 0
    pl, st = anneal_placement(inst, start, budget=budget.share(share).child(reserve=0.5), seed=seed, workers=k,
                              should_stop=should_stop, sync=sync, others=others, hot_others=hot,
                              incumbent_below=best[0])
    first, rounds = st, []
    # still improving at the end (the best fell by LATE_GAIN of its start in the last quarter): go on
    # from the best at the cold end, for ``share`` of what is left each time, instead of the LNS
    while (st.late_gain >= LATE_GAIN and st.stopped == "time limit" and budget.left() > 2.0
           and not (should_stop is not None and should_stop())):
        progress.phase("anneal: still improving, on at the cold end")
        cold = temperatures(inst)[1]
        pl, st = anneal_placement(inst, pl, budget=budget.share(share).child(reserve=0.5), seed=seed + 1 + len(rounds),
                                  workers=k, t_hi=cold, t_lo=cold, should_stop=should_stop, sync=sync,
                                  incumbent_below=best[0])
        rounds.append({"makespan": st.makespan, "steps": st.steps, "wall_s": round(st.wall_s, 3),
                       "late_gain": round(st.late_gain, 6), "per_chain": [list(c) for c in st.per_chain],
                       "syncs": st.syncs})
    extra["anneal"] = {"start_makespan": first.start_makespan, "stitch_chain": bool(others) and not hot,
                       "cuts_chain": hot, "makespan": st.makespan,
                       "steps": first.steps,
                       "accepted": first.accepted, "chains": first.chains, "wall_s": round(first.wall_s, 3),
                       "stopped": st.stopped, "late_gain": round(first.late_gain, 6), "more": rounds,
                       "per_chain": [list(c) for c in first.per_chain],  # (best, steps) of each chain, hottest first
                       "syncs": first.syncs}
    sch, od = _annealed_order(inst, pl)
    if sch.memory_ok:
        tried["anneal"] = sch.makespan
        if sch.makespan < best[0]:
            return (sch.makespan, "anneal", pl, od, sch)
    return best


def _second_starts(stitched: list[int] | None, start, chains: int) -> list[list[int]]:
    """``anneal_placement``'s ``others`` in parallel comm: the stitched placement for the second of ``chains``
    chains when there is one, it differs from ``start`` and :data:`STITCH_CHAIN` is on; else none."""
    if STITCH_CHAIN and stitched is not None and chains > 1 and list(stitched) != list(start):
        return [stitched]
    return []


def _parallel_first(inst: Instance, best: tuple, tried: dict[str, float], budget: Budget, seed: int, workers: int,
                    should_stop, extra: dict[str, Any], stitched: list[int] | None = None) -> tuple[list[int], tuple]:
    """Sequential comm: the best start's placement annealed in *parallel* comm (the same instance with
    ``comm="parallel"``, at that mode's temperatures) within ``budget``. Returns the placement the sequential
    annealing should begin from (that one or the best start's, whichever the sequential annealing judges
    faster: :func:`.anneal.judged_order` simulated in sequential comm) and the best start, which its
    sequential simulation replaces when faster (one more start, "anneal_parallel" in ``tried``). Why: on InceptionV3 the sequential
    annealing from m_etf's placement (judged 736,499 µs by its rank order) ended at 423,838 in 60 s, while the
    parallel-comm answer's placement (340,354 µs there) simulates to 396,736 in sequential comm and the
    sequential annealing from it reached 363,660 in 20 s (benchmarks/RESULTS.md, "Which method when: sequential
    comm"). The parallel-comm annealing is the parallel path's (:data:`PAR_FIRST_AS_PARALLEL`): its chains meet at
    the best chain's best :data:`.anneal.SYNC` times a round, and the second chain begins from the ``stitched``
    placement (:data:`STITCH_CHAIN`) when it is not the best start."""
    from .anneal import SYNC, anneal_placement, judged_order

    progress.phase("anneal: placements judged in parallel comm first")
    par = inst.replace(comm="parallel")
    sync, others = 0, []
    if PAR_FIRST_AS_PARALLEL:
        sync = SYNC
        others = _second_starts(stitched, best[2], workers)
    snaps: list[tuple[float, float, list[int]]] | None = [] if PAR_FIRST_SNAPSHOTS else None
    ppl, pst = anneal_placement(par, best[2], budget=budget, seed=seed, workers=workers, should_stop=should_stop,
                                sync=sync, others=others, snapshots=snaps)
    judged = {name: simulate(inst, p, judged_order(inst, p)) for name, p in (("start", best[2]), ("parallel", ppl))}
    extra_snaps = None
    if snaps:  # the placements it went through, newest first, judged in sequential comm (at most 1 s, 5 % of
        # the stage): the best of them may begin the sequential annealing
        judging = Budget(1.0 if budget.limit_s is None else min(1.0, 0.05 * budget.limit_s))
        seen, n = None, 0
        for _, _, p in reversed(snaps[-SNAPSHOTS_JUDGED:]):
            if n and judging.expired():
                break
            if p == ppl:  # the last best, judged above
                continue
            got = simulate(inst, p, judged_order(inst, p))
            n += 1
            if got.memory_ok and (seen is None or got.makespan < seen[0].makespan):
                seen = (got, p)
        extra_snaps = {"judged": n, "taken": bool(seen and seen[0].makespan < judged["parallel"].makespan)}
        if extra_snaps["taken"]:
            judged["parallel"], ppl = seen
    sch, od = min(((simulate(inst, ppl, o), o) for o in (placement_order(inst, ppl), judged_order(par, ppl),
                                                          judged_order(inst, ppl))), key=lambda c: c[0].makespan)
    extra["anneal_parallel"] = {"parallel_makespan": pst.makespan, "steps": pst.steps, "wall_s": round(pst.wall_s, 3),
                                "stitch_chain": bool(others), "syncs": pst.syncs,
                                "per_chain": [list(c) for c in pst.per_chain],
                                "sequential_makespan": sch.makespan,
                                "judged": {n: j.makespan for n, j in judged.items()}, "snapshots": extra_snaps}
    if sch.memory_ok:
        tried["anneal_parallel"] = sch.makespan
        if sch.makespan < best[0]:
            best = (sch.makespan, "anneal_parallel", ppl, [list(x) for x in od], sch)
            progress.update(incumbent=best[0])
    if judged["parallel"].memory_ok and judged["parallel"].makespan < judged["start"].makespan:
        return ppl, best
    return list(best[2]), best


def _twins_start(inst: Instance, best: tuple, tried: dict[str, float], budget: Budget, share: float, seed: int,
                 should_stop) -> tuple:
    """On graphs of two parts tied by colocation (:func:`.twins.twin_sides`): the best start's placement
    improved by :func:`.twins.search` and ordered by :func:`.twins.schedule` (70 % and 30 % of ``share``
    of the time left); the new best start when it is faster (recorded as "twins" in ``tried``)."""
    from .twins import schedule, search, twin_sides

    sides = twin_sides(inst)
    if sides is None or share <= 0:
        return best
    progress.phase("twins: placement search on the two parts' bound")
    mine = budget.share(share)
    pl, _ = search(inst, best[2], budget=mine.share(0.7), seed=seed, should_stop=should_stop)
    progress.phase("twins: orders for the placement")
    od, sch = schedule(inst, pl, sides, budget=budget.child(None if mine.limit_s is None else 0.3 * mine.limit_s, reserve=1.0),
                       seed=seed,
                       should_stop=should_stop)
    if sch.memory_ok:
        tried["twins"] = sch.makespan
        if sch.makespan < best[0]:
            return (sch.makespan, "twins", pl, [list(x) for x in od], sch)
    return best
