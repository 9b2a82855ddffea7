"""Finding one's way in a pane's graph: the search's matches (text or a regular expression) with what the results
list shows of each, and the moves of Alt+arrows along the edges. Qt-free: it reads a pane's ViewGraph.

What a search matches (case-insensitive): op types, op, node and tensor names, and op attributes, each attribute
read as `name=value` (`padding=SAME`, `strides=[2,2]`). Typed as `name=value` or `name:value` it is a question about
attributes: ops with an attribute whose name contains `name` and whose value, or one of whose list elements, is
`value` (`stride=2` finds TFLite's stride_h 2 and ONNX's strides [2,2]; `axis:3`); names containing that text
literally match too (a name may hold ':')."""
from __future__ import annotations

import re
from typing import Hashable

from .graph_model import ViewGraph

UP, DOWN, LEFT, RIGHT = "producer", "consumer", "previous sibling", "next sibling"


SYNTAX = ("op type, name, or attribute: stride=2, axis:3, SAME (a Python regular expression when ticked in Search "
          "results: over names, op types and name=value attribute texts)")
_ASKED = re.compile(r"^([A-Za-z_]\w*)\s*[=:]\s*(\S(?:.*\S)?)$")


def _value(text: str) -> str:
    """An attribute value as compared: lower case, no spaces, a number in one spelling (2.0 and 2 are 2)."""
    t = text.replace(" ", "").lower()
    try:
        return f"{float(t):g}"
    except ValueError:
        return t


def _values(text: str) -> set[str]:
    """The spellings an attribute value text matches: whole, and each element of a list."""
    whole = _value(text)
    out = {whole, whole.strip("[]")}
    if whole.startswith("["):
        out.update(_value(x) for x in whole.strip("[]").split(",") if x)
    return out


class Query:
    """A search's text, compiled. `pat` matches names, op types and `name=value` attribute texts; `asked` is the
    (name part, value) of a `name=value` question (plain text only)."""

    def __init__(self, text: str, regex: bool = False):
        q = text.strip()
        self.pat = re.compile(q if regex else re.escape(q), re.IGNORECASE)   # a bad one raises re.error
        m = None if regex else _ASKED.match(q)
        self.asked = (m.group(1).lower(), _value(m.group(2))) if m else None

    def attributes(self, node) -> list[str]:
        """The node's attributes this search matches, as `name=value` texts."""
        out = []
        for k, v in node.attrs:
            if self.asked is not None:
                key, value = self.asked
                if key in k.lower() and value in _values(v):
                    out.append(f"{k}={v}")
            elif self.pat.search(f"{k}={v}"):
                out.append(f"{k}={v}")
        return out


def pattern(text: str, regex: bool = False) -> Query | None:
    """What the search matches (None: nothing typed). A bad regular expression raises re.error."""
    return Query(text, regex) if text.strip() else None


class Index:
    """A ViewGraph's edges by node and by tensor, in the graph's order (a node's inputs in its op's input order)."""

    def __init__(self, vg: ViewGraph):
        self.vg = vg
        self.at = vg.index()
        self.ins: dict[int, list[int]] = {}          # node -> its producers' nodes
        self.outs: dict[int, list[int]] = {}         # node -> its consumers' nodes (each once)
        self.producer: dict[Hashable, int] = {}      # tensor -> the node that writes it
        self.consumers: dict[Hashable, list[int]] = {}
        self.label: dict[Hashable, str] = {}         # tensor -> its shape text
        self.out_tensor: dict[int, Hashable] = {}    # node -> its first output tensor
        for e in vg.edges:
            self.ins.setdefault(e.dst, []).append(e.src)
            outs = self.outs.setdefault(e.src, [])
            if e.dst not in outs:
                outs.append(e.dst)
            self.producer.setdefault(e.tensor, e.src)
            self.consumers.setdefault(e.tensor, []).append(e.dst)
            self.label.setdefault(e.tensor, e.label)
            self.out_tensor.setdefault(e.src, e.tensor)

    def matches(self, query: Query) -> list[tuple[str, Hashable]]:
        """("node", key) for each node whose type, names or attributes match, then ("tensor", key) for each tensor
        whose name does."""
        pat = query.pat
        out: list[tuple[str, Hashable]] = [("node", n.key) for n in self.vg.nodes
                                           if pat.search(n.title) or pat.search(n.search)
                                           or (n.attrs and query.attributes(n))]
        names = self.vg.tensor_names
        out += [("tensor", t) for t in self.producer if pat.search(str(names.get(t, t)))]
        return out

    def row(self, kind: str, key: Hashable, categories: dict) -> tuple[str, str, str, str]:
        """(name, op type, category, shape) of a match, as the results list shows it (its attributes matched:
        `attributes`)."""
        if kind == "tensor":
            src = self.producer.get(key)
            n = self.vg.nodes[src] if src is not None else None
            op = f"tensor of {n.title if n.kind == 'op' else n.kind}" if n is not None else "tensor"
            return (str(self.vg.tensor_names.get(key, key)), op,
                    categories.get(n.key, "") if n is not None else "", self.label.get(key, ""))
        i = self.at[key]
        n = self.vg.nodes[i]
        if n.kind != "op":                           # a graph input or output: its tensor's name and shape
            return n.title, n.kind, "", n.lines[0] if n.lines else ""
        return n.name, n.title, categories.get(key, ""), self.label.get(self.out_tensor.get(i), "")

    def attributes(self, kind: str, key: Hashable, query: Query) -> str:
        """The attributes of a matched node that the search matched (`name=value`, comma-separated; "": none)."""
        if kind != "node" or key not in self.at:
            return ""
        return ", ".join(query.attributes(self.vg.nodes[self.at[key]]))

    def step(self, direction: str, node: Hashable | None = None, tensor: Hashable | None = None) -> Hashable | None:
        """The node one move from the selected node (or tensor) in `direction`: its first input's producer, its
        first consumer, or the consumer of the same producer before or after it; None when there is none."""
        if node is None or node not in self.at:
            if tensor is None:
                return None
            if direction == UP:
                i = self.producer.get(tensor)
            elif direction == DOWN:
                i = (self.consumers.get(tensor) or [None])[0]
            else:
                return None
            return self.vg.nodes[i].key if i is not None else None
        i = self.at[node]
        if direction == UP:
            nxt = (self.ins.get(i) or [None])[0]
        elif direction == DOWN:
            nxt = (self.outs.get(i) or [None])[0]
        else:
            up = (self.ins.get(i) or [None])[0]
            siblings = self.outs.get(up, []) if up is not None else []
            j = siblings.index(i) + (1 if direction == RIGHT else -1) if i in siblings else -1
            nxt = siblings[j] if 0 <= j < len(siblings) else None
        return self.vg.nodes[nxt].key if nxt is not None else None
