"""The ONNX graph of a BERT encoder, built from its ``model.safetensors`` without torch.

The bundled all-MiniLM-L6-v2 is a BERT encoder (6 layers, 12 heads, hidden size 384): word,
position and token-type embeddings and a LayerNorm, then per layer self-attention with the
padding masked out, a LayerNorm, a feed-forward block with GELU (erf form, as BERT's) and a
LayerNorm. This module writes that computation node by node as ONNX's protobuf bytes
(:mod:`membot.embed.onnx_writer`), so the model runs on ONNX Runtime from the packaged weights
alone: no torch, no transformers, not even the ``onnx`` package. The graph's inputs and output
are those of the former torch.onnx export (``input_ids``, ``attention_mask``,
``token_type_ids`` in, ``hidden`` out, every tensor batch by tokens), and
tests/embed/test_minilm_vectors.py checks its vectors against sentence-transformers' own.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np

from membot.embed import onnx_writer

# LayerNormalization is an ONNX operator from opset 17 on; every ONNX Runtime membot takes
# (1.20 and later) runs it.
OPSET = 17
IR_VERSION = 8  # the IR of opset 17, which every ONNX Runtime from 1.14 reads
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
Weights = dict[str, np.ndarray]


def read_safetensors(path: Path) -> Weights:
    """The tensors of a ``.safetensors`` file: an 8-byte little-endian header length, a JSON
    header of names, dtypes, shapes and byte offsets, then the raw little-endian data."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    start = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] not in _DTYPES:
            continue
        begin, end = entry["data_offsets"]
        dtype = np.dtype(_DTYPES[entry["dtype"]]).newbyteorder("<")
        array = np.frombuffer(
            data, dtype=dtype, count=(end - begin) // dtype.itemsize, offset=start + begin
        )
        tensors[name] = array.reshape(entry["shape"])
    return tensors


class GraphWriter:
    """Nodes and weights of the graph being written, each output named after its step."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.initializers: list[bytes] = []

    def weight(self, name: str, value: np.ndarray) -> str:
        # ascontiguousarray makes a scalar an array of one, as the file has had it from the
        # start (onnx's numpy_helper was handed it so): Add and Mul broadcast it all the same.
        self.initializers.append(onnx_writer.tensor(name, np.ascontiguousarray(value)))
        return name

    def op(
        self, op_type: str, inputs: list[str], name: str, **attributes: onnx_writer.Attribute
    ) -> str:
        self.nodes.append(onnx_writer.node(op_type, inputs, [name], name, **attributes))
        return name


def _linear(graph: GraphWriter, x: str, weights: Weights, prefix: str) -> str:
    """``x @ W.T + b`` of a torch Linear (its weight stored as out by in)."""
    w = graph.weight(f"{prefix}.weight_t", weights[f"{prefix}.weight"].T)
    b = graph.weight(f"{prefix}.bias", weights[f"{prefix}.bias"])
    return graph.op("Add", [graph.op("MatMul", [x, w], f"{prefix}.matmul"), b], f"{prefix}.out")


def _layer_norm(graph: GraphWriter, x: str, weights: Weights, prefix: str, epsilon: float) -> str:
    scale = graph.weight(f"{prefix}.weight", weights[f"{prefix}.weight"])
    bias = graph.weight(f"{prefix}.bias", weights[f"{prefix}.bias"])
    return graph.op(
        "LayerNormalization", [x, scale, bias], f"{prefix}.out", axis=-1, epsilon=epsilon
    )


def _embeddings(graph: GraphWriter, weights: Weights, epsilon: float) -> str:
    """Word + position + token-type embeddings of each token, then a LayerNorm."""
    prefix = "embeddings"
    words = graph.op(
        "Gather",
        [graph.weight("word_embeddings", weights[f"{prefix}.word_embeddings.weight"]), "input_ids"],
        "embeddings.words",
    )
    # The first rows of the position table, as many as there are tokens: a Slice (ONNX
    # Runtime 1.27 rewrote the Gather of a Range into a Slice of scalars, which it then refused).
    tokens = graph.op("Shape", ["input_ids"], "embeddings.tokens", start=1, end=2)
    zero = graph.weight("zero", np.array([0], np.int64))
    table = graph.weight("position_embeddings", weights[f"{prefix}.position_embeddings.weight"])
    by_position = graph.op("Slice", [table, zero, tokens, zero], "embeddings.positions")
    types = graph.weight("token_type_embeddings", weights[f"{prefix}.token_type_embeddings.weight"])
    by_type = graph.op("Gather", [types, "token_type_ids"], "embeddings.types")
    summed = graph.op(
        "Add", [graph.op("Add", [words, by_position], "embeddings.sum1"), by_type], "embeddings.sum"
    )
    return _layer_norm(graph, summed, weights, f"{prefix}.LayerNorm", epsilon)


def _additive_mask(graph: GraphWriter) -> str:
    """0 where a key token is real, the float32 minimum where it is padding (as transformers
    does), shaped batch by 1 by 1 by tokens to add to every head's scores. Written in
    transformers' order (unsqueeze twice, cast, 1 - mask, times the minimum), which ONNX
    Runtime's offline BERT optimizer (onnxruntime.transformers) recognises as a mask."""
    row = graph.op(
        "Unsqueeze", ["attention_mask", graph.weight("axis_1", np.array([1], np.int64))], "mask.3d"
    )
    full = graph.op("Unsqueeze", [row, graph.weight("axis_2", np.array([2], np.int64))], "mask.4d")
    real = graph.op("Cast", [full], "mask.float", to=1)  # 1: FLOAT
    padding = graph.op(
        "Sub", [graph.weight("one_f", np.array(1.0, np.float32)), real], "mask.padding"
    )
    lowest = graph.weight("lowest", np.array(np.finfo(np.float32).min, np.float32))
    return graph.op("Mul", [padding, lowest], "mask.additive")


def _self_attention(
    graph: GraphWriter, x: str, mask: str, weights: Weights, prefix: str, heads: int, width: int
) -> str:
    """Multi-head scaled dot-product attention over the real tokens; batch by tokens by hidden."""
    head_width = width // heads
    split = graph.weight(f"{prefix}.split", np.array([0, 0, heads, head_width], np.int64))

    def heads_of(name: str, permutation: list[int]) -> str:
        projected = _linear(graph, x, weights, f"{prefix}.self.{name}")
        shaped = graph.op("Reshape", [projected, split], f"{prefix}.{name}.heads")
        return graph.op("Transpose", [shaped], f"{prefix}.{name}.t", perm=permutation)

    query = heads_of("query", [0, 2, 1, 3])  # batch, head, token, head_width
    key = heads_of("key", [0, 2, 3, 1])  # batch, head, head_width, token
    value = heads_of("value", [0, 2, 1, 3])
    scores = graph.op("MatMul", [query, key], f"{prefix}.scores")
    scale = graph.weight(f"{prefix}.scale", np.array(math.sqrt(head_width), np.float32))
    scaled = graph.op("Div", [scores, scale], f"{prefix}.scaled")
    masked = graph.op("Add", [scaled, mask], f"{prefix}.masked")
    probabilities = graph.op("Softmax", [masked], f"{prefix}.probabilities", axis=-1)
    context = graph.op("MatMul", [probabilities, value], f"{prefix}.context")
    merged = graph.op("Transpose", [context], f"{prefix}.context.t", perm=[0, 2, 1, 3])
    joined = graph.op(
        "Reshape",
        [merged, graph.weight(f"{prefix}.join", np.array([0, 0, width], np.int64))],
        f"{prefix}.joined",
    )
    return _linear(graph, joined, weights, f"{prefix}.output.dense")


def _gelu(graph: GraphWriter, x: str, prefix: str) -> str:
    """``x * 0.5 * (1 + erf(x / sqrt 2))``, the exact GELU BERT uses."""
    root2 = graph.weight(f"{prefix}.sqrt2", np.array(math.sqrt(2.0), np.float32))
    half = graph.weight(f"{prefix}.half", np.array(0.5, np.float32))
    one = graph.weight(f"{prefix}.one", np.array(1.0, np.float32))
    erf = graph.op("Erf", [graph.op("Div", [x, root2], f"{prefix}.div")], f"{prefix}.erf")
    plus = graph.op("Add", [erf, one], f"{prefix}.plus")
    return graph.op("Mul", [graph.op("Mul", [x, plus], f"{prefix}.mul"), half], f"{prefix}.out")


def _layer(
    graph: GraphWriter, x: str, mask: str, weights: Weights, index: int, config: dict[str, Any]
) -> str:
    prefix = f"encoder.layer.{index}"
    epsilon = float(config["layer_norm_eps"])
    attended = _self_attention(
        graph,
        x,
        mask,
        weights,
        f"{prefix}.attention",
        config["num_attention_heads"],
        config["hidden_size"],
    )
    x = _layer_norm(
        graph,
        graph.op("Add", [attended, x], f"{prefix}.attention.residual"),
        weights,
        f"{prefix}.attention.output.LayerNorm",
        epsilon,
    )
    inner = _gelu(
        graph, _linear(graph, x, weights, f"{prefix}.intermediate.dense"), f"{prefix}.gelu"
    )
    out = _linear(graph, inner, weights, f"{prefix}.output.dense")
    return _layer_norm(
        graph,
        graph.op("Add", [out, x], f"{prefix}.output.residual"),
        weights,
        f"{prefix}.output.LayerNorm",
        epsilon,
    )


def read_bert(model_dir: Path) -> tuple[dict[str, Any], Weights]:
    """The configuration and weights (float32, names without ``bert.``) of the BERT model
    in ``model_dir``."""
    config = json.loads((model_dir / "config.json").read_text())
    if config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"{model_dir} holds no BERT encoder with GELU: {config.get('model_type')}")
    weights = {
        name.removeprefix("bert."): value.astype(np.float32) if value.dtype.kind == "f" else value
        for name, value in read_safetensors(model_dir / "model.safetensors").items()
    }
    return config, weights


def write_encoder(graph: GraphWriter, config: dict[str, Any], weights: Weights) -> None:
    """The encoder's nodes and weights, from the ``INPUTS`` to its output ``hidden``."""
    x = _embeddings(graph, weights, float(config["layer_norm_eps"]))
    mask = _additive_mask(graph)
    for index in range(int(config["num_hidden_layers"])):
        x = _layer(graph, x, mask, weights, index, config)
    graph.op("Identity", [x], "hidden")


def build_bert_onnx(model_dir: Path, target: Path) -> Path:
    """Write the encoder of the BERT model in ``model_dir`` (``config.json`` and
    ``model.safetensors``) as an ONNX file at ``target``; the caller renames it into place."""
    config, weights = read_bert(model_dir)
    graph = GraphWriter()
    write_encoder(graph, config, weights)
    axes = ["batch", "tokens"]
    inputs = [onnx_writer.tensor_value_info(name, onnx_writer.INT64, axes) for name in INPUTS]
    output = onnx_writer.tensor_value_info(
        "hidden", onnx_writer.FLOAT, [*axes, int(config["hidden_size"])]
    )
    body = onnx_writer.graph(graph.nodes, "bert_encoder", inputs, [output], graph.initializers)
    target.write_bytes(
        onnx_writer.model(body, ir_version=IR_VERSION, opset=OPSET, producer_name="membot")
    )
    return target
