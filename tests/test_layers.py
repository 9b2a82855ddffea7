"""Layers (session.layers) and readable names (ir.names): ops grouped by the name scopes of every origin (Keras
layer prefixes, PyTorch module paths, onnx2tf and flat names cut into parts), both graphs of a conversion in the
same groups, each group's conflicts and inserted Transposes counted, and long names elided at the middle."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from inspector.core.emit.convert import convert
from inspector.core.io.loader import load_model
from inspector.core.io.tflite_builder import ModelBuilder
from inspector.core.ir.names import elide, scope, tokens
from inspector.core.session.layers import LIMIT, conversion_layers, graph_layers

ORIGINS = ["keras/mobilenetv2_fp32.tflite", "keras/efficientnetb0_fp16.tflite", "keras/nasnetmobile_fp32.tflite",
           "torch/mobilenet_v2_w050.tflite", "torch/gpt_tiny_causal.tflite", "torch/convnext_nano.tflite",
           "onnx2tf/mnasnet0_75.tflite", "realworld/face_detection_back.tflite",
           "tfbuilt/tf_bert_tiny_dynseq_fp32.tflite"]


def _check_tree(tree, n_ops: int, limit: int = LIMIT):
    """Every op in exactly one innermost group; a group's ops are its own and its children's; no level wider than
    `limit` unless it cannot be cut; the default depth shows at most `limit` boxes."""
    layers = tree.layers
    assert sorted(tree.op_layer) == list(range(n_ops))
    assert tree.root.ops == list(range(n_ops))
    for layer in layers.values():
        inner = sorted(layer.direct + [op for c in layer.children for op in layers[c].ops])
        assert layer.ops == inner
        assert all(layers[c].parent == layer.id and layers[c].depth == layer.depth + 1 for c in layer.children)
        assert all(tree.op_layer[op] == layer.id for op in layer.direct)
        assert layer.items <= limit
        if layer.id:
            assert len(layer.ops) >= 2                      # a single op is no group
    assert tree.visible(tree.default_depth) <= limit
    deepest = max(layer.depth for layer in layers.values())
    assert tree.default_depth == deepest or tree.visible(tree.default_depth + 1) > limit


@pytest.mark.parametrize("name", ORIGINS)
def test_every_origin_s_tree_covers_each_op_once_and_opens_readable(corpus, name):
    g = load_model(str(corpus / name))
    tree = graph_layers(g.main, g.format)
    _check_tree(tree, len(g.main.ops))
    assert 2 <= tree.root.items <= LIMIT


def _top_labels(tree):
    return [tree.layers[c].label for c in tree.root.children]


def _tree(corpus, rel: str):
    """A corpus model's main subgraph and its layer tree."""
    g = load_model(str(corpus / rel))
    return g.main, graph_layers(g.main, g.format)


def test_keras_blocks_are_groups_by_their_layer_prefix(corpus):
    sg, tree = _tree(corpus, "keras/mobilenetv2_fp32.tflite")
    labels = _top_labels(tree)
    assert [f"block_{i}" for i in range(1, 17)] == [x for x in labels if x.startswith("block_")]
    for c in tree.root.children:
        layer = tree.layers[c]
        if layer.label.startswith("block_"):        # each op of block_3 was named in layer block_3_...
            assert 3 <= len(layer.ops) <= 4
            for op in layer.ops:
                assert f"/{layer.label}_" in sg.tensors[sg.ops[op].outputs[0]].name
    # EfficientNet's blocks (block1a, block6d, ...) are word groups too, its fp16 weights' DEQUANTIZE inside them
    _, tree = _tree(corpus, "keras/efficientnetb0_fp16.tflite")
    blocks = [x for x in _top_labels(tree) if re.fullmatch(r"block\d[a-z]", x)]
    assert len(blocks) == 16 and "block6d" in blocks


def test_pytorch_module_paths_are_groups_labelled_by_their_class(corpus):
    sg, tree = _tree(corpus, "torch/mobilenet_v2_w050.tflite")
    labels = _top_labels(tree)
    assert [f"InvertedResidual_{i}" for i in range(1, 18)] == [x for x in labels if x.startswith("Inverted")]
    assert tree.default_depth == 0 and len(labels) <= 20
    for c in tree.root.children:
        layer = tree.layers[c]
        assert "torch.nn" not in layer.label and "." not in layer.label
        for op in layer.ops:                                # the group's module is in each of its ops' names
            assert any(part.startswith(layer.id) for part in sg.tensors[sg.ops[op].outputs[0]].name.split(";"))
    # a GPT's Sequential_blocks holds most of it: opened, its two blocks are at the top
    _, tree = _tree(corpus, "torch/gpt_tiny_causal.tflite")
    assert [x for x in _top_labels(tree) if x.startswith("GPTBlock")] == ["GPTBlock_0", "GPTBlock_1"]
    assert tree.default_depth >= 1


def test_names_without_scopes_are_cut_into_parts_where_few_edges_cross(corpus):
    g = load_model(str(corpus / "realworld/face_detection_back.tflite"))      # conv2d_7, activation_27, ...
    tree = graph_layers(g.main, g.format)
    labels = _top_labels(tree)
    assert labels and all(re.fullmatch(rf"part \d+/{len(labels)}", x) for x in labels)
    parts = [tree.layers[c] for c in tree.root.children]
    assert all(a.ops[-1] < b.ops[0] or a.ops[-1] < b.ops[-1] for a, b in zip(parts, parts[1:]))


def _named_model(path):
    """A Keras-like net with scoped names, non-square: m/stem (2 convs), m/head (reshape mixing channels into space,
    then a conv): the reshape needs TFLite's order, so Transposes are inserted in m/head."""
    rng = np.random.default_rng(4)
    b = ModelBuilder()
    x = b.input("serving_default_x", [1, 5, 7, 3])

    def conv(name, src, cin, cout, shape):
        out = b.tensor(name, shape[:3] + [cout])
        w = b.const(name + "/w", rng.standard_normal((cout, 3, 2, cin)).astype(np.float32))
        bias = b.const(name + "/b", rng.standard_normal(cout).astype(np.float32))
        b.op("CONV_2D", [src, w, bias], [out], {"padding": "SAME"})
        return out
    a = conv("m/stem/conv1/Conv2D", x, 3, 4, [1, 5, 7])
    a = conv("m/stem/conv2/Relu;m/stem/conv2/Conv2D", a, 4, 4, [1, 5, 7])
    r = b.tensor("m/head/reshape/Reshape", [1, 7, 4, 5])
    b.op("RESHAPE", [a, b.const("m/head/shape", np.array([1, 7, 4, 5], np.int32))], [r], {"new_shape": [1, 7, 4, 5]})
    y = conv("m/head/conv/Conv2D", r, 5, 2, [1, 7, 4])
    out = b.tensor("Identity", [1, 7, 4, 2])
    b.op("RELU", [y], [out])
    b.output(out)
    return b.save(path)


def test_a_conversion_s_groups_hold_both_graphs_and_count_conflicts_and_transposes(tmp_path):
    g = load_model(str(_named_model(tmp_path / "m.tflite")))
    result = convert(g)
    tree = conversion_layers(result)
    sg, trace = g.main, result.trace
    _check_tree(tree, len(sg.ops))
    assert _top_labels(tree) == ["stem", "head"]
    stem, head = (tree.layers[c] for c in tree.root.children)
    assert stem.id == "m/stem" and stem.ops == [0, 1] and head.ops == [2, 3, 4]     # Identity's RELU joins m/head
    # the ONNX side: each group holds the nodes of its ops and the Transposes inserted at them, in ONNX order
    order = [n.name for n in result.model.graph.node]
    for layer in (stem, head):
        mine = {n for op in layer.ops for n in trace.op_nodes.get(op, ())}
        mine |= {n for n, c in trace.inserted.items() if c.op in layer.ops}
        assert set(layer.nodes) == mine and layer.nodes == sorted(layer.nodes, key=order.index)
    assert sorted(tree.node_layer) == sorted(order)
    assert tree.root.nodes == sorted(order, key=order.index)
    # the badge: conflicts where the op needing the Transpose is; none in the stem
    assert len(result.plan.conflicts) >= 1 and result.transposes >= 1
    assert head.conflicts == len(result.plan.conflicts) and stem.conflicts == 0
    assert head.transposes == len(trace.inserted) == tree.root.transposes and stem.transposes == 0
    assert stem.categories == {"Implicit": 2}
    assert sum(head.categories.values()) == 3 and head.categories["Terminate"] == 1
    # a tight limit cuts the top level into parts, every op still once
    tight = conversion_layers(result, limit=2)
    _check_tree(tight, len(sg.ops), limit=2)
    assert tight.root.conflicts == len(result.plan.conflicts)


def test_onnx_node_names_give_scopes_without_their_last_component(tmp_path):
    """An ONNX model opened alone (torch.onnx's `/features/features.0/Conv` names)."""
    nodes, prev = [], "x"
    for i, (scope_, op) in enumerate([("/stem", "Relu"), ("/stem", "Neg"), ("/features/features.0", "Relu"),
                                      ("/features/features.0", "Abs"), ("/features/features.1", "Relu"),
                                      ("/features/features.1", "Neg"), ("", "Sigmoid")]):
        out = f"v{i}"
        nodes.append(helper.make_node(op, [prev], [out], name=f"{scope_}/{op}_{i}"))
        prev = out
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 3, 5, 7])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    g = load_model(str(path))
    tree = graph_layers(g.main, g.format)
    _check_tree(tree, 7)
    assert _top_labels(tree) == ["stem", "features"]
    features = tree.layers["features"]
    assert [tree.layers[c].label for c in features.children] == ["features.0", "features.1"]
    assert tree.op_layer[6] == "features/features.1"        # no scope: its producer's
    assert tree.default_depth == 2


def test_a_flat_chain_of_thousands_opens_collapsed_in_nested_parts(tmp_path):
    b = ModelBuilder()
    t = b.input("x", [1, 3, 5, 7])
    for i in range(3000):
        out = b.tensor(f"t{i}", [1, 3, 5, 7])
        b.op("RELU" if i % 2 else "ABS", [t], [out])
        t = out
    b.output(t)
    g = load_model(str(b.save(tmp_path / "chain.tflite")))
    tree = graph_layers(g.main, g.format)
    _check_tree(tree, 3000)
    assert tree.default_depth == 0 and 30 <= tree.root.items <= LIMIT
    assert max(layer.depth for layer in tree.layers.values()) == 2


# -- names -------------------------------------------------------------------------------------------------------
def test_scope_takes_the_fused_name_that_reads_like_the_op():
    fused = ("mobilenetv2_1.00_224_1/block_3_expand_relu_1/Relu6;mobilenetv2_1.00_224_1/block_3_expand_BN_1/"
             "batchnorm/add_1;mobilenetv2_1.00_224_1/block_3_expand_1/convolution")
    assert scope([fused], "CONV_2D") == ("mobilenetv2_1.00_224_1", "block_3_expand_1", "convolution")
    assert scope([fused], "RELU6")[1] == "block_3_expand_relu_1"
    assert scope(["a/b/Conv2d_0;7"], "CONV_2D") == ("a", "b", "Conv2d_0")      # litert-torch's op counter dropped
    assert scope(["Identity"], "RELU") == ("Identity",) and scope([";;"], "ADD") == ()
    assert tokens("block_3_expand_BN_1") == ["block_3", "expand", "BN_1"]
    assert tokens("block7a_se_reduce_1") == ["block7a", "se", "reduce_1"]


def test_elide_keeps_the_model_head_and_the_module_class_and_index_of_real_torch_names(corpus):
    g = load_model(str(corpus / "torch/mobilenet_v2_w050.tflite"))
    names = [g.main.tensors[op.outputs[0]].name for op in g.main.ops]
    assert max(len(n) for n in names) > 500
    for width in (32, 48, 80):
        for name in names:
            short = elide(name, width)
            assert len(short) <= width
            if len(name) <= width:
                assert short == name
                continue
            assert short.startswith("MobileNetV2") and "torch.nn" not in short
            pieces = name.split(";")
            counter = pieces[-1]
            if counter.isdigit():                           # the op's index stays
                assert short.endswith(";" + counter)
            first = next((p for p in pieces if "/" in p), pieces[0])
            module = first.rsplit("/", 1)[-1].rsplit(".", 1)[-1]
            if width >= 48:                                 # and so does its module's class
                assert module in short
    assert elide("conv2d_7/Kernel", 48) == "conv2d_7/Kernel"
    gpt = "__main__.TinyGPT/torch.nn.modules.container.Sequential_blocks/__main__.GPTBlock_1/" \
          "__main__.CausalSelfAttention_attn;16"
    assert elide(gpt, 40) == "TinyGPT/…/CausalSelfAttention_attn;16"


def test_info_lists_the_layers_as_a_big_model_opens(corpus, capsys):
    from inspector.cli import main as cli
    import json
    path = str(corpus / "torch/gpt_tiny_causal.tflite")
    assert cli(["info", path, "--layers", "--json"]) == 0
    groups = {g["label"]: g for g in json.loads(capsys.readouterr().out)["layers"] if g["depth"] == 1}
    _, tree = _tree(corpus, "torch/gpt_tiny_causal.tflite")
    assert list(groups) == _top_labels(tree)
    block = groups["GPTBlock_0"]
    assert block["open"] and block["ops"] == tree.layers[block["id"]].ops and len(block["ops"]) > 40
    assert cli(["info", path, "--layers"]) == 0
    text = capsys.readouterr().out.split("layers (op count; + opens at first):\n", 1)[1].splitlines()
    assert text[1] == f"  + GPTBlock_0  {len(block['ops'])}" and text[2].startswith("    - ")
