"""Which op family module registers each TFLite op (custom ops by their custom code): a conversion imports only the
families its model uses (table.load), so a cold `convert` of a small model does not read the whole op table.
tests/test_opspec.py checks this index against what importing each family really registers."""
from __future__ import annotations

FAMILIES: dict[str, tuple[str, ...]] = {
    "control_flow": ("WHILE", "IF"),
    "conv": ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"),
    "custom_mediapipe": ("Convolution2DTransposeBias", "MaxPoolingWithArgmax2D", "MaxUnpooling2D", "TransformLandmarks",
                         "TransformTensorBilinear", "TransformTensor", "Landmarks2TransformMatrix"),
    "elementwise": ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "POW", "LESS", "LESS_EQUAL", "GREATER",
                    "GREATER_EQUAL", "EQUAL", "LOGICAL_AND", "LOGICAL_OR", "ABS", "NEG", "EXP", "LOG", "SQRT", "SIN",
                    "COS", "FLOOR", "CEIL", "RELU", "LOGISTIC", "TANH", "HARD_SWISH", "LOGICAL_NOT", "SIGN", "ROUND",
                    "RSQRT", "ELU", "SELECT", "SELECT_V2", "PRELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1",
                    "LEAKY_RELU", "SQUARE", "SQUARED_DIFFERENCE", "NOT_EQUAL", "GELU", "FLOOR_MOD", "FLOOR_DIV",
                    "ATAN2", "ADD_N", "BITWISE_XOR", "RIGHT_SHIFT", "ZEROS_LIKE", "BUCKETIZE", "FAKE_QUANT"),
    "indexing": ("GATHER_ND", "EMBEDDING_LOOKUP", "SCATTER_ND", "SPARSE_TO_DENSE", "SEGMENT_SUM",
                 "UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN",
                 "DYNAMIC_UPDATE_SLICE", "FILL", "BROADCAST_TO", "BROADCAST_ARGS", "RANGE", "ONE_HOT", "WHERE",
                 "UNIQUE", "TOPK_V2", "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", "CUMSUM", "REVERSE_V2",
                 "REVERSE_SEQUENCE", "RANK", "MATRIX_DIAG", "MATRIX_SET_DIAG", "DENSIFY", "EMBEDDING_LOOKUP_SPARSE"),
    "nn": ("SOFTMAX", "LOG_SOFTMAX", "FULLY_CONNECTED", "BATCH_MATMUL"),
    "pool": ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"),
    "quant": ("QUANTIZE", "DEQUANTIZE"),
    "reduce": ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL", "ARG_MAX",
               "ARG_MIN", "REDUCE_WINDOW"),
    "sequence": ("UNIDIRECTIONAL_SEQUENCE_LSTM", "LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN",
                 "RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "SVDF"),
    "shape": ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "PACK", "UNPACK", "CONCATENATION", "PAD", "PADV2", "MIRROR_PAD",
              "STRIDED_SLICE", "SLICE", "SPLIT", "SPLIT_V", "TRANSPOSE", "GATHER", "SHAPE", "TILE", "CAST", "DILATE",
              "BITCAST"),
    "signal": ("RFFT2D", "REAL", "IMAG", "COMPLEX_ABS"),
    "spatial": ("DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "LOCAL_RESPONSE_NORMALIZATION", "L2_NORMALIZATION",
                "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "CONV_3D", "CONV_3D_TRANSPOSE"),
    "variables": ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"),
}

FAMILY = {name: family for family, names in FAMILIES.items() for name in names}     # op -> its family module
