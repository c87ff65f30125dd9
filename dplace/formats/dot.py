"""DOT task graphs with a ``Weight`` on nodes and edges (:func:`from_dot`; a parser of its own for the
subset those files use)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from ..instance.io import read_text
from ..instance.model import Edge, Op
from .common import Parsed, bad, converter, parse_float

_DOT_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<arrow>->|--)|(?P<punct>[{}\[\];,=])|(?P<id>-?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?(?![A-Za-z0-9_.])|[A-Za-z0-9_.]+))'
)


def _dot_tokens(path: Any, text: str) -> list[str]:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = "\n".join(
        "" if ln.lstrip().startswith("#") else re.sub(r"(^|\s)//.*$", "", ln) for ln in text.splitlines()
    )
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _DOT_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            frag = text[pos:].strip()[:20]
            raise bad(path, f"DOT syntax: unexpected text {frag!r}")
        tok = m.group("str")
        out.append(tok if tok is not None else m.group(m.lastgroup))
        pos = m.end()
    return out


def _unq(tok: str) -> str:
    if tok.startswith('"'):
        return tok[1:-1].replace('\\"', '"')
    return tok


def _dot_attrs(path: Any, toks: list[str], i: int) -> tuple[dict[str, str], int]:
    """Parse ``[k=v, k=v; ...]`` starting at toks[i] == '['; returns attrs and the index after ']'."""
    attrs: dict[str, str] = {}
    i += 1
    while i < len(toks) and toks[i] != "]":
        if toks[i] in (",", ";"):
            i += 1
            continue
        key = _unq(toks[i])
        if i + 2 < len(toks) and toks[i + 1] == "=":
            attrs[key] = _unq(toks[i + 2])
            i += 3
        else:
            attrs[key] = "true"
            i += 1
    if i >= len(toks):
        raise bad(path, "DOT syntax: '[' without ']'")
    return attrs, i + 1


def _weight(path: Any, attrs: Mapping[str, str], what: str) -> float | None:
    for key in ("Weight", "weight"):
        if key in attrs:
            return parse_float(path, attrs[key], f"{what}: Weight")
    return None


@converter("dot", latency=0.0)
def from_dot(path: str | Path, *, devices: int | None = None, bandwidth: float = 12000.0) -> Parsed:
    """An instance from a DOT task graph (``digraph``) with ``Weight`` on nodes and edges.

    A node's ``Weight`` is its time in µs (required for every node); an edge's ``Weight`` is its
    communication time in the same unit on a link of ``bandwidth``: ``bytes = Weight × bandwidth``, so
    with the default ``latency=0`` a transfer takes exactly ``Weight`` (the classic task-graph meaning;
    missing edge Weight = 0). Ops hold no memory unless a node has a ``memory`` attribute (bytes).
    Supported subset (own parser): ``strict``/``digraph NAME { ... }``, node statements, edge chains
    ``a -> b -> c`` with attributes, ``graph``/``node``/``edge`` default statements (``node [Weight=..]``
    and ``edge [Weight=..]`` defaults apply), ``key=value`` graph attributes, comments; subgraphs and
    undirected graphs are rejected. Devices default to 4, memory per device to 16 GiB when ops hold none.
    """
    toks = _dot_tokens(path, read_text(path, "input"))
    i = 0
    if i < len(toks) and toks[i].lower() == "strict":
        i += 1
    if i >= len(toks) or toks[i].lower() not in ("digraph", "graph"):
        raise bad(path, f"DOT: expected 'digraph', got {toks[i] if i < len(toks) else 'end of file'!r}")
    if toks[i].lower() == "graph":
        raise bad(path, "DOT: undirected 'graph' is not a task graph; expected 'digraph'")
    i += 1
    gname = None
    if i < len(toks) and toks[i] != "{":
        gname = _unq(toks[i])
        i += 1
    if i >= len(toks) or toks[i] != "{":
        raise bad(path, "DOT: expected '{' after digraph name")
    i += 1
    node_attrs: dict[str, dict[str, str]] = {}
    order: list[str] = []
    edge_list: list[tuple[str, str, dict[str, str]]] = []
    node_default: dict[str, str] = {}
    edge_default: dict[str, str] = {}

    def touch(n: str) -> None:
        if n not in node_attrs:
            node_attrs[n] = {}
            order.append(n)

    closed = False
    while i < len(toks):
        t = toks[i]
        if t == "}":
            closed = True
            i += 1
            break
        if t in (";", ","):
            i += 1
            continue
        if t == "{" or t.lower() == "subgraph":
            raise bad(path, "DOT: subgraphs are not supported")
        if t in ("[", "]", "=", "->", "--"):
            raise bad(path, f"DOT syntax: unexpected {t!r}")
        low = t.lower()
        if low in ("node", "edge", "graph") and i + 1 < len(toks) and toks[i + 1] == "[":
            attrs, i = _dot_attrs(path, toks, i + 1)
            if low == "node":
                node_default.update(attrs)
            elif low == "edge":
                edge_default.update(attrs)
            continue
        if i + 2 < len(toks) and toks[i + 1] == "=":  # graph attribute
            i += 3
            continue
        chain = [_unq(t)]
        i += 1
        while i < len(toks) and toks[i] in ("->", "--"):
            if toks[i] == "--":
                raise bad(path, "DOT: undirected edge '--' in a digraph")
            if i + 1 >= len(toks) or toks[i + 1] in ("{", "}", "[", "]", ";", ",", "=", "->"):
                raise bad(path, f"DOT syntax: edge from {chain[-1]!r} has no target")
            chain.append(_unq(toks[i + 1]))
            i += 2
        attrs: dict[str, str] = {}
        if i < len(toks) and toks[i] == "[":
            attrs, i = _dot_attrs(path, toks, i)
        if len(chain) == 1:
            touch(chain[0])
            node_attrs[chain[0]].update(attrs)
        else:
            for a, b in zip(chain, chain[1:]):
                touch(a)
                touch(b)
                edge_list.append((a, b, {**edge_default, **attrs}))
    if not closed:
        raise bad(path, "DOT: missing closing '}'")
    if not order:
        raise bad(path, "DOT: the graph has no nodes")
    ops: list[Op] = []
    for n in order:
        attrs = {**node_default, **node_attrs[n]}
        w = _weight(path, attrs, f"node {n!r}")
        if w is None:
            raise bad(path, f"node {n!r}: missing Weight")
        mem = parse_float(path, attrs["memory"], f"node {n!r}: memory") if "memory" in attrs else 0.0
        extra = {"label": attrs["label"]} if "label" in attrs else {}
        ops.append(Op(n, w, int(mem), attrs.get("type"), None, None, extra))
    edges = []
    for a, b, attrs in edge_list:
        w = _weight(path, attrs, f"edge {a!r}->{b!r}")
        edges.append(Edge(a, b, (w or 0.0) * float(bandwidth)))
    return Parsed(ops, edges, name=gname)
