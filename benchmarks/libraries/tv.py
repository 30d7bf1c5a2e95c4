"""torchvision: classification, detection (eval and train), segmentation, video and optical flow models.

Every model is built with ``weights=None`` (and ``weights_backbone=None``), few classes, and
small inputs; detectors resize their images to ``min_size=64, max_size=96``. Detectors run in
eval mode, in train mode (images and targets in, losses out), and in train mode with
``_skip_resize=True`` (the images kept as they are), which gets past the random choice of a
training size that every detector's transform makes from data (``transform.py:176``).
"""

from __future__ import annotations

import functools
import inspect

import torch

from .harness import BATCH, Built, Entry, space

NUM_CLASSES = 5

# (name, keyword arguments, image side): a sample of every family of classifiers
CLASSIFIERS = [
    ("alexnet", {}, 64),
    ("vgg11_bn", {}, 64),
    ("resnet18", {}, 64),
    ("resnet50", {}, 64),
    ("resnext50_32x4d", {}, 64),
    ("wide_resnet50_2", {}, 64),
    ("densenet121", {}, 64),
    ("squeezenet1_1", {}, 64),
    ("shufflenet_v2_x0_5", {}, 64),
    ("mobilenet_v2", {}, 64),
    ("mobilenet_v3_small", {}, 64),
    ("mobilenet_v3_large", {}, 64),
    ("mnasnet0_5", {}, 64),
    ("efficientnet_b0", {}, 64),
    ("efficientnet_v2_s", {}, 64),
    ("regnet_x_400mf", {}, 64),
    ("regnet_y_400mf", {}, 64),
    ("googlenet", {"aux_logits": False, "init_weights": False}, 64),
    ("inception_v3", {"aux_logits": False, "init_weights": False}, 96),
    ("convnext_tiny", {}, 64),
    ("swin_t", {}, 64),
    ("swin_v2_t", {}, 64),
    ("vit_b_16", {"image_size": 64}, 64),
    ("vit_b_32", {"image_size": 64}, 64),
    ("maxvit_t", {"input_size": (224, 224)}, 224),  # its builder fixes partition_size=7: 224 px
]

DETECTORS = [
    "fasterrcnn_resnet50_fpn",
    "fasterrcnn_resnet50_fpn_v2",
    "fasterrcnn_mobilenet_v3_large_fpn",
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "retinanet_resnet50_fpn",
    "retinanet_resnet50_fpn_v2",
    "fcos_resnet50_fpn",
    "ssd300_vgg16",
    "ssdlite320_mobilenet_v3_large",
    "maskrcnn_resnet50_fpn",
    "maskrcnn_resnet50_fpn_v2",
    "keypointrcnn_resnet50_fpn",
]

SEGMENTERS = ["fcn_resnet50", "deeplabv3_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]

VIDEO = [
    ("r3d_18", {}),
    ("mc3_18", {}),
    ("r2plus1d_18", {}),
    ("s3d", None),  # a fixed 2x7x7 average pool: clips of 16x224x224 at least
    ("mvit_v1_b", None),  # built for 16x224x224 clips (the builder fixes spatial_size and temporal_size)
    ("mvit_v2_s", None),
    ("swin3d_t", {}),
]


def _images(batch: int, side: int, channels: int = 3) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.rand(batch, channels, side, side)


def _first_parameter(model) -> str:
    return next(iter(inspect.signature(model.forward).parameters))


def classifier(name: str, kwargs: dict, side: int) -> Built:
    import torchvision

    model = torchvision.models.get_model(name, weights=None, num_classes=NUM_CLASSES, **kwargs)
    return Built(model, {"x": _images(2, side)}, {"x": {0: BATCH, 2: space(8), 3: space(8)}})


def segmenter(name: str) -> Built:
    import torchvision

    model = torchvision.models.get_model(name, weights=None, weights_backbone=None, num_classes=NUM_CLASSES)
    x = _first_parameter(model)
    return Built(model, {x: _images(2, 64)}, {x: {0: BATCH, 2: space(32), 3: space(32)}})


def video(name: str, kwargs: dict | None) -> Built:
    import torchvision

    if kwargs is None:
        raise NotImplementedError("its builder takes 16x224x224 clips only: too heavy for this machine")
    model = torchvision.models.get_model(name, weights=None, num_classes=NUM_CLASSES, **kwargs)
    torch.manual_seed(0)
    clip = torch.rand(2, 3, 8, 64, 64)
    return Built(model, {"x": clip}, {"x": {0: BATCH, 3: space(16), 4: space(16)}})  # 8 frames: pooled to 1


def raft() -> Built:
    import torchvision

    model = torchvision.models.optical_flow.raft_small(weights=None)
    torch.manual_seed(0)
    one, two = torch.rand(2, 3, 128, 128), torch.rand(2, 3, 128, 128)
    dims = {0: BATCH, 2: space(8), 3: space(8)}
    inputs = {"image1": one, "image2": two, "num_flow_updates": 3}
    return Built(model, inputs, {"image1": dims, "image2": dims, "num_flow_updates": None})


def _targets(name: str, sizes) -> list[dict]:
    """Two boxes per image (three for the second), labels, and masks or keypoints where the head needs them."""
    out = []
    for k, (h, w) in enumerate(sizes):
        n = 2 + k
        top_left = torch.tensor([[4.0, 6.0], [10.0, 3.0], [20.0, 15.0]])[:n]
        boxes = torch.cat([top_left, top_left + torch.tensor([[20.0, 25.0], [30.0, 18.0], [25.0, 30.0]])[:n]], dim=1)
        classes = 2 if name.startswith("keypointrcnn") else NUM_CLASSES
        target = {"boxes": boxes, "labels": 1 + torch.arange(n) % (classes - 1)}
        if name.startswith("maskrcnn"):
            masks = torch.zeros(n, h, w, dtype=torch.uint8)
            for i, (x1, y1, x2, y2) in enumerate(boxes.int().tolist()):
                masks[i, y1:y2, x1:x2] = 1
            target["masks"] = masks
        if name.startswith("keypointrcnn"):
            kp = torch.stack([boxes[:, 0] + 5, boxes[:, 1] + 5, torch.ones(n)], dim=1)
            target["keypoints"] = kp[:, None, :].repeat(1, 4, 1)
        out.append(target)
    return out


def detector(name: str, mode: str) -> Built:
    import torchvision

    kwargs = {"num_classes": NUM_CLASSES, "min_size": 64, "max_size": 96}
    if name.startswith("keypointrcnn"):
        kwargs.update(num_classes=2, num_keypoints=4)
    if name.startswith("ssd"):
        kwargs = {"num_classes": NUM_CLASSES}
    if mode == "train-noresize":  # images taken as they are: no random choice of a training size
        kwargs["_skip_resize"] = True
    model = torchvision.models.get_model(name, weights=None, weights_backbone=None, **kwargs)
    sizes = [(64, 80), (72, 64)]
    if name.startswith("ssd300") and mode == "train-noresize":
        sizes = [(300, 300), (300, 300)]  # not resized: VGG's extra layers need 300 px
    torch.manual_seed(0)
    images = [torch.rand(3, h, w) for h, w in sizes]
    image_dims = {1: space(16), 2: space(16)}
    inputs, shapes = {"images": images}, {"images": [image_dims, image_dims]}
    if mode.startswith("train"):
        inputs["targets"] = _targets(name, sizes)
        shapes["targets"] = [
            {k: ({1: image_dims[1], 2: image_dims[2]} if k == "masks" else None) for k in t} for t in inputs["targets"]
        ]
    return Built(model, inputs, shapes, seed=0 if mode.startswith("train") else None)


def entries() -> list[Entry]:
    out = [Entry(n, "torchvision", functools.partial(classifier, n, kw, side)) for n, kw, side in CLASSIFIERS]
    for name in DETECTORS:
        for mode in ("eval", "train", "train-noresize"):
            make = functools.partial(detector, name, mode)
            out.append(Entry(f"{name}.{mode}", "torchvision", make, mode.split("-")[0]))
    out += [Entry(n, "torchvision", functools.partial(segmenter, n)) for n in SEGMENTERS]
    out += [Entry(n, "torchvision", functools.partial(video, n, kw)) for n, kw in VIDEO]
    out.append(Entry("raft_small", "torchvision", raft))
    return out
