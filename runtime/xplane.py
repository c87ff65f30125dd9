"""The profiler's trace (xplane) read back: op events per node, for :mod:`.profile` (op times) and
:mod:`.execute` (start times for the order check); its own module so neither imports the other for it."""
from __future__ import annotations


def xplane_events(path: str) -> tuple[dict[str, list[tuple[int, int]]], dict[str, list[tuple[int, int]]]]:
    """Op events of one xplane file: (host executor events, GPU kernel events), each node name ->
    [(start ps, duration ps)]."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(path, "rb") as fh:
        space.ParseFromString(fh.read())
    host: dict[str, list[tuple[int, int]]] = {}
    kernels: dict[str, list[tuple[int, int]]] = {}
    for plane in space.planes:
        is_gpu = plane.name.startswith("/device:GPU")
        if not (is_gpu or plane.name == "/host:CPU"):
            continue
        md, sm = plane.event_metadata, plane.stat_metadata
        stat_id = next((k for k, v in sm.items() if v.name == "tf_op"), None)
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            for ev in line.events:
                name = md[ev.metadata_id].name
                if is_gpu:  # device kernels name their op in the tf_op stat
                    tf_op = ""
                    for st in list(ev.stats) + list(md[ev.metadata_id].stats):
                        if st.metadata_id == stat_id:
                            tf_op = st.str_value or (sm[st.ref_value].name if st.ref_value in sm else "")
                    if tf_op:  # "name:type" (or just the name)
                        node = tf_op.rsplit(":", 1)[0] if ":" in tf_op else tf_op
                        kernels.setdefault(node, []).append((base + ev.offset_ps, ev.duration_ps))
                elif ":" in name and "::" not in name:
                    host.setdefault(name.rsplit(":", 1)[0], []).append((base + ev.offset_ps, ev.duration_ps))
    return host, kernels
