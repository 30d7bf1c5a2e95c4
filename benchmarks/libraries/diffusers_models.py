"""diffusers: UNets, the VAE, DiT / PixArt / SD3 / Flux transformers, a ControlNet, and schedulers' ``step``.

Every model is built from a tiny config dict (random weights, nothing downloaded); every call
passes ``return_dict=False``. A scheduler is wrapped in a module whose ``forward`` is one
``step`` with a tensor timestep; its per-call state (step index, previous outputs) is reset
at the start of each call so that eager runs and exported programs start from the same state.
"""

from __future__ import annotations

import functools

import torch

from .harness import BATCH, Built, Entry, call, space

UNET_BLOCKS = dict(layers_per_block=1, block_out_channels=(32, 64), norm_num_groups=8)


def _rand(*shape, seed=0):
    torch.manual_seed(seed)
    return torch.rand(*shape)


def _image_dims(step: int = 8) -> dict:
    return {0: BATCH, 2: space(step), 3: space(step)}


def unet2d() -> Built:
    from diffusers import UNet2DModel

    model = UNet2DModel(
        sample_size=16,
        in_channels=3,
        out_channels=3,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=8,
        **UNET_BLOCKS,
    )
    inputs = {"sample": _rand(2, 3, 16, 16), "timestep": torch.tensor([10, 500])}
    return Built(call(model, inputs, return_dict=False), inputs, {"sample": _image_dims(), "timestep": {0: BATCH}})


def unet2d_condition() -> Built:
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        **UNET_BLOCKS,
    )
    inputs = {
        "sample": _rand(2, 4, 16, 16),
        "timestep": torch.tensor([10, 500]),
        "encoder_hidden_states": _rand(2, 7, 32),
    }
    shapes = {"sample": _image_dims(), "timestep": {0: BATCH}, "encoder_hidden_states": {0: BATCH, 1: space(3)}}
    return Built(call(model, inputs, return_dict=False), inputs, shapes)


def controlnet() -> Built:
    from diffusers import ControlNetModel

    model = ControlNetModel(
        in_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        conditioning_embedding_out_channels=(16, 32),
        **UNET_BLOCKS,
    )
    inputs = {
        "sample": _rand(2, 4, 16, 16),
        "timestep": torch.tensor([10, 500]),
        "encoder_hidden_states": _rand(2, 7, 32),
        "controlnet_cond": _rand(2, 3, 32, 32, seed=1),
    }
    shapes = {
        "sample": _image_dims(),
        "timestep": {0: BATCH},
        "encoder_hidden_states": {0: BATCH, 1: space(3)},
        "controlnet_cond": {0: BATCH, 2: space(16), 3: space(16)},
    }
    return Built(call(model, inputs, return_dict=False), inputs, shapes)


def autoencoder_kl() -> Built:
    from diffusers import AutoencoderKL

    model = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        **UNET_BLOCKS,
    )
    inputs = {"sample": _rand(2, 3, 32, 32)}
    return Built(call(model, inputs, return_dict=False), inputs, {"sample": _image_dims(16)})


def dit() -> Built:
    from diffusers import DiTTransformer2DModel

    model = DiTTransformer2DModel(
        num_attention_heads=2,
        attention_head_dim=8,
        in_channels=4,
        num_layers=2,
        sample_size=8,
        patch_size=2,
        norm_num_groups=4,
        num_embeds_ada_norm=10,
    )
    inputs = {
        "hidden_states": _rand(2, 4, 8, 8),
        "timestep": torch.tensor([10, 500]),
        "class_labels": torch.tensor([1, 3]),
    }
    shapes = {"hidden_states": {0: BATCH}, "timestep": {0: BATCH}, "class_labels": {0: BATCH}}
    return Built(call(model, inputs, return_dict=False), inputs, shapes)


def pixart() -> Built:
    from diffusers import Transformer2DModel

    model = Transformer2DModel(
        num_attention_heads=2,
        attention_head_dim=8,
        in_channels=4,
        out_channels=8,
        num_layers=2,
        sample_size=8,
        patch_size=2,
        norm_type="ada_norm_single",
        norm_elementwise_affine=False,
        norm_eps=1e-6,
        cross_attention_dim=16,
        caption_channels=24,
        num_embeds_ada_norm=1000,
        use_additional_conditions=False,
    )
    inputs = {
        "hidden_states": _rand(2, 4, 8, 8),
        "encoder_hidden_states": _rand(2, 5, 24),
        "timestep": torch.tensor([10, 500]),
    }
    shapes = {"hidden_states": {0: BATCH}, "encoder_hidden_states": {0: BATCH, 1: space(3)}, "timestep": {0: BATCH}}
    return Built(call(model, inputs, return_dict=False), inputs, shapes)


def transformer2d_continuous() -> Built:
    from diffusers import Transformer2DModel

    model = Transformer2DModel(
        num_attention_heads=2, attention_head_dim=8, in_channels=16, norm_num_groups=4, cross_attention_dim=12
    )
    inputs = {"hidden_states": _rand(2, 16, 8, 8), "encoder_hidden_states": _rand(2, 5, 12)}
    shapes = {"hidden_states": _image_dims(4), "encoder_hidden_states": {0: BATCH, 1: space(3)}}
    return Built(call(model, inputs, return_dict=False), inputs, shapes)


def sd3() -> Built:
    from diffusers import SD3Transformer2DModel

    model = SD3Transformer2DModel(
        sample_size=8,
        patch_size=2,
        in_channels=4,
        num_layers=2,
        attention_head_dim=8,
        num_attention_heads=2,
        joint_attention_dim=16,
        caption_projection_dim=16,
        pooled_projection_dim=12,
        out_channels=4,
        pos_embed_max_size=16,
    )
    inputs = {
        "hidden_states": _rand(2, 4, 8, 8),
        "encoder_hidden_states": _rand(2, 5, 16),
        "pooled_projections": _rand(2, 12),
        "timestep": torch.tensor([10, 500]),
    }
    shapes = {
        "hidden_states": {0: BATCH, 2: space(4), 3: space(4)},
        "encoder_hidden_states": {0: BATCH, 1: space(3)},
        "pooled_projections": {0: BATCH},
        "timestep": {0: BATCH},
    }
    return Built(call(model, inputs, return_dict=False), inputs, shapes)


def flux() -> Built:
    from diffusers import FluxTransformer2DModel

    model = FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        axes_dims_rope=(4, 4, 8),
    )
    image, text = 16, 5
    inputs = {
        "hidden_states": _rand(2, image, 16),
        "encoder_hidden_states": _rand(2, text, 32),
        "pooled_projections": _rand(2, 32),
        "timestep": torch.tensor([0.5, 0.25]),
        "img_ids": torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(4.0), torch.arange(4.0), indexing="ij"))
        .reshape(3, -1)
        .T,
        "txt_ids": torch.zeros(text, 3),
    }
    shapes = {
        "hidden_states": {0: BATCH, 1: space(4)},
        "encoder_hidden_states": {0: BATCH, 1: space(3)},
        "pooled_projections": {0: BATCH},
        "timestep": {0: BATCH},
        "img_ids": {0: space(4)},
        "txt_ids": {0: space(3)},
    }
    return Built(call(model, inputs, return_dict=False), inputs, shapes)


class SchedulerStep(torch.nn.Module):
    """One ``scheduler.step(model_output, timestep, sample)``, its per-call state reset first."""

    def __init__(self, scheduler):
        super().__init__()
        self.scheduler = scheduler
        self.fresh = dict(vars(scheduler))

    def forward(self, model_output, timestep, sample):
        for key, value in self.fresh.items():  # step index, previous model outputs...
            setattr(self.scheduler, key, list(value) if isinstance(value, list) else value)
        return self.scheduler.step(model_output, timestep, sample, return_dict=False)[0]


SCHEDULERS = [
    "DDPMScheduler",
    "DDIMScheduler",
    "EulerDiscreteScheduler",
    "EulerAncestralDiscreteScheduler",
    "DPMSolverMultistepScheduler",
    "PNDMScheduler",
    "LMSDiscreteScheduler",
    "HeunDiscreteScheduler",
    "UniPCMultistepScheduler",
    "FlowMatchEulerDiscreteScheduler",
]


def scheduler(name: str) -> Built:
    import diffusers

    sched = getattr(diffusers, name)(num_train_timesteps=100)
    sched.set_timesteps(10)
    first, last = sched.timesteps[0], sched.timesteps[-1]
    sample, output = _rand(2, 4, 8, 8), _rand(2, 4, 8, 8, seed=1)
    shapes = {"model_output": _image_dims(4), "timestep": None, "sample": _image_dims(4)}
    flips = {"last timestep": {"model_output": output, "timestep": last.clone(), "sample": sample}}
    inputs = {"model_output": output, "timestep": first.clone(), "sample": sample}
    return Built(SchedulerStep(sched), inputs, shapes, flips=flips, seed=0)


def entries() -> list[Entry]:
    models = {
        "UNet2DModel": unet2d,
        "UNet2DConditionModel": unet2d_condition,
        "ControlNetModel": controlnet,
        "AutoencoderKL": autoencoder_kl,
        "DiTTransformer2DModel": dit,
        "Transformer2DModel.pixart": pixart,
        "Transformer2DModel.continuous": transformer2d_continuous,
        "SD3Transformer2DModel": sd3,
        "FluxTransformer2DModel": flux,
    }
    out = [Entry(name, "diffusers", make) for name, make in models.items()]
    out += [Entry(f"{n}.step", "diffusers", functools.partial(scheduler, n)) for n in SCHEDULERS]
    return out
