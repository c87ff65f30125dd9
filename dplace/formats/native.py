"""The dplace instance itself as a format: ``dplace convert instance`` reads a ``dplace-instance/1`` file
(JSON or its columnar ``.npz``) as it is, to write it in the other form."""
from __future__ import annotations

import os
from typing import Any

from ..errors import InvalidInstanceError
from ..instance.io import load_instance
from ..instance.model import Instance


def from_instance_file(path: str | os.PathLike, *, devices: Any = None, memory: Any = None,
                       memory_fraction: Any = None, latency: Any = None, bandwidth: Any = None,
                       comm: str = "parallel", name: str | None = None) -> Instance:
    """``dplace convert instance``: the instance in ``path`` (JSON or ``.npz``) as it is; ``--comm
    sequential`` and ``--name`` change it, the device and link options do not apply."""
    given = {"--devices": devices, "--memory": memory, "--memory-fraction": memory_fraction,
             "--latency": latency, "--bandwidth": bandwidth}
    for flag, value in given.items():
        if value is not None:
            raise InvalidInstanceError(f"{flag} does not apply to the instance format (convert it as it is)")
    inst = load_instance(path)
    changes: dict[str, Any] = {}
    if comm != "parallel" and comm != inst.comm:
        changes["comm"] = comm
    if name is not None and name != inst.name:
        changes["name"] = name
    return inst.replace(**changes) if changes else inst
