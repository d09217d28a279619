"""membot writes the bundled MiniLM's ONNX file itself (membot.embed.onnx_writer): the bytes
run on ONNX Runtime without the onnx package, and where onnx is installed they are the model
onnx.helper builds, byte for byte and node for node.

A BERT of two layers and hidden size 8 with random weights stands in for MiniLM here (fast);
tests/embed/test_minilm_vectors.py checks the real model's vectors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from membot.embed import bert_graph
from membot.embed.bert_graph import GraphWriter, build_bert_onnx, read_bert, write_encoder
from membot.embed.onnx_minilm import bundled_minilm_path

HIDDEN, HEADS, LAYERS, INNER, VOCABULARY, POSITIONS = 8, 2, 2, 16, 30, 12


def bert_weights(generator: np.random.Generator) -> dict[str, np.ndarray]:
    def matrix(*shape: int) -> np.ndarray:
        return generator.standard_normal(shape).astype(np.float32) * 0.5

    weights = {
        "embeddings.word_embeddings.weight": matrix(VOCABULARY, HIDDEN),
        "embeddings.position_embeddings.weight": matrix(POSITIONS, HIDDEN),
        "embeddings.token_type_embeddings.weight": matrix(2, HIDDEN),
        "embeddings.position_ids": np.arange(POSITIONS, dtype=np.int64)[None],
    }
    linears = {
        "attention.self.query": (HIDDEN, HIDDEN),
        "attention.self.key": (HIDDEN, HIDDEN),
        "attention.self.value": (HIDDEN, HIDDEN),
        "attention.output.dense": (HIDDEN, HIDDEN),
        "intermediate.dense": (INNER, HIDDEN),
        "output.dense": (HIDDEN, INNER),
    }
    norms = ["embeddings.LayerNorm"]
    for layer in range(LAYERS):
        prefix = f"encoder.layer.{layer}"
        for name, (out, into) in linears.items():
            weights[f"{prefix}.{name}.weight"] = matrix(out, into)
            weights[f"{prefix}.{name}.bias"] = matrix(out)
        norms += [f"{prefix}.attention.output.LayerNorm", f"{prefix}.output.LayerNorm"]
    for norm in norms:
        weights[f"{norm}.weight"] = 1 + matrix(HIDDEN)
        weights[f"{norm}.bias"] = matrix(HIDDEN)
    return {f"bert.{name}": value for name, value in weights.items()}  # as BertModel saves them


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    kinds = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header, offset = {}, 0
    for name, value in tensors.items():
        header[name] = {
            "dtype": kinds[value.dtype],
            "shape": list(value.shape),
            "data_offsets": [offset, offset + value.nbytes],
        }
        offset += value.nbytes
    encoded = json.dumps(header).encode()
    data = b"".join(value.tobytes() for value in tensors.values())
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + data)


@pytest.fixture
def tiny_bert(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-bert"
    folder.mkdir()
    config = {
        "model_type": "bert",
        "hidden_act": "gelu",
        "hidden_size": HIDDEN,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "layer_norm_eps": 1e-12,
    }
    (folder / "config.json").write_text(json.dumps(config))
    write_safetensors(folder / "model.safetensors", bert_weights(np.random.default_rng(29)))
    return folder


def tokens(batch: int = 3, width: int = 7) -> dict[str, np.ndarray]:
    ids = np.random.default_rng(1).integers(0, VOCABULARY, (batch, width), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1, 4:] = 0  # a padded row
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def test_the_written_model_runs_on_onnx_runtime(tiny_bert: Path, tmp_path: Path) -> None:
    import onnxruntime

    path = build_bert_onnx(tiny_bert, tmp_path / "tiny.onnx")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [value.name for value in session.get_inputs()] == list(bert_graph.INPUTS)
    assert session.get_inputs()[0].shape == ["batch", "tokens"]
    assert session.get_outputs()[0].shape == ["batch", "tokens", HIDDEN]
    feeds = tokens()
    (hidden,) = session.run(None, feeds)
    assert hidden.shape == (3, 7, HIDDEN) and hidden.dtype == np.float32
    assert np.isfinite(hidden).all()
    # padding changes nothing in the real tokens' vectors
    short = {name: value[1:2, :4] for name, value in feeds.items()}
    np.testing.assert_allclose(session.run(None, short)[0][0], hidden[1, :4], atol=1e-5)


class HelperGraphWriter(GraphWriter):
    """The graph as onnx.helper builds it: how membot wrote the file before onnx left the
    core."""

    def weight(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str, **attributes: object) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attributes))
        return name


def helper_model(model_dir: Path):
    from onnx import TensorProto, helper

    config, weights = read_bert(model_dir)
    graph = HelperGraphWriter()
    write_encoder(graph, config, weights)
    axes = ["batch", "tokens"]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, axes) for name in bert_graph.INPUTS
    ]
    output = helper.make_tensor_value_info(
        "hidden", TensorProto.FLOAT, [*axes, int(config["hidden_size"])]
    )
    model = helper.make_model(
        helper.make_graph(graph.nodes, "bert_encoder", inputs, [output], graph.initializers),
        opset_imports=[helper.make_opsetid("", bert_graph.OPSET)],
        producer_name="membot",
    )
    model.ir_version = bert_graph.IR_VERSION
    return model


def test_the_bytes_are_the_model_onnx_helper_builds(tiny_bert: Path, tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx", reason="the comparison needs membot[int8]")
    ours = build_bert_onnx(tiny_bert, tmp_path / "tiny.onnx").read_bytes()
    model = onnx.load_from_string(ours)
    onnx.checker.check_model(model, full_check=True)
    reference = helper_model(tiny_bert)
    assert len(model.graph.node) == len(reference.graph.node) > 50
    for node, expected in zip(model.graph.node, reference.graph.node, strict=True):
        assert node == expected, f"node {expected.name}"
    for tensor, expected in zip(model.graph.initializer, reference.graph.initializer, strict=True):
        assert tensor == expected, f"initializer {expected.name}"
    assert model.graph.input == reference.graph.input
    assert model.graph.output == reference.graph.output
    assert model == reference
    assert ours == reference.SerializeToString()


@pytest.mark.slow
def test_the_bundled_minilm_file_is_the_one_onnx_helper_built(tmp_path: Path) -> None:
    """The same file as before onnx left the core, so EXPORT_VERSION stays and the files
    already in users' caches stay valid."""
    pytest.importorskip("onnx", reason="the comparison needs membot[int8]")
    model_dir = bundled_minilm_path()
    ours = build_bert_onnx(model_dir, tmp_path / "minilm.onnx").read_bytes()
    assert ours == helper_model(model_dir).SerializeToString()


@pytest.mark.slow
def test_a_core_install_asking_for_minilm_int8_is_told_the_extra(tmp_path: Path) -> None:
    """Without onnx (pip install membot), minilm still builds and runs; minilm-int8 names
    its extra."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["onnx"] = None  # as in a core install: import onnx fails
        from pathlib import Path
        from membot import ConfigError
        from membot.embed import OnnxMiniLMEmbedder
        folder = Path({str(tmp_path / "models")!r})
        assert OnnxMiniLMEmbedder(folder).embed(["hello"]).shape == (1, 384)
        try:
            OnnxMiniLMEmbedder(folder, quantized=True).embed(["hello"])
        except ConfigError as error:
            print(error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "minilm-int8" in done.stdout and "pip install 'membot[int8]'" in done.stdout
    assert sorted(path.name for path in (tmp_path / "models").iterdir()) == [
        "all-MiniLM-L6-v2.v2.onnx"
    ]
