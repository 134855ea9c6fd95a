"""Tiny random-weight decoder LLMs as onnxruntime-genai model folders, for npugate's generation tests.

Imported by scripts/make-test-models (which runs in the venv); no download. Each folder holds a
`genai_config.json` in onnxruntime-genai's format (src/config.h / config.cpp of
microsoft/onnxruntime-genai: `model.decoder` with `inputs`/`outputs` name templates, and for
multi-graph models `model.decoder.pipeline`, each graph with `filename`, `inputs`, `outputs`,
`run_on_prompt`, `run_on_token_gen`) and the graphs it names:

  tinyllm/             the genai `decoder` layout: one graph with a dynamic KV cache —
                       input_ids/attention_mask/position_ids (int64), past_key_values.%d.key/value
                       [1, kv_heads, past, head_size] → logits [1, seq, vocab], present.%d.key/value
                       [1, kv_heads, past + seq, head_size]; 2 layers, learned positions, RMS norm, SiLU MLP
  tinyllm_qnn/         the static-shape layout for QNN (`decoder-pipeline`): a prompt processor
                       (`prompt.onnx`, 8 tokens at a time, run on the prompt only) and a token
                       generator (`token.onnx`, 1 token, run on generated tokens only) with the same
                       weights, int32 ids and positions, and a static KV cache of the context length
                       (32) that each graph updates in place by position (past_present_share_buffer)
  tinyllm_qnn_fallback/  tinyllm_qnn whose token generator negates its int32 positions twice (an
                       identity on the CPU): Neg on int32 is what Qualcomm's HTP rejects, so the
                       decode graph alone leaves two nodes to the CPU
  tinyllm_qnn_v68/     tinyllm_qnn whose token generator is quantized to uint8 QDQ (onnxruntime's QNN
                       QDQ config, seeded calibration) while its prompt processor stays float: v68
                       (SM8350) has no float HTP, so the prompt graph fails to compile for it while
                       the token graph compiles; on v73 and newer both compile
"""
import json
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]
VOCAB = 97
HIDDEN = 32
HEADS = 2
HEAD_SIZE = HIDDEN // HEADS
LAYERS = 2
FFN = 64


class Builder:
    """Collects named nodes and initializers; every node gets a unique name."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.inits = []
        self.count = 0

    def node(self, op, inputs, name, **attrs):
        self.count += 1
        out = f"{name}_out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name, shape, scale):
        return self.const(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))


def weights(seed):
    """The model's weights by name (shared by every graph of a folder)."""
    rng = np.random.default_rng(seed)
    w = {"embed": (rng.standard_normal((VOCAB, HIDDEN)) * 0.5).astype(np.float32)}
    w["pos_embed"] = (rng.standard_normal((64, HIDDEN)) * 0.1).astype(np.float32)
    for layer in range(LAYERS):
        for name, shape in [("wq", (HIDDEN, HIDDEN)), ("wk", (HIDDEN, HIDDEN)), ("wv", (HIDDEN, HIDDEN)), ("wo", (HIDDEN, HIDDEN)),
                            ("w1", (HIDDEN, FFN)), ("w2", (FFN, HIDDEN))]:
            w[f"l{layer}.{name}"] = (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
        w[f"l{layer}.norm1"] = np.ones(HIDDEN, np.float32)
        w[f"l{layer}.norm2"] = np.ones(HIDDEN, np.float32)
    w["final_norm"] = np.ones(HIDDEN, np.float32)
    w["lm_head"] = (rng.standard_normal((HIDDEN, VOCAB)) / np.sqrt(HIDDEN)).astype(np.float32)
    return w


def rms_norm(b, x, gain, name):
    sq = b.node("Mul", [x, x], f"{name}/sq")
    mean = b.node("ReduceMean", [sq], f"{name}/mean", axes=[-1], keepdims=1)
    eps = b.node("Add", [mean, "eps"], f"{name}/eps")
    root = b.node("Sqrt", [eps], f"{name}/sqrt")
    scaled = b.node("Div", [x, root], f"{name}/div")
    return b.node("Mul", [scaled, gain], f"{name}/gain")


def heads(b, x, w, name):
    """[1, s, hidden] @ w → [1, heads, s, head_size]."""
    proj = b.node("MatMul", [x, w], f"{name}/proj")
    split = b.node("Reshape", [proj, "heads_shape"], f"{name}/reshape")
    return b.node("Transpose", [split], f"{name}/transpose", perm=[0, 2, 1, 3])


def block(b, x, layer, bias, kv_update):
    """One transformer layer; `kv_update(layer, k, v)` returns (present_k, present_v)."""
    p = f"l{layer}"
    n = rms_norm(b, x, f"{p}.norm1", f"{p}/norm1")
    q = heads(b, n, f"{p}.wq", f"{p}/q")
    k = heads(b, n, f"{p}.wk", f"{p}/k")
    v = heads(b, n, f"{p}.wv", f"{p}/v")
    present_k, present_v = kv_update(layer, k, v)
    kt = b.node("Transpose", [present_k], f"{p}/kt", perm=[0, 1, 3, 2])
    scores = b.node("MatMul", [q, kt], f"{p}/scores")
    scaled = b.node("Mul", [scores, "attn_scale"], f"{p}/scale")
    masked = b.node("Add", [scaled, bias], f"{p}/mask")
    probs = b.node("Softmax", [masked], f"{p}/softmax", axis=-1)
    ctx = b.node("MatMul", [probs, present_v], f"{p}/context")
    merged = b.node("Transpose", [ctx], f"{p}/merge", perm=[0, 2, 1, 3])
    flat = b.node("Reshape", [merged, "hidden_shape"], f"{p}/flatten")
    attn = b.node("MatMul", [flat, f"{p}.wo"], f"{p}/o")
    x = b.node("Add", [x, attn], f"{p}/residual1")
    n2 = rms_norm(b, x, f"{p}.norm2", f"{p}/norm2")
    up = b.node("MatMul", [n2, f"{p}.w1"], f"{p}/up")
    gate = b.node("Sigmoid", [up], f"{p}/sigmoid")
    act = b.node("Mul", [up, gate], f"{p}/silu")
    down = b.node("MatMul", [act, f"{p}.w2"], f"{p}/down")
    return b.node("Add", [x, down], f"{p}/residual2")


def common_consts(b, w):
    for name, value in w.items():
        b.const(name, value)
    b.const("eps", np.array(1e-5, np.float32))
    b.const("attn_scale", np.array(1.0 / np.sqrt(HEAD_SIZE), np.float32))
    b.const("heads_shape", np.array([0, 0, HEADS, HEAD_SIZE], np.int64))
    b.const("hidden_shape", np.array([0, 0, HIDDEN], np.int64))


def head(b, x):
    n = rms_norm(b, x, "final_norm", "final_norm")
    return b.node("MatMul", [n, "lm_head"], "lm_head/matmul")


def kv_value(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def dynamic_decoder(w):
    """The genai `decoder` layout: dynamic batch, sequence and past length."""
    b = Builder(np.random.default_rng(0))
    common_consts(b, w)
    b.const("zero", np.array(0, np.int64))
    b.const("one", np.array(1, np.int64))
    b.const("total_index", np.array([1], np.int64))
    b.const("neg_big", np.array(-1e9, np.float32))
    b.const("zero_f", np.array(0.0, np.float32))
    tokens = b.node("Gather", ["embed", "input_ids"], "embed/gather")
    positions = b.node("Gather", ["pos_embed", "position_ids"], "pos_embed/gather")
    x = b.node("Add", [tokens, positions], "embed/add")
    shape = b.node("Shape", ["attention_mask"], "mask/shape")
    total = b.node("Gather", [shape, "total_index"], "mask/total", axis=0)
    total_scalar = b.node("Squeeze", [total], "mask/total_scalar")
    keys = b.node("Range", ["zero", total_scalar, "one"], "mask/key_positions")
    query = b.node("Unsqueeze", ["position_ids", "axes_1_3"], "mask/query_positions")
    b.const("axes_1_3", np.array([1, 3], np.int64))
    b.const("axes_1_2", np.array([1, 2], np.int64))
    future = b.node("Greater", [keys, query], "mask/future")
    padded = b.node("Unsqueeze", ["attention_mask", "axes_1_2"], "mask/attention")
    b.const("zero_i", np.array(0, np.int64))
    padding = b.node("Equal", [padded, "zero_i"], "mask/padding")
    hidden = b.node("Or", [future, padding], "mask/hidden")
    bias = b.node("Where", [hidden, "neg_big", "zero_f"], "mask/bias")

    def kv_update(layer, k, v):
        pk = b.node("Concat", [f"past_key_values.{layer}.key", k], f"l{layer}/present_key", axis=2)
        pv = b.node("Concat", [f"past_key_values.{layer}.value", v], f"l{layer}/present_value", axis=2)
        b.nodes.append(helper.make_node("Identity", [pk], [f"present.{layer}.key"], name=f"l{layer}/present_key_out"))
        b.nodes.append(helper.make_node("Identity", [pv], [f"present.{layer}.value"], name=f"l{layer}/present_value_out"))
        return pk, pv

    for layer in range(LAYERS):
        x = block(b, x, layer, bias, kv_update)
    logits = head(b, x)
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits_out"))
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total_sequence"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "sequence"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", VOCAB])]
    for layer in range(LAYERS):
        for kind in ("key", "value"):
            inputs.append(kv_value(f"past_key_values.{layer}.{kind}", ["batch", HEADS, "past_sequence", HEAD_SIZE]))
            outputs.append(kv_value(f"present.{layer}.{kind}", ["batch", HEADS, "total_sequence", HEAD_SIZE]))
    graph = helper.make_graph(b.nodes, "tinyllm", inputs, outputs, b.inits)
    return helper.make_model(graph, opset_imports=OPSET, producer_name="npugate-test-models", ir_version=8)


def static_decoder(w, sequence, context, name, negate_positions=False):
    """One graph of the static QNN layout: `sequence` tokens at a time over a KV cache of
    `context` positions, updated where the positions say (a one-hot scatter as arithmetic:
    Sub/Abs/Relu/MatMul, ops the HTP runs) and masked causally by position."""
    b = Builder(np.random.default_rng(0))
    common_consts(b, w)
    b.const("key_positions", np.arange(context, dtype=np.float32).reshape(1, context))
    b.const("one_f", np.array(1.0, np.float32))
    b.const("mask_scale", np.array(-1e4, np.float32))
    b.const("column", np.array([sequence, 1], np.int64))
    b.const("keep_shape", np.array([1, 1, context, 1], np.int64))
    b.const("axes_0", np.array([0], np.int64))
    tokens = b.node("Gather", ["embed", "input_ids"], "embed/gather")
    positions = b.node("Gather", ["pos_embed", "position_ids"], "pos_embed/gather")
    x = b.node("Add", [tokens, positions], "embed/add")
    pos = "position_ids"
    if negate_positions:
        once = b.node("Neg", [pos], "positions/neg1")
        pos = b.node("Neg", [once], "positions/neg2")
    posf = b.node("Cast", [pos], "positions/cast", to=TensorProto.FLOAT)
    col = b.node("Reshape", [posf, "column"], "positions/column")
    delta = b.node("Sub", ["key_positions", col], "mask/delta")
    distance = b.node("Abs", [delta], "mask/distance")
    near = b.node("Sub", ["one_f", distance], "mask/near")
    onehot = b.node("Relu", [near], "mask/onehot")
    ahead = b.node("Relu", [delta], "mask/ahead")
    future = b.node("Min", [ahead, "one_f"], "mask/future")
    bias = b.node("Mul", [future, "mask_scale"], "mask/bias")
    written = b.node("ReduceSum", [onehot, "axes_0"], "cache/written", keepdims=1)
    kept = b.node("Sub", ["one_f", written], "cache/kept")
    keep = b.node("Reshape", [kept, "keep_shape"], "cache/keep")
    scatter = b.node("Transpose", [onehot], "cache/scatter", perm=[1, 0])

    def kv_update(layer, k, v):
        out = []
        for kind, new in (("key", k), ("value", v)):
            past = f"past_key_values.{layer}.{kind}"
            old = b.node("Mul", [past, keep], f"l{layer}/{kind}_keep")
            placed = b.node("MatMul", [scatter, new], f"l{layer}/{kind}_place")
            b.nodes.append(helper.make_node("Add", [old, placed], [f"present.{layer}.{kind}"], name=f"l{layer}/{kind}_update"))
            out.append(f"present.{layer}.{kind}")
        return out

    for layer in range(LAYERS):
        x = block(b, x, layer, bias, kv_update)
    logits = head(b, x)
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits_out"))
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT32, [1, sequence]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT32, [1, sequence]),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, sequence, VOCAB])]
    for layer in range(LAYERS):
        for kind in ("key", "value"):
            inputs.append(kv_value(f"past_key_values.{layer}.{kind}", [1, HEADS, context, HEAD_SIZE]))
            outputs.append(kv_value(f"present.{layer}.{kind}", [1, HEADS, context, HEAD_SIZE]))
    graph = helper.make_graph(b.nodes, name, inputs, outputs, b.inits)
    return helper.make_model(graph, opset_imports=OPSET, producer_name="npugate-test-models", ir_version=8)


def kv_names(kind):
    return [f"{kind}.{layer}.{part}" for layer in range(LAYERS) for part in ("key", "value")]


def decoder_section(filename, inputs):
    section = {
        "head_size": HEAD_SIZE,
        "hidden_size": HIDDEN,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": HEADS,
        "inputs": inputs,
        "outputs": {"logits": "logits", "present_key_names": "present.%d.key", "present_value_names": "present.%d.value"},
        "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
    }
    if filename:
        section["filename"] = filename
    return section


def genai_config(model_type, context, decoder, share_buffer):
    return {
        "model": {
            "bos_token_id": 1,
            "context_length": context,
            "decoder": decoder,
            "eos_token_id": 2,
            "pad_token_id": 0,
            "type": model_type,
            "vocab_size": VOCAB,
        },
        "search": {"do_sample": False, "max_length": context, "num_beams": 1, "past_present_share_buffer": share_buffer, "top_k": 1},
    }


def dynamic_folder():
    w = weights(11)
    inputs = {"input_ids": "input_ids", "attention_mask": "attention_mask", "position_ids": "position_ids",
              "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"}
    config = genai_config("llama", 64, decoder_section("model.onnx", inputs), False)
    return config, {"model.onnx": dynamic_decoder(w)}


def static_folder(negate_in_token_graph=False, quantize_token_graph=False):
    w = weights(12)
    context, prompt = 32, 8
    inputs = {"input_ids": "input_ids", "position_ids": "position_ids",
              "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"}
    graph_inputs = ["input_ids", "position_ids", *kv_names("past_key_values")]
    graph_outputs = ["logits", *kv_names("present")]
    pipeline = {
        "prompt-processor": {"filename": "prompt.onnx", "inputs": graph_inputs, "outputs": graph_outputs,
                             "run_on_prompt": True, "run_on_token_gen": False},
        "token-generator": {"filename": "token.onnx", "inputs": graph_inputs, "outputs": graph_outputs,
                            "run_on_prompt": False, "run_on_token_gen": True},
    }
    decoder = decoder_section(None, inputs)
    decoder["pipeline"] = [pipeline]
    config = genai_config("decoder-pipeline", context, decoder, True)
    graphs = {
        "prompt.onnx": static_decoder(w, prompt, context, "prompt_processor"),
        "token.onnx": static_decoder(w, 1, context, "token_generator", negate_positions=negate_in_token_graph),
    }
    if quantize_token_graph:
        graphs["token.onnx"] = quantized(graphs["token.onnx"], 1, context)
    return config, graphs


class Calibration:
    """Seeded calibration feeds of a static graph of `sequence` tokens (an onnxruntime
    CalibrationDataReader: random ids, consecutive positions, random KV caches)."""

    def __init__(self, sequence, context, samples=8):
        rng = np.random.default_rng(7)
        feeds = []
        for _ in range(samples):
            start = rng.integers(0, context - sequence)
            feed = {"input_ids": rng.integers(0, VOCAB, (1, sequence)).astype(np.int32),
                    "position_ids": (np.arange(sequence) + start).reshape(1, sequence).astype(np.int32)}
            for name in kv_names("past_key_values"):
                feed[name] = rng.standard_normal((1, HEADS, context, HEAD_SIZE)).astype(np.float32)
            feeds.append(feed)
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


def quantized(model, sequence, context):
    """`model` as uint8 QDQ by onnxruntime's QNN QDQ config. The logits come straight from the
    head's MatMul (no Identity): a quantized Identity before a graph output leaves its Q/DQ pair
    to the CPU."""
    from onnxruntime.quantization import QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    model = onnx.ModelProto.FromString(model.SerializeToString())
    identity = next(node for node in model.graph.node if node.name == "logits_out")
    model.graph.node.remove(identity)
    for node in model.graph.node:
        node.output[:] = ["logits" if out == identity.input[0] else out for out in node.output]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "f.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(model, src)
        config = get_qnn_qdq_config(src, Calibration(sequence, context), activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8)
        quantize(src, dst, config)
        result = onnx.load(dst)
    for index, node in enumerate(result.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{index}"
    return result


def write_all(models_dir, write_if_changed):
    """Writes every folder into `models_dir` (each file only when its bytes change)."""
    for folder, (config, graphs) in [
        ("tinyllm", dynamic_folder()),
        ("tinyllm_qnn", static_folder()),
        ("tinyllm_qnn_fallback", static_folder(negate_in_token_graph=True)),
        ("tinyllm_qnn_v68", static_folder(quantize_token_graph=True)),
    ]:
        target = os.path.join(models_dir, folder)
        os.makedirs(target, exist_ok=True)
        for name, model in graphs.items():
            onnx.checker.check_model(model)
            print(f"{folder}/{name}: {write_if_changed(os.path.join(target, name), model.SerializeToString())}")
        text = json.dumps(config, indent=4, sort_keys=True) + "\n"
        print(f"{folder}/genai_config.json: {write_if_changed(os.path.join(target, 'genai_config.json'), text.encode())}")
