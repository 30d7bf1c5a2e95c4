"""Module functions in the style of torchvision.ops: a size test, then a test on the values."""

import torch


def clip_boxes(boxes, size: float):
    if boxes.numel() == 0:
        return boxes
    if (boxes < 0).any():
        boxes = boxes.clamp(min=0)
    return boxes.clamp(max=size)


def normalise(scores):
    def rescale(s):
        if s.max() > 1:
            return s / s.max()
        return s

    return rescale(scores) * 2


def best_first(boxes, scores):
    """The size tested is data when the boxes were selected by a mask (torchvision's batched_nms)."""
    if boxes.numel() == 0:
        return boxes
    return boxes[scores.argsort(descending=True)]


def matched(ratio, th: float):
    """kornia's match_snn: ``len()`` of a selection by a mask, tested."""
    kept = ratio[ratio <= th]
    if len(kept) == 0:
        return ratio.new_zeros((0, 1))
    return kept.view(-1, 1)


def _per_class(boxes, scores, idxs):
    """A Python loop over the classes present: its length is data, no export holds it."""
    keep = []
    for c in torch.unique(idxs):
        keep.append(scores[idxs == c].argmax())
    return torch.stack(keep)


def _offset_by_class(boxes, scores, idxs):
    shifted = boxes + idxs[:, None].to(boxes.dtype) * 100
    return shifted.sum(1).argsort()[:2]


def batched_pick(boxes, scores, idxs):
    """torchvision's batched_nms: a loop per class above a size, the coordinate trick below it."""
    if boxes.numel() > 400:
        return _per_class(boxes, scores, idxs)
    else:
        return _offset_by_class(boxes, scores, idxs)
