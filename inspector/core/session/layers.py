"""Layers: a model's ops grouped by the name scopes their names carry, so a big graph reads as its blocks.

The tree follows what Google's Model Explorer does with names (facts, not its code): a TFLite op lives in the scope
of its output tensor's name (ir.names.scope), an ONNX node in its name less the last component; an op whose name
has no path joins the scope its producers share; a group holding a single op is dissolved. On top of that, for a
readable overview: a chain of groups with one child each is one group; a level with more than LIMIT items is
regrouped by the shared first word of its layer names (Keras names a block's layers `block_3_expand`,
`block_3_project`), a word group kept only when its ops are connected; a level still too wide is cut, in op order,
into parts of at most LIMIT items. `default_depth` is how many levels to open so that about LIMIT boxes show.

A conversion's tree (`conversion_layers`) is the TFLite one with the ONNX nodes of each op (the trace or pairing's
op -> nodes), so both panes have the same groups under the same ids; each group counts its ops, its category mix,
its conflicts and the Transposes inserted for them (a conflict is where the op that needs the Transpose is).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from math import ceil

from inspector.core.ir.names import node_scope, scope, tokens

LIMIT = 40          # boxes a level should show at most (a big model opens collapsed to about this many)
MIN_TOP = 8         # fewer at the top of a big model: the block holding most of it is opened there


@dataclass
class Layer:
    id: str                                 # the scope path ('/'-joined); "" for the model itself
    label: str                              # what the box says (module paths shortened to their class)
    parent: str | None
    depth: int                              # 0 for the model, 1 at the top level
    children: list[str] = field(default_factory=list)      # groups directly inside, in op order
    direct: list[int] = field(default_factory=list)        # ops directly inside (in no child group)
    ops: list[int] = field(default_factory=list)           # every op inside, sorted
    nodes: list[str] = field(default_factory=list)         # every ONNX node inside (a conversion's tree)
    categories: dict[str, int] = field(default_factory=dict)   # category -> ops inside
    conflicts: int = 0                      # conflicts at ops inside
    transposes: int = 0                     # Transposes inserted for them

    @property
    def items(self) -> int:
        """Boxes this group shows when open."""
        return len(self.children) + len(self.direct)


@dataclass
class LayerTree:
    layers: dict[str, Layer]                # id -> Layer; "" is the model
    op_layer: dict[int, str]                # op -> the innermost group holding it
    node_layer: dict[str, str] = field(default_factory=dict)   # ONNX node -> innermost group
    default_depth: int = 0                  # groups at depth <= this open at first

    @property
    def root(self) -> Layer:
        return self.layers[""]

    def visible(self, depth: int) -> int:
        """Boxes shown when the groups at depth <= `depth` are open (0: the top level)."""
        def count(layer: Layer) -> int:
            if layer.depth > depth:
                return 1
            return len(layer.direct) + sum(count(self.layers[c]) for c in layer.children)
        return count(self.root)

    def ancestors(self, layer_id: str) -> list[str]:
        """The groups holding `layer_id`, outermost first (the model excluded), itself last."""
        out = []
        while layer_id:
            out.append(layer_id)
            layer_id = self.layers[layer_id].parent or ""
        return out[::-1]


# ---- the tree of one graph -------------------------------------------------------------------------------------
def op_scopes(sg, fmt: str) -> list[tuple[str, ...]]:
    """Each op's name scope; an op with none takes the scope its producers share (as Model Explorer does)."""
    if fmt == "onnx":
        paths = [node_scope(op.name) for op in sg.ops]
    else:
        paths = [scope([sg.tensors[t].name for t in op.outputs if 0 <= t < len(sg.tensors)], op.opcode)
                 for op in sg.ops]
    own = 0 if fmt == "onnx" else 1             # a TFLite path ends with the op's own name, an ONNX scope does not
    producers = sg.producers()
    for op in sg.ops:
        if len(paths[op.index]) > own:
            continue
        shared = None
        for t in op.inputs:
            p = producers.get(t)
            if p is None or len(paths[p]) <= own:
                continue
            parent = paths[p][:len(paths[p]) - own]
            shared = parent if shared is None else _common(shared, parent)
        mine = paths[op.index]
        if shared and not (own and mine and mine[0] == shared[0]):     # `model;1`: the model's own op
            paths[op.index] = shared + mine[len(mine) - own:]
    return paths


def graph_layers(sg, fmt: str = "tflite", limit: int = LIMIT) -> LayerTree:
    """The layer tree of a subgraph (`fmt`: the Graph's format, which says how its names carry scopes)."""
    paths = op_scopes(sg, fmt)
    edges = _edges(sg)
    tree = _Trie()
    for op in sg.ops:
        tree.add(paths[op.index], op.index)
    tree.dissolve()
    layers: dict[str, Layer] = {}
    root = Layer("", "", None, 0)
    layers[""] = root
    top = tree.root
    while not top.ops and len(top.children) == 1:           # the model's own name is no box worth opening
        (top,) = top.children.values()
    _build(top, root, layers)
    depth = len(top.path)
    if len(root.children) == 1 and len(root.direct) < limit:    # one block and a few ops beside it: open it
        depth = _splice(root, root.children[0], layers)
    while root.children and root.items < MIN_TOP and len(root.ops) > limit:
        big = max(root.children, key=lambda c: len(layers[c].ops))     # a block holding most of a big model
        if 2 * len(layers[big].ops) <= len(root.ops) or root.items - 1 + layers[big].items > limit:
            break
        _splice(root, big, layers)
    segment = {layer.id: (len(layer.id.split("/")), 0) for layer in layers.values() if layer.id}
    segment[""] = (depth, 0)
    _regroup(root, layers, paths, edges, limit, segment)
    for layer in layers.values():
        layer.children.sort(key=lambda c: layers[c].ops[-1])
        layer.direct.sort()
    op_layer = {op: layer.id for layer in layers.values() for op in layer.direct}
    out = LayerTree(layers, op_layer)
    out.default_depth = _depth(out, limit)
    return out


def conversion_layers(result, limit: int = LIMIT, tree: LayerTree | None = None) -> LayerTree:
    """The TFLite graph's tree with each group's ONNX nodes, category mix, conflicts and inserted Transposes
    (`result`: a ConversionResult, or one made of a pairing; `tree`: its graph's graph_layers, if made already:
    filled in place)."""
    graph, trace = result.graph, result.trace
    out = tree if tree is not None else graph_layers(graph.main, graph.format, limit)
    where: dict[int, str] = dict(out.op_layer)
    direct_nodes: dict[str, list[str]] = {}
    for op, names in trace.op_nodes.items():
        for n in names:
            direct_nodes.setdefault(where.get(op, ""), []).append(n)
    cats = {k: getattr(c, "value", str(c)) for k, c in result.categories.items()}
    conflicts, inserted, homes = _marks(result, where)
    for name, home in homes.items():
        if name not in trace.node_op:
            direct_nodes.setdefault(home, []).append(name)
    order = {n.name: i for i, n in enumerate(result.model.graph.node)}
    for layer in sorted(out.layers.values(), key=lambda x: -x.depth):   # innermost first: sums go up
        layer.nodes = list(direct_nodes.get(layer.id, ()))
        layer.conflicts, layer.transposes = conflicts[layer.id], inserted[layer.id]
        mix = Counter(cats[k] for k in layer.direct if k in cats)
        for c in layer.children:
            child = out.layers[c]
            layer.nodes += child.nodes
            layer.conflicts += child.conflicts
            layer.transposes += child.transposes
            mix.update(child.categories)
        layer.nodes.sort(key=lambda n: order.get(n, len(order)))
        layer.categories = dict(mix.most_common())
    out.node_layer = {n: layer.id for layer_id, names in direct_nodes.items()
                      for layer in (out.layers[layer_id],) for n in names}
    return out


def recount(tree: LayerTree, result, sg=None) -> None:
    """A re-run's conflicts and inserted Transposes counted again into `tree` (a conversion's: after a pin the
    groups and ops are the same, the badges are not). `sg`: the TFLite main graph, if `result` holds none."""
    conflicts, inserted, _ = _marks(result, tree.op_layer, sg)
    for layer in sorted(tree.layers.values(), key=lambda x: -x.depth):     # innermost first: sums go up
        layer.conflicts = conflicts[layer.id] + sum(tree.layers[c].conflicts for c in layer.children)
        layer.transposes = inserted[layer.id] + sum(tree.layers[c].transposes for c in layer.children)


def _marks(result, where: dict[int, str], sg=None) -> tuple[Counter, Counter, dict[str, str]]:
    """(conflicts per group, inserted Transposes per group, each inserted Transpose's group) of a conversion, each
    where the op that needs it is (`where`: op -> its innermost group)."""
    producers = (sg if sg is not None else result.graph.main).producers()

    def at(op: int | None, tensor: int) -> str:
        if op is None:
            op = producers.get(tensor)
        return where.get(op, "") if op is not None else ""
    conflicts: Counter = Counter(at(c.op, c.tensor) for c in result.plan.conflicts if c.subgraph == 0)
    homes = {name: at(c.op, c.tensor) for name, c in result.trace.inserted.items()}
    return conflicts, Counter(homes.values()), homes


# ---- building ----------------------------------------------------------------------------------------------------
class _Trie:
    def __init__(self):
        self.root = _Scope(())

    def add(self, path: tuple[str, ...], op: int):
        node = self.root
        for i, seg in enumerate(path):
            node = node.children.setdefault(seg, _Scope(path[:i + 1]))
        node.ops.append(op)

    def dissolve(self):
        """Groups holding fewer than two ops give their op to the group above (bottom-up)."""
        def walk(node: _Scope) -> int:
            total = len(node.ops)
            for seg, child in list(node.children.items()):
                n = walk(child)
                if n < 2:
                    node.ops += child.all_ops()
                    del node.children[seg]
                total += n
            return total
        walk(self.root)


class _Scope:
    def __init__(self, path: tuple[str, ...]):
        self.path = path
        self.children: dict[str, _Scope] = {}
        self.ops: list[int] = []

    def all_ops(self) -> list[int]:
        out = list(self.ops)
        for c in self.children.values():
            out += c.all_ops()
        return out


def _label(segment: str) -> str:
    return segment.rsplit(".", 1)[-1] if "." in segment and not segment[segment.rfind(".") + 1:][:1].isdigit() \
        else segment


def _build(node: _Scope, layer: Layer, layers: dict[str, Layer]):
    layer.direct = list(node.ops)
    for child in node.children.values():
        label = _label(child.path[-1])
        while not child.ops and len(child.children) == 1:      # a chain of single groups is one group
            (child,) = child.children.values()
        sub = Layer("/".join(child.path), label, layer.id, layer.depth + 1)
        layers[sub.id] = sub
        layer.children.append(sub.id)
        _build(child, sub, layers)
    layer.ops = sorted(layer.direct + [op for c in layer.children for op in layers[c].ops])


def _regroup(layer: Layer, layers: dict[str, Layer], paths, edges, limit: int, segment: dict[str, tuple[int, int]]):
    """Too many boxes in `layer`: group them by the first word of their next scope segment where those ops are
    connected, then cut what is still too wide into parts in op order. Recurses into the children.
    `segment`: a group's depth in the names and the words of the segment there it stands for (parts: none)."""
    if layer.items > limit and layer.id in segment:
        _by_words(layer, layers, paths, edges, *segment[layer.id], segment)
    if layer.items > limit:
        _in_parts(layer, layers, edges, limit)
    for c in list(layer.children):
        _regroup(layers[c], layers, paths, edges, limit, segment)


def _by_words(layer: Layer, layers: dict[str, Layer], paths, edges, depth: int, used: int,
              segment: dict[str, tuple[int, int]]):
    """Group `layer`'s boxes by the first word after the `used` ones of their scope segment at `depth` (then, for
    those left, the first two: `expanded_conv_3_expand`), where the ops of a word form one connected piece."""
    made: set[str] = set()
    for n_words in (used + 1, used + 2):
        buckets: dict[str, list[str | int]] = {}
        boxes: list[str | int] = [*layer.children, *layer.direct]
        for item in boxes:
            if item in made:
                continue
            path = layers[item].id.split("/") if isinstance(item, str) else list(paths[item])
            words = tokens(path[depth]) if depth < len(path) else []
            if len(words) > n_words:                         # a name of that many words is its own group already
                buckets.setdefault("_".join(words[:n_words]), []).append(item)
        for word, items in buckets.items():
            if len(items) < 2 or len(items) == layer.items:
                continue
            ops: set[int] = set()
            for item in items:
                ops.update(layers[item].ops if isinstance(item, str) else (item,))
            gid = f"{layer.id}/{word}" if layer.id else word
            if gid in layers or not _connected(ops, edges):
                continue
            group = Layer(gid, word, layer.id, layer.depth + 1)
            layers[gid] = group
            made.add(gid)
            segment[gid] = (depth, n_words)
            _adopt(group, items, layer, layers)
    if made:
        _absorb(layer, layers, edges)


def _absorb(layer: Layer, layers: dict[str, Layer], edges: dict[int, set[int]]):
    """An op of `layer` whose every neighbour there is in one of its groups goes into that group (the activation
    between a block's convolutions, named apart)."""
    where = {op: c for c in layer.children for op in layers[c].ops}
    for op in list(layer.direct):
        homes = {where.get(n) for n in edges[op]}
        home = next(iter(homes)) if len(homes) == 1 else None
        if home is not None:
            group = layers[home]
            layer.direct.remove(op)
            group.direct.append(op)
            group.ops = sorted(group.ops + [op])
            where[op] = home


def _in_parts(layer: Layer, layers: dict[str, Layer], edges, limit: int):
    """Cut `layer`'s boxes, in op order, into about sqrt(n) parts (at most `limit`; each part again regrouped if
    still too wide), each cut where the fewest edges cross near the even split (a block's end in a residual net).
    Model Explorer splits a too-large group into sections in its own way."""
    boxes: list[str | int] = [*layer.children, *layer.direct]
    items = sorted(boxes, key=lambda i: layers[i].ops[-1] if isinstance(i, str) else i)
    k = min(limit, ceil(len(items) ** 0.5))
    per = len(items) / k
    crossing = _crossing(items, layers, edges)
    cuts, last = [0], 0
    for n in range(1, k):
        aim = round(n * per)
        lo, hi = max(last + 2, aim - int(per / 3)), min(len(items) - 1, aim + int(per / 3))
        if lo > hi:
            continue
        last = min(range(lo, hi + 1), key=lambda b: (crossing[b], abs(b - aim)))
        cuts.append(last)
    cuts.append(len(items))
    chunks = [items[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]
    for n, chunk in enumerate(chunks, 1):
        if len(chunk) == 1:
            continue
        label = f"part {n}/{len(chunks)}"      # short: a closed box at fit zoom shows ~10 characters
        group = Layer(f"{layer.id}/{label}" if layer.id else label, label, layer.id, layer.depth + 1)
        layers[group.id] = group
        _adopt(group, chunk, layer, layers)


def _crossing(items: list, layers: dict[str, Layer], edges: dict[int, set[int]]) -> list[int]:
    """For each cut b (between items[b-1] and items[b]): how many edges join an op before it to one after."""
    pos = {}
    for i, item in enumerate(items):
        for op in (layers[item].ops if isinstance(item, str) else (item,)):
            pos[op] = i
    diff = [0] * (len(items) + 1)
    for a, i in pos.items():
        for b in edges[a]:
            j = pos.get(b)
            if j is not None and i < j:
                diff[i + 1] += 1
                diff[j + 1] -= 1
    out, run = [], 0
    for d in diff:
        run += d
        out.append(run)
    return out


def _splice(root: Layer, child: str, layers: dict[str, Layer]) -> int:
    """Put `child`'s boxes in its place at the top; returns its depth in the names."""
    only = layers.pop(child)
    i = root.children.index(child)
    root.children[i:i + 1] = only.children
    root.direct += only.direct
    for c in only.children:
        _deepen(layers[c], "", layers)
    return len(only.id.split("/"))


def _adopt(group: Layer, items: list, parent: Layer, layers: dict[str, Layer]):
    """Move `items` (child ids and ops) of `parent` into the new `group`, itself a child of `parent`."""
    taken = set(items)
    parent.children = [c for c in parent.children if c not in taken] + [group.id]
    parent.direct = [op for op in parent.direct if op not in taken]
    group.children = [i for i in items if isinstance(i, str)]
    group.direct = [i for i in items if not isinstance(i, str)]
    for c in group.children:
        _deepen(layers[c], group.id, layers)
    group.ops = sorted(group.direct + [op for c in group.children for op in layers[c].ops])


def _deepen(layer: Layer, parent: str, layers: dict[str, Layer]):
    layer.parent = parent
    layer.depth = layers[parent].depth + 1
    for c in layer.children:
        _deepen(layers[c], layer.id, layers)


def _depth(tree: LayerTree, limit: int) -> int:
    deepest = max(layer.depth for layer in tree.layers.values())
    d = 0
    while d < deepest and tree.visible(d + 1) <= limit:
        d += 1
    return d


def _edges(sg) -> dict[int, set[int]]:
    """op -> the ops it reads from or writes to."""
    producers = sg.producers()
    out: dict[int, set[int]] = {op.index: set() for op in sg.ops}
    for op in sg.ops:
        for t in op.inputs:
            p = producers.get(t)
            if p is not None and p != op.index:
                out[op.index].add(p)
                out[p].add(op.index)
    return out


def _connected(ops: set[int], edges: dict[int, set[int]]) -> bool:
    """Whether the ops form one piece through the edges among them, or through one op outside them between two
    (an activation Keras named apart from the block it sits in)."""
    start = next(iter(ops))
    seen, todo = {start}, [start]
    while todo:
        for n in edges[todo.pop()]:
            for m in (n,) if n in ops else edges[n]:
                if m in ops and m not in seen:
                    seen.add(m)
                    todo.append(m)
    return len(seen) == len(ops)


def _common(a: tuple, b: tuple) -> tuple:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]
