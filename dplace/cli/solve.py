"""``dplace solve`` (run one method, print and save its result) and ``dplace evaluate`` (re-simulate and
check a saved one)."""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from typing import Any

from ..errors import InvalidInstanceError
from .common import (add_command, add_json_arg, add_picture_args, add_run_args, check_outputs, console, fmt, load,
                     parse_options, print_result, progress_mode, say_interrupted, write_outputs)


def add_solve(subparsers: Any) -> argparse.ArgumentParser:
    s = add_command(subparsers, "solve", cmd_solve, "run one method, print and save its result")
    s.add_argument("--method", required=True, help="a registered method (see: dplace methods)")
    add_run_args(s)
    s.add_argument("--out", metavar="FILE.json",
                   help="write the dplace-result/1 JSON here (parent directories are created); a name ending in "
                   ".npz writes the same result as numpy arrays (evaluate reads either)")
    s.add_argument("-o", "--option", action="append", metavar="KEY=VALUE", help="a method option (repeatable)")
    s.add_argument("--R", type=int, default=None, help="celeritas: fusion exploration range")
    s.add_argument("--M", type=float, default=None, help="celeritas: cluster memory limit (fraction of device memory)")
    s.add_argument("--solver", default=None, help="milp: cbc or highs")
    add_picture_args(s, "the schedule")
    return s


def cmd_solve(args: argparse.Namespace) -> int:
    """Run one method on an instance. The makespan printed is the simulator's (dplace.simulate); a method's own
    objective is shown as 'claimed'; the lower bound is proven. --out, --gantt and --trace are written together
    or not at all (temporary files, renamed; missing parent directories are created; an input file is never
    overwritten). Exit 0: a valid schedule or a proven 'infeasible'; 1: the checker found a problem; 2: an input
    error."""
    from .. import interrupt, progress
    from ..verify.check import check
    from ..registry import solve

    check_outputs(args, "instance")
    inst = load(args.instance)
    opts = parse_options(args)
    with progress.reporting(f"solve {args.method} on {inst.name}", mode=progress_mode(args)):
        progress.phase("running")
        # a method that polls the flag returns its best answer on Ctrl-C; one that does not is stopped by
        # KeyboardInterrupt (main: exit 130, nothing written)
        res = solve(inst, args.method, time_limit_s=args.time_limit, seed=args.seed, **opts)
        with interrupt.polling():  # an answer exists: from here on Ctrl-C only marks it interrupted
            progress.phase("check")
            rep = check(res.instance, res)
            res = replace(res, interrupted=res.interrupted or interrupt.requested())
            progress.phase("write")
            write_outputs(args, res, res.json_chunks({"check": rep.summary()}),  # = to_dict() + check
                          npz_extra={"check": rep.summary()})
    if args.json:
        data = res.to_dict()
        data["check"] = rep.summary()
        print(json.dumps(data))
    else:
        print_result(res, rep, console())
    if res.interrupted:
        say_interrupted(f"{args.method} was cut short; its best answer so far is shown"
                        + (f" and written to {args.out}" if getattr(args, "out", None) else "")
                        + f" (status {res.status}, interrupted: true)")
        return interrupt.EXIT_CODE
    return 0 if rep.ok else 1


def add_evaluate(subparsers: Any) -> argparse.ArgumentParser:
    s = add_command(subparsers, "evaluate", cmd_evaluate, "re-simulate and check a saved result",
                    instance="the dplace-instance/1 JSON file the result was made for")
    s.add_argument("result", help="dplace-result/1 JSON file, or its .npz form (from solve --out)")
    add_json_arg(s, "text")
    add_picture_args(s, "the re-simulated schedule")
    return s


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Re-simulate a saved result on its instance and check it. The file's bound and status are claims: a
    lower_bound above the schedule's makespan, or status optimal with a bound that does not reach the makespan,
    is an error (exit 2). Exit 1 when the file's schedule is invalid or its makespan differs from the
    re-simulation."""
    from ..bounds import lower_bound
    from ..verify.check import check
    from ..errors import InfeasibleError
    from ..instance.io import read_json
    from ..result import result_from_dict

    check_outputs(args, "instance", "result")
    inst = load(args.instance)
    if str(args.result).endswith(".npz"):
        from ..instance.npz import result_dict_from_npz

        data = result_dict_from_npz(args.result)
    else:
        data = read_json(args.result, "result")
    if not isinstance(data, dict):
        raise InvalidInstanceError(f"result {args.result!r}: must be a JSON object")
    res = result_from_dict(inst, data)  # on the rewritten graph when the result has a transform (OS-DPOS)
    target = res.instance
    if data.get("instance") not in (None, target.name):
        raise InvalidInstanceError(
            f"result {args.result!r}: instance {data.get('instance')!r} does not match {target.name!r}")
    # the file's bound and status are claims this command cannot re-prove: show the bound proven here
    recorded_lb = data.get("lower_bound")
    try:
        res = replace(res, lower_bound=lower_bound(target))
    except InfeasibleError:
        res = replace(res, lower_bound=None)
    _check_claims(args.result, data, res)
    rep = check(target, data)  # the file as written: its schedule must be valid
    rep_sim = check(target, res)
    recorded = data.get("makespan")
    agree = recorded is None or res.makespan is None or math.isclose(recorded, res.makespan, rel_tol=1e-9, abs_tol=1e-6)
    out = {"instance": inst.name, "method": res.method, "status": res.status, "makespan": res.makespan,
           "recorded_makespan": recorded, "makespan_agrees": agree, "lower_bound": res.lower_bound,
           "recorded_lower_bound": recorded_lb,
           "gap": res.gap, "memory_ok": res.memory_ok, "check": rep.summary(), "check_resimulated": rep_sim.summary()}
    write_outputs(args, res)
    if args.json:
        print(json.dumps(out))
    else:
        c = console()
        print_result(res, rep_sim, c)
        c.print(f"  recorded makespan {fmt(recorded)} µs — {'agrees' if agree else 'DIFFERS'}; "
                f"file's schedule: {rep.summary()}")
        c.print(f"  recorded lower bound {fmt(recorded_lb)} µs and status {res.status!r}: the file's claims, "
                "not re-proven here")
    return 0 if (rep.ok and rep_sim.ok and agree) else 1


def _check_claims(path: str, data: dict, res) -> None:
    """A saved result's bound and status must be possible for its own (re-simulated) schedule: a proven
    lower bound is never above a valid makespan, and ``optimal`` means the bound reaches the makespan
    (:func:`dplace.verify.claims.refutes`, :func:`dplace.verify.claims.reaches`). A file that breaks either is an input
    error (one line, exit 2)."""
    from ..verify import claims

    mk, lb = res.makespan, data.get("lower_bound")
    if mk is None:
        return
    if lb is not None and not math.isfinite(lb):
        raise InvalidInstanceError(f"result {path!r}: lower_bound must be finite, got {lb!r}")
    if lb is not None and res.memory_ok and claims.refutes(mk, lb):
        raise InvalidInstanceError(
            f"result {path!r}: lower_bound {lb:g} is above the makespan {mk:g} µs of its own schedule "
            "(a proven bound never is)")
    if data.get("status") == "optimal" and (lb is None or not claims.reaches(mk, lb)):
        why = "no lower_bound" if lb is None else f"lower_bound {lb:g}, a gap of {100 * (mk - lb) / mk:.1f} %"
        raise InvalidInstanceError(
            f"result {path!r}: status 'optimal' but {why} to the makespan {mk:g} µs (optimal needs a bound "
            "that reaches the makespan)")
