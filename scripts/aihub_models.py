"""Rebuilds AI Hub's reference architectures locally, with random weights, at AI Hub's input shapes.

    python scripts/aihub_models.py OUT_DIR [MODEL ...]      (default: every model below)

Run with the Python that has torch, torchvision, timm, transformers and ultralytics (scripts/bench-aihub
uses the genai-builder venv in the npugate cache). For each AI Hub model id it writes OUT_DIR/<id>/float.onnx
(torch.onnx.export, TorchScript exporter, opset 17, seeded random weights: no download) and, for each
quantized precision AI Hub published an `onnx` row for, <precision>.onnx: onnxruntime.quantization's
QNN QDQ recipe (static, per-tensor, calibrated on 4 seeded random inputs) with 8-bit weights and 8-bit
(w8a8) or 16-bit (w8a16) activations. Also OUT_DIR/<id>/model.json: the source, the input shapes and
the files. A model whose files exist is skipped (delete its folder to rebuild). Smallest first.
"""

import json
import os
import sys
import time
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
torch.manual_seed(0)

IMAGE = [1, 3, 224, 224]
YOLO = [1, 3, 640, 640]


def tv(name, **kwargs):
    """A torchvision classification / segmentation constructor, random weights."""

    def build():
        import torchvision

        if name.startswith("fcn_"):
            return getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, aux_loss=False)
        return getattr(torchvision.models, name)(weights=None, **kwargs)

    return build


def timm_model(name):
    def build():
        import timm

        return timm.create_model(name, pretrained=False)

    return build


def hf_bert():
    """bert-base-uncased's architecture (transformers' BertConfig defaults), random weights."""
    import transformers

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False)

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return Bert()


def hf_encoder(model_class, config_class, **config):
    """A transformers text encoder at its config's defaults (the AI Hub model's architecture), random
    weights, taking token ids and an attention mask, returning the last hidden state."""

    def build():
        import transformers

        class Encoder(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))

            def forward(self, input_ids, attention_mask):
                return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        return Encoder()

    return build


def hf_vision(model_class, config_class, outputs, **config):
    """A transformers vision model at its config's defaults plus `config`, random weights, returning
    the named outputs."""

    def build():
        import transformers

        class Vision(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))

            def forward(self, pixel_values):
                result = self.model(pixel_values=pixel_values)
                return tuple(result[name] for name in outputs)

        return Vision()

    return build


def ultralytics_yolo(yaml):
    """An ultralytics YOLO built from its model yaml (random weights), its head in export mode: the
    decoded boxes and class scores (and a segmenter's mask prototypes) as AI Hub's exports give them.
    Needs the ultralytics package on the path (pip install --no-deps; scripts/bench-aihub says how)."""

    def build():
        from ultralytics import YOLO
        from ultralytics.nn.modules import Detect

        model = YOLO(yaml).model.eval()
        for module in model.modules():
            if isinstance(module, Detect):
                module.export, module.format = True, "onnx"

        class Yolo(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, image):
                return self.model(image)

        return Yolo()

    return build


# AI Hub id -> (source, constructor, inputs {name: shape}, quantized precisions with an `onnx` row).
# Shapes are info.yaml's "Input resolution"; the sources are the repositories info.yaml names (torchvision
# variants chosen by AI Hub's parameter count where the id leaves it open).
MODELS = {
    "squeezenet1_1": ("torchvision squeezenet1_1", tv("squeezenet1_1"), {"image": IMAGE}, ["w8a8"]),
    "shufflenet_v2": ("torchvision shufflenet_v2_x0_5", tv("shufflenet_v2_x0_5"), {"image": IMAGE}, ["w8a8"]),
    "mnasnet05": ("torchvision mnasnet0_5", tv("mnasnet0_5"), {"image": IMAGE}, ["w8a16"]),
    "mobilenet_v3_small": ("torchvision mobilenet_v3_small", tv("mobilenet_v3_small"), {"image": IMAGE}, []),
    "mobilenet_v2": ("torchvision mobilenet_v2", tv("mobilenet_v2"), {"image": IMAGE}, ["w8a16", "w8a8"]),
    "mobilenet_v3_large": ("torchvision mobilenet_v3_large", tv("mobilenet_v3_large"), {"image": IMAGE}, ["w8a16"]),
    "efficientnet_b0": ("torchvision efficientnet_b0", tv("efficientnet_b0"), {"image": IMAGE}, ["w8a16"]),
    "regnet_y_800mf": ("torchvision regnet_y_800mf", tv("regnet_y_800mf"), {"image": IMAGE}, ["w8a8"]),
    "googlenet": ("torchvision googlenet", tv("googlenet", aux_logits=False, init_weights=True), {"image": IMAGE}, ["w8a8"]),
    "resnet18": ("torchvision resnet18", tv("resnet18"), {"image": IMAGE}, ["w8a8"]),
    "levit": ("timm levit_128s", timm_model("levit_128s"), {"image": IMAGE}, []),
    "mobile_vit": ("timm mobilevit_s", timm_model("mobilevit_s"), {"image": IMAGE}, ["w8a16"]),
    "densenet121": ("torchvision densenet121", tv("densenet121"), {"image": IMAGE}, ["w8a16", "w8a8"]),
    "regnet": ("torchvision regnet_x_3_2gf", tv("regnet_x_3_2gf"), {"image": IMAGE}, ["w8a8"]),
    "inception_v3": ("torchvision inception_v3", tv("inception_v3", aux_logits=False, init_weights=True), {"image": IMAGE}, ["w8a8"]),
    "resnet50": ("torchvision resnet50", tv("resnet50"), {"image": IMAGE}, ["w8a8"]),
    "resnext50": ("torchvision resnext50_32x4d", tv("resnext50_32x4d"), {"image": IMAGE}, ["w8a8"]),
    "convnext_tiny": ("torchvision convnext_tiny", tv("convnext_tiny"), {"image": IMAGE}, ["w8a16"]),
    "efficientnet_b4": ("torchvision efficientnet_b4", tv("efficientnet_b4"), {"image": [1, 3, 380, 380]}, []),
    "efficientnet_v2_s": ("torchvision efficientnet_v2_s", tv("efficientnet_v2_s"), {"image": [1, 3, 384, 384]}, ["w8a16"]),
    "fcn_resnet50": ("torchvision fcn_resnet50", tv("fcn_resnet50"), {"image": IMAGE}, ["w8a8"]),
    "resnet101": ("torchvision resnet101", tv("resnet101"), {"image": IMAGE}, ["w8a8"]),
    "wideresnet50": ("torchvision wide_resnet50_2", tv("wide_resnet50_2"), {"image": IMAGE}, ["w8a8"]),
    "bert_base_uncased_hf": ("transformers BertModel (bert-base-uncased config)", hf_bert, {"input_ids": [1, 384], "attention_mask": [1, 384]}, ["w8a16"]),
    "vit": ("torchvision vit_b_16", tv("vit_b_16"), {"image": IMAGE}, ["w8a16", "w8a8"]),
    # Detection, segmentation and transformers at AI Hub's sizes (float only).
    "yolov8_det": ("ultralytics yolov8n.yaml", ultralytics_yolo("yolov8n.yaml"), {"image": YOLO}, []),
    "yolov11_det": ("ultralytics yolo11n.yaml", ultralytics_yolo("yolo11n.yaml"), {"image": YOLO}, []),
    "yolov11_seg": ("ultralytics yolo11n-seg.yaml", ultralytics_yolo("yolo11n-seg.yaml"), {"image": YOLO}, []),
    "segformer_base": (
        "transformers SegformerForSemanticSegmentation (b0 config, 150 labels)",
        hf_vision("SegformerForSemanticSegmentation", "SegformerConfig", ["logits"], num_labels=150),
        {"pixel_values": [1, 3, 512, 512]},
        [],
    ),
    "depth_anything": (
        "transformers DepthAnythingForDepthEstimation (small config)",
        hf_vision("DepthAnythingForDepthEstimation", "DepthAnythingConfig", ["predicted_depth"]),
        {"pixel_values": [1, 3, 518, 518]},
        [],
    ),
    "detr_resnet50": (
        "transformers DetrForObjectDetection (ResNet-50 backbone)",
        hf_vision(
            "DetrForObjectDetection",
            "DetrConfig",
            ["logits", "pred_boxes"],
            use_timm_backbone=False,
            use_pretrained_backbone=False,
        ),
        {"pixel_values": [1, 3, 480, 480]},
        [],
    ),
    "beit": (
        "transformers BeitForImageClassification (base, relative position bias)",
        hf_vision("BeitForImageClassification", "BeitConfig", ["logits"], use_relative_position_bias=True),
        {"pixel_values": IMAGE},
        [],
    ),
    "distil_bert_base_uncased_hf": (
        "transformers DistilBertModel (distilbert-base-uncased config)",
        hf_encoder("DistilBertModel", "DistilBertConfig"),
        {"input_ids": [1, 384], "attention_mask": [1, 384]},
        [],
    ),
    "albert_base_v2_hf": (
        "transformers AlbertModel (albert-base-v2 config)",
        hf_encoder("AlbertModel", "AlbertConfig", hidden_size=768, num_attention_heads=12, intermediate_size=3072),
        {"input_ids": [1, 384], "attention_mask": [1, 384]},
        [],
    ),
    "electra_bert_base_discrim_google": (
        "transformers ElectraModel (electra-base-discriminator config)",
        hf_encoder("ElectraModel", "ElectraConfig", embedding_size=768, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
        {"input_ids": [1, 384], "attention_mask": [1, 384]},
        [],
    ),
    "mobile_bert_uncased_google": (
        "transformers MobileBertModel (mobilebert-uncased config)",
        hf_encoder("MobileBertModel", "MobileBertConfig"),
        {"input_ids": [1, 384], "attention_mask": [1, 384]},
        [],
    ),
}


def example_inputs(inputs, rng):
    """Seeded random inputs: images ~ N(0,1); token ids in [0, 30000) (the smallest vocabulary, ALBERT's); attention masks of ones."""
    out = {}
    for name, shape in inputs.items():
        if name == "input_ids":
            out[name] = rng.integers(0, 30000, size=shape, dtype=np.int64)
        elif name == "attention_mask":
            out[name] = np.ones(shape, dtype=np.int64)
        else:
            out[name] = rng.standard_normal(shape).astype(np.float32)
    return out


def export_float(model_id, build, inputs, path):
    torch.manual_seed(0)
    module = build().eval()
    sample = example_inputs(inputs, np.random.default_rng(0))
    args = tuple(torch.from_numpy(sample[name]) for name in inputs)
    with torch.no_grad():
        torch.onnx.export(
            module, args, path, dynamo=False, opset_version=17, input_names=list(inputs), output_names=["output"]
        )


class RandomReader:
    """Calibration data for onnxruntime.quantization: 4 seeded random inputs."""

    def __init__(self, inputs):
        rng = np.random.default_rng(1)
        self.batches = iter([example_inputs(inputs, rng) for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


def quantize(float_path, precision, inputs, path):
    from onnxruntime.quantization import QuantType, quantize as ort_quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config, qnn_preprocess_model

    activations = {"w8a8": QuantType.QUInt8, "w8a16": QuantType.QUInt16}[precision]
    prepared = path + ".pre.onnx"
    if not qnn_preprocess_model(float_path, prepared):
        prepared = float_path
    config = get_qnn_qdq_config(
        prepared, RandomReader(inputs), activation_type=activations, weight_type=QuantType.QUInt8
    )
    ort_quantize(prepared, path, config)
    if prepared != float_path:
        os.remove(prepared)


def build_one(out_dir, model_id):
    source, build, inputs, quantized = MODELS[model_id]
    folder = os.path.join(out_dir, model_id)
    os.makedirs(folder, exist_ok=True)
    files = {"float": os.path.join(folder, "float.onnx")}
    files.update({p: os.path.join(folder, f"{p}.onnx") for p in quantized})
    if all(os.path.exists(f) for f in files.values()):
        print(f"{model_id}: unchanged", file=sys.stderr)
        return
    start = time.time()
    if not os.path.exists(files["float"]):
        export_float(model_id, build, inputs, files["float"] + ".tmp")
        os.replace(files["float"] + ".tmp", files["float"])
    for precision in quantized:
        if not os.path.exists(files[precision]):
            quantize(files["float"], precision, inputs, files[precision] + ".tmp")
            os.replace(files[precision] + ".tmp", files[precision])
    meta = {
        "model": model_id,
        "source": source,
        "weights": "random (torch.manual_seed(0))",
        "inputs": inputs,
        "files": {p: os.path.basename(f) for p, f in files.items()},
    }
    with open(os.path.join(folder, "model.json"), "w") as handle:
        json.dump(meta, handle, indent=2)
    print(f"{model_id}: built {', '.join(files)} in {time.time() - start:.0f} s", file=sys.stderr)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: aihub_models.py OUT_DIR [MODEL ...]")
    out_dir = sys.argv[1]
    wanted = sys.argv[2:] or list(MODELS)
    unknown = [m for m in wanted if m not in MODELS]
    if unknown:
        sys.exit(f"aihub_models.py: unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    torch.set_num_threads(1)
    # nn.MultiheadAttention's inference fast path is one fused op the ONNX exporter does not know.
    torch.backends.mha.set_fastpath_enabled(False)
    for model_id in wanted:
        build_one(out_dir, model_id)


if __name__ == "__main__":
    main()
