"""CPU implementations of torchvision's compiled operators, registered before torchvision is imported.

The torchvision installed beside the CPU build of torch is a CUDA build: its compiled
library does not load, so ``torchvision::nms`` and friends do not exist, and importing
torchvision (or timm, which imports it) fails where torchvision registers their fake
kernels. This module defines the operators the models of the sweep use (nms, roi_align), each with a plain
Python CPU kernel and a fake kernel for tracing, then tells torchvision its operators are
there. The exported programs hold ``torchvision::nms`` / ``torchvision::roi_align`` calls,
exactly as with a working torchvision; running them runs these kernels.

It belongs to the sweep's harness only: unbranch knows nothing of it.
"""

from __future__ import annotations

import sys

import torch

_LIB = None


def _nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy non-maximum suppression: indices kept, by decreasing score (ties: lower index first)."""
    order = torch.sort(scores, descending=True, stable=True).indices
    boxes = dets[order]
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    top_left = torch.max(boxes[:, None, :2], boxes[None, :, :2])
    bottom_right = torch.min(boxes[:, None, 2:], boxes[None, :, 2:])
    inter = (bottom_right - top_left).clamp(min=0).prod(dim=2)
    iou = inter / (area[:, None] + area[None, :] - inter)
    removed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for i in range(len(order)):
        if not removed[i]:
            keep.append(i)
            removed |= iou[i] > iou_threshold
    return order[torch.tensor(keep, dtype=torch.long)]


def _nms_fake(dets, scores, iou_threshold):
    n = torch.library.get_ctx().new_dynamic_size()
    return dets.new_empty((n,), dtype=torch.long)


def _roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    module = sys.modules["torchvision.ops.roi_align"]
    python_kernel = getattr(module._roi_align, "__wrapped__", module._roi_align)  # not its lazy torch.compile
    return python_kernel(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned)


def _roi_align_fake(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    return input.new_empty((rois.shape[0], input.shape[1], pooled_height, pooled_width))


def install() -> None:
    """Define the operators (once), import torchvision, and make it use them."""
    global _LIB
    if _LIB is not None:
        return
    if "torchvision" in sys.modules:
        raise RuntimeError("tv_ops.install() must run before torchvision (or timm) is imported")
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")  # torchvision fakes it on import
    lib.define(
        "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
        "int sampling_ratio, bool aligned) -> Tensor"
    )
    lib.impl("nms", _nms, "CPU")
    lib.impl("roi_align", _roi_align, "CPU")
    _LIB = lib  # the definitions live as long as this object
    torch.library.register_fake("torchvision::roi_align", _roi_align_fake)

    import torchvision  # registers its own fake nms

    def has_ops() -> bool:
        return True

    torchvision.extension._has_ops = has_ops
    sys.modules["torchvision.ops.roi_align"]._has_ops = has_ops
