"""``dplace convert`` (a graph from another format -> a dplace instance) and ``dplace generate`` (a
synthetic instance): rows of the command table in :mod:`dplace.cli`."""
from __future__ import annotations

from typing import Any

from ..errors import InvalidInstanceError
from ..instance.model import COMM_MODES
from . import FORMATS
from .common import convert, write_instance
from .generate import ccr, layered_dag, transformer_training

def _parse_dims(text: str) -> dict[str, int]:
    dims: dict[str, int] = {}
    for item in text.split(","):
        k, sep, v = item.partition("=")
        if not sep or not k.strip() or not v.strip().isdigit() or int(v) < 1:
            raise InvalidInstanceError(f"--split-dims: expected name=N[,name=N], got {text!r}")
        dims[k.strip()] = int(v)
    return dims


def add_convert(subparsers: Any) -> None:
    """``dplace convert FORMAT INPUT --out FILE [--devices N] [--memory BYTES] [--latency] ...``."""
    import argparse

    p = subparsers.add_parser(
        "convert", help="convert a graph from another format to a dplace instance",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert a graph measured or published elsewhere to a dplace-instance/1 file.\n\n"
        "formats:\n"
        "  dnn-partitioning  JSON inputs of msr-fiddle/dnn-partitioning (NeurIPS 2020): operator or layer\n"
        "                    graphs, fpgaLatency read as ms, node/edge size in bytes, colorClass -> colocation\n"
        "  pipedream         PipeDream layer profile (*.graph.txt): forward/backward times in ms, activation\n"
        "                    and parameter sizes in bytes; a forward and a backward op per layer\n"
        "  dot               DOT digraph with a Weight (µs) on every node; edge Weight = transfer time in µs\n"
        "  stg               Standard Task Graph set file (Kasahara): task costs as µs, no communication\n"
        "  instance          a dplace instance (.json or .npz), written in the form --out's suffix names\n\n"
        "The MIT-licensed data of the first two are at github.com/msr-fiddle/dnn-partitioning and\n"
        "github.com/msr-fiddle/pipedream (the files used here are in the repository, instances/sources/ with\n"
        "their licences; instances/README.md lists the commands that made the bundled instances).",
        epilog="example (from the repository root):\n  dplace convert dnn-partitioning "
        "instances/sources/dnn-partitioning/throughput-inputs/OperatorGraphs/bert_L-12_training.json --devices 4 "
        "--memory-fraction 0.35 --out bert.json")
    p.add_argument("format", choices=FORMATS, help="format of INPUT: " + ", ".join(FORMATS) + " (described above)")
    p.add_argument("input", help="the file to convert")
    p.add_argument("--out", required=True, help="output instance JSON (written atomically)")
    p.add_argument("--devices", type=int, default=None, help="device count (default: the file's or 4)")
    p.add_argument("--memory", type=float, default=None, help="bytes per device")
    p.add_argument("--memory-fraction", type=float, default=None,
                   help="bytes per device as a fraction of the total op memory")
    p.add_argument("--latency", type=float, default=None,
                   help="link latency in µs (default 10; 0 for dot and stg)")
    p.add_argument("--bandwidth", type=float, default=None, help="link bandwidth in bytes/µs (default 12000)")
    p.add_argument("--comm", choices=COMM_MODES, default="parallel",
                   help="transfer model: parallel delays or one at a time per link (default parallel)")
    p.add_argument("--name", default=None, help="instance name (default: from the input file's name)")
    p.add_argument("--merge-backward", action="store_true", help="pipedream: one op of F+B per layer")
    p.add_argument("--split-dims", default=None, help="dnn-partitioning: e.g. batch=32 for MatMul/Conv ops")
    p.add_argument("--edge-bytes", type=float, default=None, help="stg: bytes on every edge (default 0)")
    p.add_argument("--compact", action="store_true", help="write minified JSON")
    p.set_defaults(func=_cmd_convert)


def _cmd_convert(args: Any) -> int:
    from ..instance.io import check_outputs

    check_outputs({"--out": args.out}, {"graph": args.input})
    opts: dict[str, Any] = dict(devices=args.devices, memory=args.memory, memory_fraction=args.memory_fraction,
                                comm=args.comm, name=args.name)
    if args.latency is not None:
        opts["latency"] = args.latency
    if args.bandwidth is not None:
        opts["bandwidth"] = args.bandwidth
    if args.merge_backward:
        if args.format != "pipedream":
            raise InvalidInstanceError("--merge-backward applies to the pipedream format only")
        opts["merge_backward"] = True
    if args.split_dims is not None:
        if args.format != "dnn-partitioning":
            raise InvalidInstanceError("--split-dims applies to the dnn-partitioning format only")
        opts["split_dims"] = _parse_dims(args.split_dims)
    if args.edge_bytes is not None:
        if args.format != "stg":
            raise InvalidInstanceError("--edge-bytes applies to the stg format only")
        opts["edge_bytes"] = args.edge_bytes
    inst = convert(args.format, args.input, **opts)
    write_instance(inst, args.out, compact=args.compact)
    total = sum(inst.mem)
    print(f"wrote {args.out}: {inst.n} ops, {inst.n_edges} edges, {inst.m} devices × "
          f"{inst.capacity[0]:,} bytes (total op memory {total:,})")
    return 0


def add_generate(subparsers: Any) -> None:
    """``dplace generate {layered,transformer} --ops N --devices D [--ccr X] [--seed S] --out FILE``."""
    p = subparsers.add_parser("generate", help="generate a synthetic instance (layered DAG or Transformer)")
    p.add_argument("kind", choices=("layered", "transformer"),
                   help="layered: random layered DAG with a target CCR; transformer: a Transformer training step "
                   "(forward, backward, optimizer ops with types and colocated weights)")
    p.add_argument("--ops", type=int, required=True, help="number of ops (about, for transformer)")
    p.add_argument("--devices", type=int, default=4, help="number of identical devices (default 4)")
    p.add_argument("--ccr", type=float, default=None, help="layered only: target CCR (default 1.0)")
    p.add_argument("--layers", type=int, default=None,
                   help="layered: levels (default round(sqrt(ops))); transformer: blocks (default ops // 750)")
    p.add_argument("--memory-fraction", type=float, default=None,
                   help="layered only: device memory as a fraction of total op memory")
    p.add_argument("--memory", type=int, default=None, help="transformer only: bytes per device")
    p.add_argument("--comm", choices=("parallel", "sequential"), default="parallel",
                   help="transfer model: parallel delays or one at a time per link (default parallel)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0): same seed, same file")
    p.add_argument("--name", default=None, help="instance name (default: from the kind and sizes)")
    p.add_argument("--out", required=True, help="output instance JSON (written atomically)")
    p.add_argument("--compact", action="store_true", help="write minified JSON")
    p.set_defaults(func=_cmd_generate)


def _cmd_generate(args: Any) -> int:
    if args.kind == "layered":
        if args.memory is not None:
            raise InvalidInstanceError("--memory applies to transformer; use --memory-fraction for layered")
        inst = layered_dag(args.ops, args.devices, ccr=1.0 if args.ccr is None else args.ccr, layers=args.layers,
                           memory_fraction=args.memory_fraction, comm=args.comm, seed=args.seed, name=args.name)
    else:
        if args.ccr is not None or args.memory_fraction is not None:
            raise InvalidInstanceError("--ccr and --memory-fraction apply to layered only")
        inst = transformer_training(args.ops, args.devices, seed=args.seed, layers=args.layers,
                                    memory_per_device=args.memory, comm=args.comm, name=args.name)
    write_instance(inst, args.out, compact=args.compact)
    print(f"wrote {args.out}: {inst.n} ops, {inst.n_edges} edges, {inst.m} devices, CCR {ccr(inst):.3g}")
    return 0
