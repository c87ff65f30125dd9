"""The plan of a study: the instance files (validated once, labelled, hashed), the method specs
(``name`` or ``name:key=value`` for an option sweep) and one task per (instance, method, repeat).

A task is a plain dict (it crosses process and Ray boundaries); its ``key`` names the row file, and
:data:`RESUME_KEY` lists what a saved row must share with the task to be reused on resume."""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .. import __version__
from ..errors import InvalidInstanceError
from ..instance.io import instance_from_dict


DEFAULT_TIME_LIMIT_S = 60.0
# what a saved row must share with the planned pair to be reused on resume (the method spec carries its options)
RESUME_KEY = ("method", "time_limit_s", "seed", "instance_sha", "dplace_version")


@dataclass(frozen=True)
class SuiteInstance:
    """One instance file of the study, validated once here; workers get its JSON text."""

    path: str
    label: str  # unique short name used in rows and reports
    group: str  # the folder it was found in (e.g. "small", "real"): reports summarise per group too
    name: str  # the instance's own name
    sha: str  # sha256 of the file's bytes (a changed file is a new instance)
    text: str
    n_ops: int
    n_edges: int
    n_devices: int
    comm: str


def find_instance_files(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """Files as given, and every ``*.json`` under each directory (recursively, sorted)."""
    if not paths:
        raise InvalidInstanceError("instances: give at least one file or directory")
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(q for q in p.rglob("*.json") if q.is_file() and not q.name.startswith("."))
            if not found:
                raise InvalidInstanceError(f"instances: directory {str(p)!r} holds no *.json file")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise InvalidInstanceError(f"instances: {str(p)!r}: no such file or directory")
    seen: dict[Path, Path] = {}
    for f in files:  # the same file twice (e.g. through a link): the first path named wins
        seen.setdefault(f.resolve(), f)
    return list(seen.values())


def _labels(files: Sequence[Path]) -> list[str]:
    """Short unique labels: the file stem, prefixed by parent folders only where stems collide."""
    labels = [f.stem for f in files]
    depth = 1
    while len(set(labels)) < len(labels) and depth < 8:
        dup = {lab for lab in labels if labels.count(lab) > 1}
        labels = ["/".join(f.with_suffix("").parts[-depth - 1:]) if lab in dup else lab
                  for f, lab in zip(files, labels)]
        depth += 1
    return labels


def load_suite(paths: Sequence[str | os.PathLike]) -> list[SuiteInstance]:
    """Read and validate every instance of the study (a bad file is a one-line error naming it)."""
    files = find_instance_files(paths)
    out = []
    for f, label in zip(files, _labels(files)):
        try:
            raw = f.read_bytes()
            data = json.loads(raw)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, huge ints
            raise InvalidInstanceError(f"instance {str(f)!r}: cannot read as JSON ({exc.__class__.__name__})") from None
        try:
            inst = instance_from_dict(data)
        except InvalidInstanceError as exc:
            raise InvalidInstanceError(f"instance {str(f)!r}: {exc}") from None
        out.append(SuiteInstance(str(f), label, f.parent.name or ".", inst.name, hashlib.sha256(raw).hexdigest(), raw.decode(),
                                 inst.n, inst.n_edges, inst.m, inst.comm))
    return out


def parse_method_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"name"`` or ``"name:key=value:key=value"`` (a point of an option sweep) -> (name, options)."""
    name, *items = [x.strip() for x in spec.split(":")]
    opts: dict[str, str] = {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise InvalidInstanceError(f"--methods: {spec!r}: options are written name:key=value, got {item!r}")
        opts[k.strip()] = v.strip()
    return name, opts


def parse_methods(spec: str | Sequence[str] | None) -> list[str]:
    """``"a,b,c"`` (or a list) -> validated method specs; ``None``/``"all"`` -> every registered method.

    A spec is a method name, optionally with options: ``heft:insertion=false`` (rows are labelled by
    the spec, so one study can sweep a method's options)."""
    from ..registry import method_info, methods, validate_options

    if spec is None or spec == "all" or spec == ["all"]:
        names = methods()
    else:
        items = spec.split(",") if isinstance(spec, str) else list(spec)
        names = [s.strip() for s in items if s.strip()]
        if not names:
            raise InvalidInstanceError(f"--methods: no method named in {spec!r}")
    for n in names:
        name, opts = parse_method_spec(n)
        method_info(name)  # unknown -> one-line error listing the valid names
        validate_options(name, opts)  # unknown option / bad value -> one-line error
    return list(dict.fromkeys(names))


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def pair_key(inst: SuiteInstance, method: str, repeat: int) -> str:
    """File-name-safe, stable id of one pair: a changed instance file gets a new key."""
    m = _safe(method)
    if m != method:  # e.g. "heft:insertion=false": keep distinct specs distinct after sanitising
        m += "-" + hashlib.sha1(method.encode()).hexdigest()[:6]
    return f"{_safe(inst.label)}-{inst.sha[:10]}__{m}__r{repeat}"


def oversize(inst: SuiteInstance, method: str) -> int | None:
    """The method's ``max_ops`` when ``inst`` is larger than what the method is meant for, else None."""
    from ..registry import method_info

    cap = method_info(parse_method_spec(method)[0]).max_ops
    return cap if cap is not None and inst.n_ops > cap else None


def plan(suite: Sequence[SuiteInstance], methods: Sequence[str], *, repeat: int = 1, seed: int = 0,
         time_limit_s: float | None = DEFAULT_TIME_LIMIT_S, respect_max_ops: bool = False) -> list[dict[str, Any]]:
    """Every (instance, method, repeat) as a task dict (instance-major order; repeat r uses seed+r).

    ``respect_max_ops``: leave out pairs where the instance is larger than the method's registered
    ``max_ops`` (as ``dplace compare`` does for its default methods)."""
    tasks = []
    for inst in suite:
        for m in methods:
            if respect_max_ops and oversize(inst, m) is not None:
                continue
            for r in range(repeat):
                tasks.append({
                    "key": pair_key(inst, m, r), "instance": inst.label, "group": inst.group,
                    "instance_name": inst.name,
                    "instance_file": inst.path, "instance_sha": inst.sha, "n_ops": inst.n_ops,
                    "n_edges": inst.n_edges, "n_devices": inst.n_devices, "comm": inst.comm, "method": m,
                    "repeat": r, "seed": seed + r, "time_limit_s": time_limit_s, "dplace_version": __version__,
                })
    return tasks


def hard_limit_for(time_limit_s: float | None) -> float | None:
    """Default wall limit of one pair: 1.5 x its time limit + 10 s for loading, simulating and checking."""
    return None if time_limit_s is None else 1.5 * time_limit_s + 10.0
