"""Instances from elsewhere: a module per converter and the generator of synthetic instances.

* :mod:`~dplace.formats.dnn_partitioning` — JSON inputs of msr-fiddle/dnn-partitioning (operator and layer
  graphs with accelerator latencies, sizes, colocation classes);
* :mod:`~dplace.formats.pipedream` — PipeDream layer profiles (text);
* :mod:`~dplace.formats.dot` — DOT task graphs with ``Weight`` attributes on nodes and edges;
* :mod:`~dplace.formats.stg` — Standard Task Graph set files (Kasahara);
* :mod:`~dplace.formats.generate` — random layered DAGs with a target CCR, Transformer-like training
  graphs, and :func:`~dplace.formats.generate.ccr`, the one CCR definition;
* :mod:`~dplace.formats.native` — the dplace instance itself (JSON or ``.npz``), to write in the other form;
* :mod:`~dplace.formats.common` — the options every converter shares and the ``@converter`` decorator;
* :mod:`~dplace.formats.cli` — ``dplace convert`` and ``dplace generate``.

Every converter returns a validated :class:`~dplace.instance.model.Instance` and raises
:class:`~dplace.errors.InvalidInstanceError` with one line naming the file, the field and the value.
Memory per device: ``memory`` (bytes) wins, else ``memory_fraction`` × the total op memory, else the
format's default (see each function). A new format is a module here with one ``@converter("name")``
function, imported below (``dplace convert`` lists it then).
"""
from .common import CONVERTERS, convert, write_instance
from .dnn_partitioning import forward_name, from_dnn_partitioning, op_type_from_name
from .pipedream import from_pipedream
from .dot import from_dot  # noqa: I001  (import order = the order of FORMATS)
from .stg import from_stg
from .generate import ccr, default_memory, layered_dag, transformer_training
from .native import from_instance_file

CONVERTERS["instance"] = from_instance_file  # a dplace instance (.json or .npz), to write in the other form
FORMATS = tuple(CONVERTERS)

__all__ = ["CONVERTERS", "FORMATS", "ccr", "convert", "default_memory", "forward_name", "from_dnn_partitioning",
           "from_dot", "from_pipedream", "from_stg", "layered_dag", "op_type_from_name", "transformer_training",
           "write_instance"]
