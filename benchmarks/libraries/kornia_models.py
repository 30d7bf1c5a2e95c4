"""kornia: geometry, color, enhance, filters, feature, morphology, contrib and augmentation, each as a module.

A function becomes a module with :func:`harness.call` (its tensor arguments named, the others
fixed); augmentations run with ``p=1`` (or ``p=0.5`` where the other side is the point), their
random parameters drawn from a seed set before every run, so eager and exported runs draw the same.
"""

from __future__ import annotations

import functools

import torch

from .harness import BATCH, Built, Entry, call, grouped, space

IMAGE = {0: BATCH, 2: space(8), 3: space(8)}


def _rand(*shape, seed=0):
    torch.manual_seed(seed)
    return torch.rand(*shape)


def image(channels: int = 3, side: int = 32, batch: int = 2, seed: int = 0) -> torch.Tensor:
    return _rand(batch, channels, side, side, seed=seed)


def fn(f, tensors: dict, shapes: dict | None = None, flips: dict | None = None, seed=None, tolerance=None, **fixed):
    """A kornia function applied to ``tensors`` (named after its parameters), ``fixed`` its other arguments."""
    return Built(call(f, tensors, **fixed), tensors, shapes, flips=flips or {}, seed=seed, tolerance=tolerance)


def on_image(f, channels: int = 3, **fixed):
    """``f(image, **fixed)`` where ``f``'s first parameter is the image."""
    import inspect

    first = next(iter(inspect.signature(f).parameters))
    return lambda: fn(f, {first: image(channels)}, {first: IMAGE}, **fixed)


def _homography(batch: int = 2) -> torch.Tensor:
    m = torch.eye(3).repeat(batch, 1, 1)
    m[:, 0, 1], m[:, 1, 2], m[:, 2, 0] = 0.1, 2.0, 1e-3
    return m


def _points(n: int = 12, batch: int = 2, seed: int = 0):
    torch.manual_seed(seed)
    p1 = torch.rand(batch, n, 2) * 30
    h = _homography(batch)
    ones = torch.ones(batch, n, 1)
    p2 = torch.cat([p1, ones], dim=-1) @ h.transpose(1, 2)
    return p1, p2[..., :2] / p2[..., 2:] + 0.01 * torch.randn(batch, n, 2)


POINTS = {0: BATCH, 1: space(4)}


def geometry() -> dict:
    import kornia.geometry as G

    p1, p2 = _points()
    corners = torch.tensor([[[0.0, 0.0], [31.0, 0.0], [31.0, 31.0], [0.0, 31.0]]]).repeat(2, 1, 1)
    boxes = torch.tensor([[[2.0, 2.0], [20.0, 2.0], [20.0, 24.0], [2.0, 24.0]]]).repeat(2, 1, 1)
    affine = _homography()[:, :2].contiguous()  # (a view's strides would be guarded on)
    angle = torch.tensor([30.0, -45.0])
    return {
        "warp_perspective": lambda: fn(
            G.warp_perspective, {"src": image(), "M": _homography()}, {"src": IMAGE, "M": {0: BATCH}}, dsize=(24, 24)
        ),
        "warp_affine": lambda: fn(
            G.warp_affine, {"src": image(), "M": affine}, {"src": IMAGE, "M": {0: BATCH}}, dsize=(24, 24)
        ),
        "rotate": lambda: fn(G.rotate, {"tensor": image(), "angle": angle}, {"tensor": IMAGE, "angle": {0: BATCH}}),
        "get_perspective_transform": lambda: fn(
            G.get_perspective_transform,
            {"points_src": corners, "points_dst": corners * 0.8 + 2},
            {"points_src": {0: BATCH}, "points_dst": {0: BATCH}},
        ),
        "find_homography_dlt": lambda: fn(
            G.find_homography_dlt, {"points1": p1, "points2": p2}, {"points1": POINTS, "points2": POINTS}
        ),
        "find_homography_dlt_iterated": lambda: fn(
            G.find_homography_dlt_iterated,
            {"points1": p1, "points2": p2, "weights": torch.ones(2, 12)},
            {"points1": POINTS, "points2": POINTS, "weights": POINTS},
        ),
        "find_fundamental": lambda: fn(
            G.find_fundamental, {"points1": p1, "points2": p2}, {"points1": POINTS, "points2": POINTS}
        ),
        "crop_and_resize": lambda: fn(
            G.crop_and_resize, {"input_tensor": image(), "boxes": boxes}, {"input_tensor": IMAGE}, size=(16, 16)
        ),
        "resize_antialias": lambda: fn(G.resize, {"input": image()}, {"input": IMAGE}, size=(20, 24), antialias=True),
        "pyrdown": on_image(G.pyrdown),
        "build_pyramid": on_image(G.build_pyramid, max_level=3),
        "elastic_transform2d": lambda: fn(
            G.elastic_transform2d,
            {"image": image(), "noise": _rand(2, 2, 32, 32, seed=1) * 2 - 1},
            {"image": IMAGE, "noise": IMAGE},
            kernel_size=(7, 7),
        ),
        "RANSAC.homography": lambda: ransac("homography"),
        "RANSAC.fundamental": lambda: ransac("fundamental"),
    }


def ransac(model_type: str) -> Built:
    import kornia.geometry as G

    p1, p2 = _points(40, batch=1)
    p1, p2 = p1[0], p2[0]
    model = G.RANSAC(model_type, inl_th=1.0, batch_size=16, max_iter=3, max_lo_iters=2)
    return Built(model, {"kp1": p1, "kp2": p2}, {"kp1": {0: space(8)}, "kp2": {0: space(8)}}, seed=0)


def color() -> dict:
    import kornia.color as C

    out = {
        name: on_image(getattr(C, name))
        for name in ("rgb_to_hsv", "hsv_to_rgb", "rgb_to_hls", "hls_to_rgb", "rgb_to_lab", "lab_to_rgb")
        + ("rgb_to_luv", "rgb_to_ycbcr", "rgb_to_yuv420", "rgb_to_grayscale", "rgb_to_linear_rgb", "sepia")
    }
    out["raw_to_rgb"] = lambda: fn(C.raw_to_rgb, {"image": image(1)}, {"image": IMAGE}, cfa=C.CFA.BG)
    return out


def enhance() -> dict:
    import kornia.enhance as E

    def per_image(f, first: str, second: str, values):
        inputs = {first: image(), second: torch.tensor(values)}
        return lambda: fn(f, inputs, {first: IMAGE, second: {0: BATCH}})

    return {
        "adjust_hue": per_image(E.adjust_hue, "image", "factor", [0.3, -0.2]),
        "adjust_saturation": per_image(E.adjust_saturation, "image", "factor", [0.5, 1.5]),
        "adjust_gamma": per_image(E.adjust_gamma, "input", "gamma", [0.5, 2.0]),
        "equalize": on_image(E.equalize),
        "equalize_clahe": on_image(E.equalize_clahe, grid_size=(2, 2)),
        "posterize": per_image(E.posterize, "input", "bits", [3, 8]),
        "sharpness": per_image(E.sharpness, "input", "factor", [0.5, 1.5]),
        "solarize": per_image(E.solarize, "input", "thresholds", [0.3, 0.6]),
        "normalize_min_max": on_image(E.normalize_min_max),
        "zca_whiten": lambda: fn(E.zca_whiten, {"inp": _rand(20, 6)}, {"inp": {0: space(4)}}),
        "image_histogram2d": on_image(E.image_histogram2d, n_bins=16, min=0.0, max=1.0),
    }


def filters() -> dict:
    import kornia.filters as F

    return {
        "gaussian_blur2d": on_image(F.gaussian_blur2d, kernel_size=(5, 5), sigma=(1.5, 1.5)),
        "median_blur": on_image(F.median_blur, kernel_size=(3, 3)),
        "bilateral_blur": on_image(F.bilateral_blur, kernel_size=(5, 5), sigma_color=0.1, sigma_space=(1.5, 1.5)),
        "canny": on_image(F.canny),
        "sobel": on_image(F.sobel),
        "laplacian": on_image(F.laplacian, kernel_size=5),
        "unsharp_mask": on_image(F.unsharp_mask, kernel_size=(3, 3), sigma=(1.0, 1.0)),
        "motion_blur": on_image(F.motion_blur, kernel_size=5, angle=30.0, direction=0.5),
    }


def feature() -> dict:
    import kornia.feature as Fe
    import kornia.geometry as G

    desc1, desc2 = _rand(10, 8), _rand(12, 8, seed=1)
    descs = {"desc1": {0: space(3)}, "desc2": {0: space(3)}}
    return {
        "harris_response": on_image(Fe.harris_response, channels=1),
        "gftt_response": on_image(Fe.gftt_response, channels=1),
        "hessian_response": on_image(Fe.hessian_response, channels=1),
        "nms2d": on_image(G.subpix.nms2d, kernel_size=(3, 3)),
        "conv_soft_argmax2d": on_image(G.subpix.conv_soft_argmax2d),
        "match_nn": lambda: fn(Fe.match_nn, {"desc1": desc1, "desc2": desc2}, descs),
        "match_mnn": lambda: fn(Fe.match_mnn, {"desc1": desc1, "desc2": desc2}, descs),
        "match_snn": lambda: fn(Fe.match_snn, {"desc1": desc1, "desc2": desc2}, descs, th=0.9),
        "match_smnn": lambda: fn(Fe.match_smnn, {"desc1": desc1, "desc2": desc2}, descs, th=0.95),
        "SIFTDescriptor": lambda: Built(
            Fe.SIFTDescriptor(16, 8, 4), {"input": _rand(5, 1, 16, 16)}, {"input": {0: space(3)}}
        ),
        "ScaleSpaceDetector": lambda: Built(Fe.ScaleSpaceDetector(num_features=20), {"img": image(1)}, {"img": IMAGE}),
        "extract_patches_simple": extract_patches,
    }


def extract_patches() -> Built:
    import kornia.feature as Fe

    lafs = Fe.laf_from_center_scale_ori(
        torch.tensor([[[10.0, 12.0], [20.0, 8.0], [16.0, 16.0]]]).repeat(2, 1, 1), torch.full((2, 3, 1, 1), 4.0)
    )
    inputs = {"img": image(1), "laf": lafs}
    return fn(Fe.extract_patches_simple, inputs, {"img": IMAGE, "laf": {0: BATCH}}, PS=8)


def morphology() -> dict:
    import kornia.morphology as M

    kernel = torch.ones(3, 3)
    return {
        name: functools.partial(fn, getattr(M, name), {"tensor": image(), "kernel": kernel}, {"tensor": IMAGE})
        for name in ("dilation", "erosion", "opening", "closing", "gradient", "top_hat")
    }


def contrib() -> dict:
    import kornia.contrib as C

    mask = (_rand(2, 1, 32, 32) > 0.6).float()
    return {
        "connected_components": lambda: fn(C.connected_components, {"image": mask}, {"image": IMAGE}, num_iterations=8),
        "distance_transform": lambda: fn(C.distance_transform, {"image": mask}, {"image": IMAGE}),
        "extract_tensor_patches": on_image(C.extract_tensor_patches, window_size=8, stride=8),
    }


def augmentation() -> dict:
    import kornia.augmentation as K

    def aug(make, p=1.0, **kw):
        return lambda: Built(make(p=p, **kw), {"input": image()}, {"input": IMAGE}, seed=0)

    return {
        "RandomHorizontalFlip.p0.5": aug(K.RandomHorizontalFlip, p=0.5),
        "RandomAffine": aug(K.RandomAffine, degrees=30.0, translate=(0.1, 0.1)),
        "RandomPerspective": aug(K.RandomPerspective, distortion_scale=0.4),
        "RandomResizedCrop": aug(K.RandomResizedCrop, size=(16, 16)),
        "ColorJitter": aug(K.ColorJitter, brightness=0.2, contrast=0.2, saturation=0.2, hue=0.1),
        "RandomGaussianBlur": aug(K.RandomGaussianBlur, kernel_size=(3, 3), sigma=(0.1, 2.0)),
        "RandomErasing": aug(K.RandomErasing),
        "RandomRotation.same_on_batch": aug(K.RandomRotation, degrees=45.0, same_on_batch=True),
        "RandomGrayscale.p0.5": aug(K.RandomGrayscale, p=0.5),
        "Normalize": lambda: Built(
            K.Normalize(mean=torch.tensor([0.5, 0.4, 0.3]), std=torch.tensor([0.2, 0.2, 0.2])),
            {"input": image()},
            {"input": IMAGE},
        ),
        "AugmentationSequential": sequential,
    }


def sequential() -> Built:
    import kornia.augmentation as K

    seq = K.AugmentationSequential(
        K.RandomHorizontalFlip(p=0.5), K.RandomAffine(degrees=20.0, p=1.0), K.ColorJitter(0.1, 0.1, p=1.0)
    )
    return Built(call(lambda input: seq(input), ["input"]), {"input": image()}, {"input": IMAGE}, seed=0)


GROUPS = {
    "geometry": geometry,
    "color": color,
    "enhance": enhance,
    "filters": filters,
    "feature": feature,
    "morphology": morphology,
    "contrib": contrib,
    "augmentation": augmentation,
}


def entries() -> list[Entry]:
    return grouped("kornia", GROUPS)
