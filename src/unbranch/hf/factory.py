"""Tiny random transformers models for any architecture, built offline from config defaults.

A config class's defaults describe a full-size model; :func:`tiny_config` shrinks every size
it knows by name (widths, layers, heads, experts, vocabulary, image and audio sizes) while
keeping what the code divides by (heads and head sizes, rotary sections, per-layer lists), and
applies the per-family data in ``OVERRIDES`` where names alone are not enough. Inputs follow
the model's ``forward`` signature and ``main_input_name``. Nothing is downloaded.
"""

from __future__ import annotations

import inspect
import json
import os
import re

import torch

WIDTH, HEADS, HEAD_DIM, FFN, LAYERS, VOCAB = 32, 2, 16, 64, 2, 128
IMAGE, PATCH, AUDIO_SAMPLES = 32, 8, 1600

# config key -> tiny value, applied at every nesting level (text_config, vision_config...)
SIZES = {
    **dict.fromkeys(
        [
            "hidden_size",
            "d_model",
            "n_embd",
            "embed_dim",
            "projection_dim",
            "decoder_hidden_size",
            "text_embed_dim",
            "vision_embed_dim",
            "out_hidden_size",
            "projector_hidden_size",
            "encoder_hidden_size",
            "text_hidden_size",
            "condition_dim",
            "projection_size",
        ],
        WIDTH,
    ),
    "embedding_size": 16,  # ALBERT-like factorised embeddings
    **dict.fromkeys(
        [
            "num_attention_heads",
            "n_head",
            "n_heads",
            "num_heads",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "decoder_num_attention_heads",
        ],
        HEADS,
    ),
    **dict.fromkeys(["head_dim", "d_head", "d_kv", "attention_head_dim", "v_head_dim", "qk_head_dim"], HEAD_DIM),
    **dict.fromkeys(["qk_rope_head_dim", "qk_nope_head_dim"], HEAD_DIM // 2),
    **dict.fromkeys(["kv_lora_rank", "q_lora_rank"], 16),
    **dict.fromkeys(
        [
            "intermediate_size",
            "ffn_dim",
            "d_ff",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "decoder_intermediate_size",
        ],
        FFN,
    ),
    **dict.fromkeys(
        [
            "num_hidden_layers",
            "n_layer",
            "n_layers",
            "num_layers",
            "encoder_layers",
            "decoder_layers",
            "num_decoder_layers",
            "num_encoder_layers",
            "depth",
        ],
        LAYERS,
    ),
    **dict.fromkeys(["num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"], 4),
    **dict.fromkeys(["num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_k"], 2),
    **dict.fromkeys(
        ["n_shared_experts", "num_shared_experts", "n_group", "num_expert_group", "topk_group"]
        + ["first_k_dense_replace"],
        1,
    ),
    "vocab_size": VOCAB,
    **dict.fromkeys(["max_position_embeddings", "n_positions", "max_target_positions"], 128),
    "image_size": IMAGE,
    "num_mel_bins": 16,
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2,
    "state_size": 8,
    "mamba_n_heads": 4,
    "mamba_d_head": 16,
    "mamba_d_state": 8,
}
# shrunk only when larger: a smaller default is part of the design (Swin's patch 4, window 7)
AT_MOST = {
    "patch_size": PATCH,
    "window_size": 4,
    "sliding_window": 16,
    "max_source_positions": 16,
    "rotary_dim": 8,
    "num_groups": 4,
    "num_frames": 4,
    # every n-th layer is sparse (MoE): n within the tiny depth, so that one is
    "encoder_sparse_step": LAYERS,
    "decoder_sparse_step": LAYERS,
    "num_sparse_encoder_layers": 1,  # SwitchTransformers' step is the layers over these
    "num_sparse_decoder_layers": 1,
}
LIST_SIZES = {  # per-stage lists of CNN/hierarchical backbones: keep the length, shrink the values
    "hidden_sizes": lambda n: [16 * 2**i for i in range(n)],
    "depths": lambda n: [1] * n,
    "num_heads": lambda n: [HEADS] * n,
    "num_attention_heads": lambda n: [1] * n,
    "conv_dim": lambda n: [16] * n,
    "embed_dims": lambda n: [16 * 2**i for i in range(n)],
}
# per-family data (config model_type -> config values) where the generic shrink is not enough
OVERRIDES: dict[str, dict] = {
    "deepseek_v2": {"num_experts_per_tok": 2},  # None by default
    "zaya": {"num_experts_per_tok": 1},
    # time series: no default horizon
    **dict.fromkeys(["time_series_transformer", "informer"], {"prediction_length": 4, "context_length": 8}),
    "autoformer": {"prediction_length": 4, "context_length": 12},  # at least its label length, 10
    "mistral4": {"head_dim": HEAD_DIM},  # its rotary head is the rope and nope parts together
    "gemma3n_text": {"num_kv_shared_layers": 0},  # 2 layers leave no kinds of layers to share a cache with
    "falcon_h1": {"mamba_d_ssm": None},  # then mamba_expand * hidden_size, which the heads make up
    "mamba2": {"num_heads": 2 * WIDTH // HEAD_DIM, "n_groups": 1},  # num_heads * head_dim == expand * hidden_size
    "squeezebert": {"embedding_size": WIDTH},  # no factorised embeddings
    "reformer": {"axial_pos_embds_dim": [WIDTH // 2, WIDTH // 2]},  # they sum to the width
    "codegen": {"n_head": 4},
    "xmod": {"default_language": "en_XX"},  # its adapters need one  # heads split over 4 model-parallel groups
    # layer kinds with no default (checkpoints give them)
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "deepseek_ocr2_text": {"mlp_layer_types": ["dense", "sparse"]},
}
# model types whose code loops over the batch rows in Python, each row giving a data-dependent length
# (FastSpeech2's length regulator): the loop fixes the batch size, which is then static in the example
STATIC_BATCH = {"fastspeech2_conformer"}
DERIVED = ("out_features", "out_indices", "stage_names")  # backbone outputs named after the full depth
NO_DOWNLOAD = {"use_pretrained_backbone": False, "use_timm_backbone": False}


def _shrink(d: dict, seen: dict | None = None, kinds: bool = True) -> dict:
    """One config dict, shrunk in place (nested configs too); lists as long as the layer count follow it.

    ``seen`` collects every named size shrunk (full-size value -> tiny value) for :func:`_consistent`.
    """
    seen = {} if seen is None else seen
    layers = {d[k] for k in ("num_hidden_layers", "num_layers", "n_layer") if isinstance(d.get(k), int)}
    heads = d.get("num_attention_heads") or d.get("n_head") or 0
    old_head_dim = d.get("head_dim") or (d.get("hidden_size", 0) // heads if isinstance(heads, int) and heads else 0)
    merged = d.get("patch_size", 0) * d.get("spatial_merge_size", 0) if isinstance(d.get("patch_size"), int) else 0
    windows = d.get("window_size", 0) // merged if merged and d.get("window_size", 0) % merged == 0 else 0
    # stages listed (and no layer count): a backbone keeps its stage names, whose outputs a detector reads
    staged = any(isinstance(d.get(k), list) for k in LIST_SIZES) and not {"num_layers", "num_hidden_layers"} & set(d)
    for key, value in list(d.items()):
        if key in DERIVED and not staged and not (key == "out_features" and value and isinstance(value[-1], int)):
            del d[key]  # backbone outputs named after layers, which are fewer now (per-stage lists keep theirs)
        elif isinstance(value, dict) and value and all(str(k).isdigit() for k in value):  # per-layer settings
            d[key] = {k: v for k, v in value.items() if int(k) < LAYERS}
        elif isinstance(value, dict) and key not in ("id2label", "label2id"):
            _shrink(value, seen, kinds)
        elif isinstance(value, bool) or value is None:
            continue
        elif key in SIZES and isinstance(value, int) and value != 0:  # 0: the part is off (no rotary part...)
            d[key] = SIZES[key]
            if key in MATCHED and value >= MATCHED_FROM:
                seen[value] = min(seen.get(value, (9, 0)), (MATCHED[key], SIZES[key]))
        elif key in AT_MOST and isinstance(value, int):
            d[key] = min(value, AT_MOST[key])
        elif _LAYER_INDEX.search(key) and isinstance(value, (int, list)):  # layers read: within the tiny depth
            d[key] = [_layer(v) for v in value] if isinstance(value, list) else _layer(value)
        elif key in LIST_SIZES and isinstance(value, (list, tuple)) and value:
            d[key] = LIST_SIZES[key](len(value))
        elif key in ("image_size", "patch_size") and isinstance(value, (list, tuple)):
            d[key] = [min(v, SIZES.get(key, AT_MOST.get(key))) for v in value]
    for key, value in list(d.items()):  # per-layer lists (layer_types, mlp_only_layers...) follow the count
        if isinstance(value, list) and layers and len(value) in layers and len(value) > LAYERS:
            d[key] = _every_kind(value, LAYERS) if kinds else value[:LAYERS]
    if windows:  # a window in pixels, a whole number of merged patches (Qwen2.5-VL's 112 = 4 x 2 x 14)
        d["window_size"] = windows * d["patch_size"] * d["spatial_merge_size"]
    if "head_dim" in d and d["head_dim"] is None and "num_attention_heads" in d:
        d["head_dim"] = HEAD_DIM
    if "head_dim" in d and d.get("qk_rope_head_dim"):  # multi-head latent attention: rotary on the rope part
        d["head_dim"] = d["qk_rope_head_dim"]
    if "num_key_value_heads" in d and d["num_key_value_heads"] is None and "num_attention_heads" in d:
        d["num_key_value_heads"] = d["num_attention_heads"]  # what None means
    if "vocab_size" in d and d["vocab_size"] is None:  # left to a tokenizer
        d["vocab_size"] = VOCAB
    if isinstance(d.get("num_key_value_heads"), int):
        d["num_key_value_heads"] = 1 if d["num_key_value_heads"] < d.get("num_attention_heads", HEADS) else HEADS
    if "qk_head_dim" in d and "qk_rope_head_dim" in d:
        d["qk_head_dim"] = d["qk_rope_head_dim"] + d.get("qk_nope_head_dim", 0)
    rope = d.get("rope_parameters") or d.get("rope_scaling")
    if isinstance(rope, dict) and isinstance(rope.get("mrope_section"), list) and old_head_dim:
        rope["mrope_section"] = _scaled(rope["mrope_section"], HEAD_DIM / old_head_dim)
    for key in NO_DOWNLOAD:
        if key in d:
            d[key] = NO_DOWNLOAD[key]
    if "use_cache" in d:
        d["use_cache"] = False  # a cache in the output is no pytree: export rejects it
    _special_tokens(d)
    d.update(OVERRIDES.get(d.get("model_type"), {}))
    return d


# sizes other fields must equal (an adapter's input width is the text model's width...), by priority
MATCHED = {
    **{k: 0 for k, v in SIZES.items() if v == WIDTH and k not in ("projection_dim", "projection_size")},
    **{k: 1 for k, v in SIZES.items() if v == FFN},
}
MATCHED_FROM = 64  # smaller values (2, 4, 16...) are too common to say they are the same size
_SIZE_NAME = re.compile(r"size|dim|channel|features|width|groups", re.IGNORECASE)  # groups: depthwise convs


def _consistent(d: dict, seen: dict) -> None:
    """Unnamed sizes equal to a shrunk full-size width shrink with it (``adapter_in_dim == hidden_size``)."""
    sizes = {old: new for old, (_, new) in seen.items()}
    for key, value in list(d.items()):
        if isinstance(value, dict):
            _consistent(value, seen)
        elif not _SIZE_NAME.search(str(key)) or key in SIZES or key in AT_MOST or "position" in str(key):
            continue
        elif isinstance(value, int) and not isinstance(value, bool) and value in sizes:
            d[key] = sizes[value]
        elif isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            d[key] = _scaled_list(value, sizes)


_LAYER_INDEX = re.compile(r"feature_layers?$|_layer_ids?$|_layer_indices$")


def _layer(index):
    """A layer index (negative: from the end) that the tiny depth has."""
    return index if not isinstance(index, int) or index < 0 else min(index, LAYERS - 1)


def _every_kind(values: list, n: int) -> list:
    """``n`` of ``values`` in their order, every kind of layer among them where there is room (a full-attention one...).

    The first layer stays first (a layer sharing an earlier one's cache or indices cannot); then the
    last layer of each other kind (hybrid models end on the kinds that read a cache). Lists of
    numbers (layer indices, flags) keep their first ``n``.
    """
    if not all(isinstance(v, str) for v in values):
        return values[:n]
    last = {v: i for i, v in enumerate(values) if v != values[0]}
    keep = [0, *sorted(last.values())[-(n - 1) :]] if n > 1 else [0]
    keep += [i for i in range(len(values)) if i not in keep][: n - len(keep)]
    return [values[i] for i in sorted(keep)]


def _scaled_list(values: list, sizes: dict) -> list:
    """Per-stage sizes holding a shrunk width, scaled with it (Hiera's 96, 192, 384, 768 -> 32, 64, 128, 256)."""
    old = next((v for v in values if v in sizes), None)
    if old is None:
        return values
    scaled = [v * sizes[old] / old for v in values]
    if all(x == int(x) and x >= 1 for x in scaled):
        return [int(x) for x in scaled]
    return [sizes.get(v, v) for v in values]


def _scaled(sections: list, ratio: float) -> list:
    """Rotary sections (each >= 1) scaled by ``ratio``, their sum scaled exactly."""
    total = max(round(sum(sections) * ratio), len(sections))
    out = [max(1, round(s * ratio)) for s in sections]
    out[0] += total - sum(out)
    return out


def _special_tokens(d: dict) -> None:
    """Special token ids beyond the tiny vocabulary move to its top (they index embeddings)."""
    top = d.get("vocab_size") or VOCAB
    spare = iter(range(top - 1, top // 2, -1))
    for key, value in d.items():
        if key.endswith(("_token_id", "_token_index", "_token_ids")) and not isinstance(value, bool):
            if isinstance(value, int) and value >= top:
                d[key] = next(spare)
            elif isinstance(value, list) and any(isinstance(v, int) and v >= top for v in value):
                d[key] = [next(spare) if v >= top else v for v in value]


def tiny_config(config_class, values: dict | None = None, kinds: bool = True):
    """``config_class``'s defaults (or ``values``, a local config), shrunk to a tiny model.

    ``kinds``: the tiny layers hold every kind of layer the full ones have (else the first ones).
    """
    full = values if values is not None else config_class().to_dict()
    for mixed in dict.fromkeys((kinds, False)):  # a config that rejects the mix of kinds: the first layers
        seen: dict = {}
        d = _shrink(json.loads(json.dumps(full)), seen, mixed)
        _consistent(d, seen)
        try:
            config = config_class.from_dict(d)
            break
        except Exception:
            if not mixed:
                raise
    for sub in [config, *(v for v in vars(config).values() if hasattr(v, "to_dict"))]:
        _default_mrope(sub)
    return config


def _default_mrope(config) -> None:
    """Multimodal rotary sections the modeling code defaults to full-size ones: give tiny ones."""
    rope = getattr(config, "rope_parameters", None)
    if "mrope_section" in getattr(config, "ignore_keys_at_rope_validation", ()) and isinstance(rope, dict):
        half = int(HEAD_DIM * rope.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1))) // 2
        rope.setdefault("mrope_section", [half - 2 * (half // 4), half // 4, half // 4])


def base_model_classes() -> dict[str, str]:
    """Model type -> base model class name, for every architecture transformers maps."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return {k: v[0] if isinstance(v, (list, tuple)) else v for k, v in MODEL_MAPPING_NAMES.items()}


def model_class(name: str):
    """The transformers model class ``name`` names (a config class name gives its base model), or None."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if name.endswith("Config"):
        model_type = next((k for k, v in CONFIG_MAPPING_NAMES.items() if v == name), None)
        name = base_model_classes().get(model_type, "")
    cls = getattr(transformers, name, None) if name else None
    return cls if isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel) else None


def from_config_file(path: str):
    """(model class, tiny config) for a local ``config.json`` (or a directory holding one)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    with open(path) as f:
        try:
            values = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(values, dict) or not values.get("model_type"):
        raise ValueError(f"{path}: no model_type (a transformers config.json names its architecture's model_type)")
    if values["model_type"] not in CONFIG_MAPPING:
        import transformers

        raise ValueError(
            f"{path}: model_type {values['model_type']!r} is unknown to transformers {transformers.__version__}"
        )
    config_class = CONFIG_MAPPING[values["model_type"]]
    archs = values.get("architectures") or []
    cls = model_class(archs[0]) if archs else None
    return cls or model_class(config_class.__name__), tiny_config(config_class, values)


def _find(config, key, default=None):
    """``config.key``, else the first sub-config (vision_config, audio_config...) that has it."""
    if getattr(config, key, None) is not None:
        return getattr(config, key)
    for sub in vars(config).values():
        if hasattr(sub, "to_dict") and getattr(sub, key, None) is not None:
            return getattr(sub, key)
    return default


def _forward_params(cls) -> dict:
    return dict(inspect.signature(inspect.unwrap(cls.forward)).parameters)


def _wanted(model, extra: bool = False) -> list[str]:
    """Inputs to give: the main one, the required ones, both towers of a contrastive model, masks and decoder tokens.

    ``extra``: also every optional input there is a maker for (some are optional only in name).
    """
    config, params = model.config, _forward_params(type(model))
    main = type(model).main_input_name
    mains = list(main) if isinstance(main, (list, tuple)) else [main]  # OneFormer: pixels and task tokens
    wanted = [m for m in mains if m in params or m == "past_values"]  # some classes inherit a wrong one
    wanted += [
        p.name
        for p in params.values()
        if p.default is inspect.Parameter.empty and p.kind == p.POSITIONAL_OR_KEYWORD and p.name != "self"
    ]
    image_tokens = any("image_token" in k for k in config.to_dict())
    if hasattr(config, "text_config") and hasattr(config, "vision_config") and not image_tokens:
        wanted += ["input_ids", "pixel_values"]  # CLIP-like: both towers run
    if "input_ids" in wanted and "attention_mask" in params:
        wanted.append("attention_mask")
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        wanted.append("decoder_input_ids")
    if extra:
        embeds = any(n.endswith("_embeds") or n == "inputs" for n in wanted)  # inputs given as embeddings
        wanted += [n for n in params if n in EXTRA and not (embeds and n == "input_ids")]
    return [w for w in dict.fromkeys(wanted) if w in params or w in mains]


# optional inputs given when the model does not run without them (variant 1 and later)
EXTRA = ("input_ids", "pixel_values", "input_features", "input_features_mask", "bbox", "qformer_input_ids")
GRIDS = ("grid_thw", "image_grid_thw")  # patches of one image, flattened, and its patch grid
VARIANTS = 3  # input layouts tried in turn until the model runs (see make_inputs)


def make_inputs(model, batch: int = 2, seq: int = 7, variant: int = 0) -> tuple[dict, dict]:
    """Keyword inputs for ``model.forward`` and their dynamic shapes.

    Token and waveform lengths are dynamic with the batch; image sizes and mel frames stay
    the config's (position tables and convolutions fix them). ``variant`` (0 to ``VARIANTS``
    - 1) picks other layouts where models differ: waveforms with a channel dimension,
    image pairs, mel bins first or last, patches unflattened, and optional inputs given too.
    """
    config = model.config
    g = torch.Generator().manual_seed(batch * 100 + seq)
    dyn = torch.export.Dim.DYNAMIC
    hidden = _find(config, "hidden_size") or _find(config, "d_model") or WIDTH
    kw, ds = {}, {}
    wanted = _wanted(model, extra=variant > 0)
    patches = next((n for n in ("hidden_states", "pixel_values") if n in wanted), "hidden_states")
    for name in sorted(wanted, key=lambda n: n not in GRIDS):  # a grid sizes the patches
        if name in ("input_ids", "decoder_input_ids", "qformer_input_ids", "task_inputs"):
            length = seq if name != "decoder_input_ids" else max(seq - 2, 2)
            vocab = _find(config, "vocab_size", VOCAB)
            rows = batch * (_find(config, "num_codebooks") or 1) if variant == 2 else batch  # a row per codebook
            kw[name], ds[name] = torch.randint(4, min(vocab, 100), (rows, length), generator=g), {0: dyn, 1: dyn}
        elif name == "attention_mask":
            kw[name], ds[name] = torch.ones(batch, seq, dtype=torch.long), {0: dyn, 1: dyn}
        elif name == "bbox":  # layout models: one box (x0, y0, x1, y1) per token, in 0..1000
            corner = torch.randint(0, 500, (batch, seq, 2), generator=g)
            kw[name], ds[name] = torch.cat([corner, corner + 100], -1), {0: dyn, 1: dyn}
        elif name in GRIDS:  # one image of 4 x 4 patches (2 x 2 merged)
            kw[name], ds[name] = torch.tensor([[1, 4, 4]]), None
            patch = _find(config, "patch_size", PATCH)
            temporal = _find(config, "temporal_patch_size") or _find(config, "patch_temporal") or 1
            channels = _find(config, "in_channels") or _find(config, "num_channels", 3)
            shape = (16, channels * temporal * patch**2) if variant != 1 else (16, channels * temporal, patch, patch)
            kw[patches], ds[patches] = torch.randn(*shape, generator=g), None
        elif name in ("pixel_values", "pixel_values_videos", "prompt_pixel_values") and name not in kw:
            size = _find(config, "image_size", IMAGE if variant != 2 else (2 * IMAGE, 8 * IMAGE))  # OCR: text lines
            h, w = (size, size) if isinstance(size, int) else size[:2]
            frames = _find(config, "num_frames") or (4 if "videos" in name else None)
            pair = (2,) if variant == 1 and not frames else ()  # keypoint matchers take image pairs
            shape = (batch, *((frames,) if frames else pair), _find(config, "num_channels", 3), h, w)
            kw[name], ds[name] = torch.randn(*shape, generator=g), {0: dyn}
        elif name == "input_values":
            channels = _find(config, "audio_channels") or (1 if variant else None)  # codecs: (batch, 1, time)
            channels = (channels,) if channels else ()
            kw[name] = torch.randn(batch, *channels, AUDIO_SAMPLES + 40 * seq, generator=g)
            ds[name] = {0: dyn, 1 + len(channels): dyn}
        elif name in ("input_features", "audio_mel"):
            positions = _find(config, "max_source_positions")
            mel = _find(config, "num_mel_bins") or _find(config, "feature_size") or 16
            if bool(positions) != (variant == 2):  # Whisper-like: mel bins first, twice the encoder's positions
                frames = 2 * (_find(config, "n_window") or positions or 32)  # chunked encoders: whole windows
                kw[name] = torch.randn(batch, mel, frames if variant == 2 else 2 * positions, generator=g)
            else:  # frames first (conformers, Speech2Text's stacked channels, stacked frames)
                per_channel = _find(config, "input_feat_per_channel")
                features = per_channel * _find(config, "input_channels", 1) if per_channel else mel
                features = _find(config, "feature_projection_input_dim") or features
                kw[name] = torch.randn(batch, 64, features, generator=g)
            ds[name] = {0: dyn}
        elif name.endswith("_mask") and name[: -len("_mask")] in wanted:
            pass  # after what it masks (below)
        elif name in ("inputs_embeds", "inputs", "hidden_states", "query_embeds") and name not in kw:
            kw[name], ds[name] = torch.randn(batch, seq, hidden, generator=g), {0: dyn}
        elif name == "merge_sizes":  # one merge size per image
            kw[name], ds[name] = torch.tensor([_find(config, "spatial_merge_size") or 2]), None
        elif name == "past_values":
            _time_series(config, batch, g, kw, ds)
            if variant == 2:  # one univariate series per row (TimesFM)
                kw[name] = kw[name].flatten(1)
        elif name == "past_values_padding":  # after past_values (sorted below): nothing padded
            pass
        elif name == "freq":  # one frequency class per series
            kw[name], ds[name] = torch.zeros(batch, 1, dtype=torch.long), {0: dyn}
        elif name not in kw:
            raise NotImplementedError(f"no input maker for {name!r}")
    if "past_values_padding" in wanted and "past_values" in kw:
        kw["past_values_padding"], ds["past_values_padding"] = torch.zeros(kw["past_values"].shape[:2]), {0: dyn}
    for name, features in [("feature_attention_mask", "input_features"), *((f"{n}_mask", n) for n in kw)]:
        if name in wanted and features in kw and name not in kw:  # every frame valid
            x = kw[features]
            frames = x.shape[1] if x.shape[1] != _find(config, "num_mel_bins") else x.shape[2]
            kw[name], ds[name] = torch.ones(x.shape[0], frames, dtype=torch.long), {0: dyn}
    if config.model_type in STATIC_BATCH:
        ds = {k: {d: v for d, v in dims.items() if d != 0} if dims else dims for k, dims in ds.items()}
    return kw, ds


def _time_series(config, batch, g, kw, ds) -> None:
    """past_values and what goes with it: lagged transformers (TST, Informer...) or patching models."""
    dyn = torch.export.Dim.DYNAMIC
    context, horizon = config.context_length, getattr(config, "prediction_length", 4)
    lags = getattr(config, "lags_sequence", None)
    if lags:  # past: context + largest lag; future: the horizon, with time features on both
        length, features = context + max(lags), config.num_time_features
        kw["past_values"] = torch.randn(batch, length, generator=g)
        kw["past_time_features"] = torch.randn(batch, length, features, generator=g)
        kw["past_observed_mask"] = torch.ones(batch, length)
        kw["future_values"] = torch.randn(batch, horizon, generator=g)
        kw["future_time_features"] = torch.randn(batch, horizon, features, generator=g)
    else:
        channels = getattr(config, "num_input_channels", 1)
        kw["past_values"] = torch.randn(batch, context, channels, generator=g)
    for name in kw:
        ds[name] = {0: dyn}


def tiny_model(name_or_class, dtype=torch.float32, config=None):
    """A tiny random ``name_or_class`` (eval mode, ``dtype``) with example inputs and dynamic shapes."""
    cls = model_class(name_or_class) if isinstance(name_or_class, str) else name_or_class
    if cls is None:
        raise ValueError(f"{name_or_class!r} is no transformers model or config class")
    torch.manual_seed(0)
    try:
        model = cls(config or tiny_config(cls.config_class)).eval().to(dtype)
    except Exception:
        if config is not None:
            raise
        # a kind of layer whose settings only checkpoints give (a sparse indexer's budget): the first layers
        torch.manual_seed(0)
        model = cls(tiny_config(cls.config_class, kinds=False)).eval().to(dtype)
    return (model, *runnable_inputs(model))


def runnable_inputs(model) -> tuple[dict, dict]:
    """The first input variant ``model`` runs on (the error of the first one if none does)."""
    first = None
    for variant in range(VARIANTS):
        try:
            kw, ds = make_inputs(model, variant=variant)
            with torch.no_grad():
                model(**{k: v.to(model.dtype) if v.is_floating_point() else v for k, v in kw.items()})
            return kw, ds
        except Exception as e:
            first = first or e
    raise first
