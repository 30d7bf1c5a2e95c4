"""Known rewrites of transformers code, as data: which functions, with which hooks.

Keys are modeling modules; values map a function's qualname in that module to the hooks
its rewrite needs (usually none: discovery would find most of these, the catalogue makes
them explicit, reviewable in rewrites/, and covers what a scan cannot see, such as LED's
``is_global_attn``, a tensor turned into a Python bool in one method and tested in another).
Users add their own entries with :func:`register`.
"""

from __future__ import annotations

import importlib

from .. import discovery
from . import hooks

_M = "transformers.models."
_ROUTER_CAST = hooks.cast_linear_in_graph("self.classifier", "self.dtype")
# `for e in <experts .nonzero() hit>` has a data-dependent trip count; visiting every expert gives
# the same sum, an expert without tokens adding nothing
_EVERY_EXPERT = hooks.replace_loop_iterable("expert_hit", "[[e] for e in range(self.num_experts)]")
CATALOGUE: dict[str, dict[str, dict]] = {
    _M + "bart.modeling_bart": {"BartEncoderLayer.forward": {}},
    _M + "plbart.modeling_plbart": {"PLBartEncoderLayer.forward": {}},
    _M + "marian.modeling_marian": {"MarianEncoderLayer.forward": {}},
    _M + "mvp.modeling_mvp": {"MvpEncoderLayer.forward": {}},
    _M + "blenderbot_small.modeling_blenderbot_small": {"BlenderbotSmallEncoderLayer.forward": {}},
    _M + "bigbird_pegasus.modeling_bigbird_pegasus": {"BigBirdPegasusEncoderLayer.forward": {}},
    _M + "led.modeling_led": {
        "LEDEncoderLayer.forward": {},
        # (LED's own `_pad_to_window_size` specialises the export on seq_len % attention_window,
        # with or without unbranch: its padding `if` returns None for inputs_embeds)
        # `is_global_attn = (attention_mask > 0).any().item()` is a data-dependent bool that
        # LEDEncoderSelfAttention branches on; only a global_attention_mask can make it True,
        # so without one it is statically False and the global-attention path (whose shapes
        # depend on data) is not traced at all
        "LEDEncoder.forward": {
            "pre_rewriter": hooks.guard_assignment("is_global_attn", "global_attention_mask is not None")
        },
    },
    _M + "nllb_moe.modeling_nllb_moe": {
        "NllbMoeEncoderLayer.forward": {},
        "NllbMoeDecoderLayer.forward": {},
        "NllbMoeExperts.forward": {"pre_rewriter": _EVERY_EXPERT},
        # re-assigning a submodule inside forward cannot be traced: the classifier's float32 cast
        # is made eagerly, and in the graph under export (its weights cast where they are read)
        "NllbMoeTop2Router._cast_classifier": {"pre_rewriter": _ROUTER_CAST},
        "NllbMoeTop2Router.forward": {"pre_rewriter": _ROUTER_CAST},
    },
    _M + "switch_transformers.modeling_switch_transformers": {
        # NllbMoe's classifier cast, in the router's forward
        "SwitchTransformersTop1Router.forward": {"pre_rewriter": _ROUTER_CAST},
        # and NllbMoe's loop over the experts hit
        "SwitchTransformersExperts.forward": {"pre_rewriter": _EVERY_EXPERT},
    },
    # the same loop over the experts `.nonzero()` hit, in MoE layers with no batched experts implementation
    _M + "openai_privacy_filter.modeling_openai_privacy_filter": {
        "OpenAIPrivacyFilterExperts.forward": {"pre_rewriter": _EVERY_EXPERT},
    },
    _M + "longcat_flash.modeling_longcat_flash": {
        # every expert (routed and identity ones), its index a Python int; an expert without
        # tokens adds nothing, so its early `continue` (on a data-dependent size) can go
        "LongcatFlashExperts.forward": {
            "pre_rewriter": hooks.chain(
                hooks.replace_loop_iterable("expert_hit", "range(self.total_experts)"),
                hooks.replace_value("expert_idx", "expert_idx_tensor"),
                hooks.drop_if("token_idx.numel() == 0"),
            )
        },
    },
    # the same float16 clamp in the time-series models' encoder layers
    _M + "autoformer.modeling_autoformer": {"AutoformerEncoderLayer.forward": {}},
    _M + "informer.modeling_informer": {"InformerEncoderLayer.forward": {}},
    _M + "time_series_transformer.modeling_time_series_transformer": {"TimeSeriesTransformerEncoderLayer.forward": {}},
    # known, nothing to rewrite: ViT's one branch (ViTEmbeddings.interpolate_pos_encoding, native
    # size or not) tests sizes only, which the plain export handles (tests/test_dropin.py)
    _M + "vit.modeling_vit": {},
    _M + "longt5.modeling_longt5": {"LongT5Block.forward": {}},
    _M + "fsmt.modeling_fsmt": {
        # `if not mask.any(): mask = None`: no cond can return None, and an all-False mask masks nothing
        "make_padding_mask": {"pre_rewriter": hooks.drop_none_fallback},
    },
}


def register(module: str, qualname: str, **hooks) -> None:
    """Add (or replace) the rewrite of ``module:qualname``, with optional hooks."""
    CATALOGUE.setdefault(module, {})[qualname] = hooks


# audio codecs keep their convolutions' sizes in tensor buffers (kernel, stride, padding), so the
# padding computed from them is data; the wrapped Conv1d holds the same sizes as Python ints
_KERNEL = "((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1)"
_PADDING = f"({_KERNEL} - self.conv.stride[0])"
_CONV_SIZES_HOOK = hooks.replace_expressions(
    {
        "self.kernel_size": _KERNEL,
        "self.stride": "self.conv.stride[0]",
        "self.padding_total": _PADDING,
        "self.padding_right": f"({_PADDING} // 2)",
        "self.padding_left": f"({_PADDING} - {_PADDING} // 2)",
        "torch.ceil(n_frames).to(torch.int64)": "math.ceil(n_frames)",
    }
)
for _family, _conv in [
    ("encodec", "EncodecConv1d"),
    ("mimi", "MimiConv1d"),
    ("pocket_tts_audio_tokenizer", "PocketTTSAudioTokenizerConv1d"),
]:
    for _method in ("_get_extra_padding_for_conv1d", "forward"):
        register(f"{_M}{_family}.modeling_{_family}", f"{_conv}.{_method}", pre_rewriter=_CONV_SIZES_HOOK)
# and Encodec's chunk loop: under export, one chunk (the whole waveform) when the config has no
# chunk length, as `range(0, n, n)` gives, without making export specialise the length n
_ONE_CHUNK = "self.config.chunk_length is not None or not torch.compiler.is_compiling()"
register(
    _M + "encodec.modeling_encodec",
    "EncodecModel.encode",
    pre_rewriter=hooks.replace_expressions(
        {"range(0, input_length, stride)": f"(range(0, input_length, stride) if {_ONE_CHUNK} else [0])"}
    ),
)


# relative position encodings cached up to 5,000 positions: whether the cache is long enough is
# a test on the output length, which is data (the predicted durations); under export they are
# computed for the length needed, the values the cache holds
register(
    _M + "fastspeech2_conformer.modeling_fastspeech2_conformer",
    "FastSpeech2ConformerRelPositionalEncoding.extend_pos_enc",
    pre_rewriter=hooks.replace_expressions(
        {"pos_enc is not None": "pos_enc is not None and not torch.compiler.is_compiling()"}
    ),
)

# attention split per image at data-dependent lengths (`torch.split(t, lengths.tolist())`): one
# block-diagonally masked attention under export. Every module whose vision (or audio) attention has
# the per-chunk list form; the loop-and-append form (Cosmos3Edge, Radio...) is another shape of code.
BLOCK_DIAGONAL = [
    ("cohere_compass", "CohereCompassVisionAttention"),
    ("dots3_note", "Dots3NoteVisionAttention"),
    ("ernie4_5_vl_moe", "Ernie4_5_VLMoeVisionAttention"),
    ("exaone4_5", "Exaone4_5_VisionAttention"),
    ("glm4v", "Glm4vVisionAttention"),
    ("glm4v_moe", "Glm4vMoeVisionAttention"),
    ("glm5_next", "Glm5NextVisionAttention"),
    ("glm_image", "GlmImageVisionAttention"),
    ("glm_ocr", "GlmOcrVisionAttention"),
    ("hunyuan_vl", "HunYuanVLVisionAttention"),
    ("kimi_k25", "Kimi_K25VisionAttention"),
    ("minicpm_ocr", "MiniCPMOcrVisionAttention"),
    ("minicpmv4_6", "MiniCPMV4_6VisionAttention"),
    ("minicpmv4_7", "MiniCPMV4_7VisionAttention"),
    ("muse_glimmer", "MuseGlimmerVisionAttention"),
    ("muse_spark", "MuseSparkVisionAttention"),
    ("qwen2_5_omni", "Qwen2_5OmniAudioAttention"),
    ("qwen2_5_omni", "Qwen2_5OmniVisionAttention"),
    ("qwen2_5_vl", "Qwen2_5_VLVisionAttention"),
    ("qwen2_vl", "VisionAttention"),
    ("qwen3_5", "Qwen3_5VisionAttention"),
    ("qwen3_5_moe", "Qwen3_5MoeVisionAttention"),
    ("qwen3_asr", "Qwen3ASRAudioAttention"),
    ("qwen3_omni_moe", "Qwen3OmniMoeAudioAttention"),
    ("qwen3_omni_moe", "Qwen3OmniMoeVisionAttention"),
    ("qwen3_vl", "Qwen3VLVisionAttention"),
    ("qwen3_vl_moe", "Qwen3VLMoeVisionAttention"),
    ("qwen4_exp", "Qwen4ExpVisionAttention"),
]
for _family, _attention in BLOCK_DIAGONAL:
    register(f"{_M}{_family}.modeling_{_family}", f"{_attention}.forward", pre_rewriter=hooks.block_diagonal_attention)


def resolve(module: str, qualname: str):
    """The object ``module:qualname`` names (class attributes looked up through ``__dict__``)."""
    obj = importlib.import_module(module)
    parts = qualname.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part)
    return obj.__dict__[parts[-1]] if isinstance(obj, type) else getattr(obj, parts[-1])


def _class_of(name_or_class):
    """A class, or the class of that name in transformers or in a catalogued modeling module."""
    if isinstance(name_or_class, type):
        return name_or_class
    import transformers

    found = getattr(transformers, name_or_class, None)
    if isinstance(found, type):
        return found
    # layers and heads transformers does not export (MarianEncoder, MvpPrompt, LEDClassificationHead...)
    for module in CATALOGUE:
        found = getattr(importlib.import_module(module), name_or_class, None)
        if isinstance(found, type):
            return found
    return None


def code_needing_rewriting(name_or_class):
    """Rewrite specs (``{"function": f, **hooks}``) a model or layer class needs, or None.

    A layer class gets its own entries; any other class of a catalogued modeling module (a
    full model such as ``BartForConditionalGeneration``) gets every entry of that module,
    possibly none (known, nothing to rewrite). None: a class of no catalogued module.
    """
    cls = _class_of(name_or_class)
    if cls is None or cls.__module__ not in CATALOGUE:
        return None
    entries = CATALOGUE[cls.__module__]
    own = {q: h for q, h in entries.items() if q.split(".")[0] == cls.__name__}
    chosen = own or entries
    return [{"function": resolve(cls.__module__, q), **h} for q, h in chosen.items()]


discovery.CATALOGUES.append(code_needing_rewriting)
