"""ONNX model files written without the ``onnx`` package: the protobuf wire format of the few
messages :mod:`membot.embed.bert_graph` needs, and nothing more.

An ONNX file is one serialised ``ModelProto`` (onnx/onnx.proto). Protobuf's wire format is a
run of fields, each a key (field number times 8, plus the wire type) then its value: a varint
for integers, four little-endian bytes for a float, a length and the bytes for strings, bytes
and nested messages. The field numbers below are onnx.proto's. Fields are written in the order
of their numbers, as protobuf's own serialiser writes them, so a model written here is byte for
byte the one ``onnx.helper`` builds (tests/embed/test_onnx_writer.py checks both). Leaving the
``onnx`` package out of ``pip install membot`` saves its 31 MB and its bytecode.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np

# TensorProto.DataType
FLOAT = 1
INT64 = 7
_DATA_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}
# AttributeProto.AttributeType
_ATTRIBUTE_FLOAT, _ATTRIBUTE_INT, _ATTRIBUTE_INTS = 1, 2, 7
# An attribute's value: an int, a float or a list of ints (all this graph uses).
Attribute = int | float | Sequence[int]
# Wire types
_VARINT, _LENGTH, _FIXED32 = 0, 2, 5


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int64 is its two's complement: ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3 | _VARINT) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _varint(field << 3 | _LENGTH) + _varint(len(value)) + value


def _string(field: int, value: str) -> bytes:
    return _bytes(field, value.encode())


def _messages(field: int, messages: Iterable[bytes]) -> bytes:
    return b"".join(_bytes(field, message) for message in messages)


def _attribute(name: str, value: Attribute) -> bytes:
    """AttributeProto: name 1, f 2, i 3, ints 8 (one field per int: proto2, not packed),
    type 20."""
    if isinstance(value, bool) or not isinstance(value, int | float | list | tuple):
        raise TypeError(f"attribute {name}: {value!r} is not an int, a float or a list of ints")
    if isinstance(value, float):
        body, kind = _varint(2 << 3 | _FIXED32) + struct.pack("<f", value), _ATTRIBUTE_FLOAT
    elif isinstance(value, int):
        body, kind = _int(3, value), _ATTRIBUTE_INT
    else:
        body, kind = b"".join(_int(8, item) for item in value), _ATTRIBUTE_INTS
    return _string(1, name) + body + _int(20, kind)


def node(
    op_type: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    name: str,
    **attributes: Attribute,
) -> bytes:
    """NodeProto: input 1, output 2, name 3, op_type 4, attribute 5 (sorted by name, as
    onnx.helper.make_node sorts them); the default domain, so no domain field."""
    return (
        b"".join(_string(1, value) for value in inputs)
        + b"".join(_string(2, value) for value in outputs)
        + _string(3, name)
        + _string(4, op_type)
        + _messages(5, (_attribute(key, attributes[key]) for key in sorted(attributes)))
    )


def tensor(name: str, array: np.ndarray) -> bytes:
    """TensorProto: dims 1 (one field per dim), data_type 2, name 8, raw_data 9 (the values,
    little-endian, in C order)."""
    if array.dtype not in _DATA_TYPES:
        raise TypeError(f"tensor {name}: no ONNX type written for {array.dtype}")
    data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
    return (
        b"".join(_int(1, size) for size in array.shape)
        + _int(2, _DATA_TYPES[array.dtype])
        + _string(8, name)
        + _bytes(9, data)
    )


def tensor_value_info(name: str, data_type: int, shape: Sequence[int | str]) -> bytes:
    """ValueInfoProto (name 1, type 2) of a tensor: TypeProto.tensor_type 1, whose
    elem_type 1 and shape 2; each TensorShapeProto.dim 1 a dim_value 1 or a named dim_param 2."""
    dims = [_int(1, size) if isinstance(size, int) else _string(2, size) for size in shape]
    tensor_type = _int(1, data_type) + _bytes(2, _messages(1, dims))
    return _string(1, name) + _bytes(2, _bytes(1, tensor_type))


def graph(
    nodes: Sequence[bytes],
    name: str,
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    initializers: Sequence[bytes],
) -> bytes:
    """GraphProto: node 1, name 2, initializer 5, input 11, output 12."""
    return (
        _messages(1, nodes)
        + _string(2, name)
        + _messages(5, initializers)
        + _messages(11, inputs)
        + _messages(12, outputs)
    )


def model(graph_bytes: bytes, *, ir_version: int, opset: int, producer_name: str) -> bytes:
    """ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8 (one
    OperatorSetIdProto: domain 1, the default domain written as "", version 2)."""
    opset_import = _string(1, "") + _int(2, opset)
    return (
        _int(1, ir_version)
        + _string(2, producer_name)
        + _bytes(7, graph_bytes)
        + _bytes(8, opset_import)
    )
