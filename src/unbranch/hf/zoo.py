"""Tiny transformers models built from local configs (no download), with inputs and branch flips.

Each entry knows how to build a model of a few thousand parameters, make inputs of any batch
and sequence length, and, where the model has a data-dependent branch, how to make inputs or
weights that take its other side (``flip``), so ``unbranch validate`` can check both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

_BART = dict(
    d_model=16,
    encoder_layers=1,
    decoder_layers=1,
    encoder_attention_heads=2,
    decoder_attention_heads=2,
    encoder_ffn_dim=32,
    decoder_ffn_dim=32,
    vocab_size=100,
    max_position_embeddings=64,
)
_T5 = dict(
    vocab_size=100,
    d_model=16,
    d_kv=8,
    d_ff=32,
    num_layers=1,
    num_decoder_layers=1,
    num_heads=2,
    relative_attention_num_buckets=8,
    relative_attention_max_distance=16,
)
_DECODER = dict(  # Llama-like decoder-only models
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    vocab_size=100,
    max_position_embeddings=64,
    bos_token_id=1,
    eos_token_id=2,
    use_cache=False,  # a DynamicCache in the output is no pytree: export rejects it
)
_ENCODER = dict(  # BERT-like encoders
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    vocab_size=100,
    max_position_embeddings=64,
)
# float16 overflow right before the encoder layer's clamp: its LayerNorm scaled past float16's max
_OVERFLOW_LAYER_NORM = {r"(.*\.)?encoder\.layers\.0\.final_layer_norm\.(weight|bias)": 60000.0}


@dataclass
class Tiny:
    config: str  # config class name in transformers
    kwargs: dict
    encoder_decoder: bool = True
    attention_mask: bool = False  # pass an explicit attention mask (some models need one to export)
    flip_weights: dict = field(default_factory=dict)  # parameter-name regex -> value that flips a branch
    flip_inputs: str | None = None  # "pad": pad tokens in the input
    pad_token_id: int = 1
    inputs_kind: str = "text"  # "text": input_ids; "layout": and word boxes; "image": pixel_values; "audio": mel

    def build(self, name: str, dtype=torch.float32) -> torch.nn.Module:
        import transformers

        torch.manual_seed(0)
        config = getattr(transformers, self.config)(**self.kwargs)
        return getattr(transformers, name)(config).eval().to(dtype)

    def inputs(self, batch: int, seq: int, flip: bool = False, pad: bool = False) -> dict:
        """Inputs of ``batch`` rows of ``seq`` tokens (decoder tokens only: configs fix image and mel sizes).

        ``pad`` (or a "pad" flip) ends the first row in two padding tokens, masked out: text
        models with an attention mask only.
        """
        g = torch.Generator().manual_seed(batch * 100 + seq)
        if self.inputs_kind == "image":
            size = self.kwargs["image_size"]
            kw: dict = {"pixel_values": torch.randn(batch, 3, size, size, generator=g)}
        elif self.inputs_kind == "audio":
            frames = 2 * self.kwargs["max_source_positions"]  # the length Whisper's encoder insists on
            kw = {"input_features": torch.randn(batch, self.kwargs["num_mel_bins"], frames, generator=g)}
        else:
            ids = torch.randint(3, 100, (batch, seq), generator=g)
            kw = {"input_ids": ids}
            if self.attention_mask or self.flip_inputs:  # the same keys whether flipped or not
                kw["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
            if pad or (flip and self.flip_inputs == "pad"):
                ids[0, -2:] = self.pad_token_id
                kw["attention_mask"][0, -2:] = 0
            if self.inputs_kind == "layout":  # (x0, y0, x1, y1) in [0, 1]
                corner = torch.rand(batch, seq, 2, generator=g) / 2
                kw["bbox"] = torch.cat([corner, corner + 0.5], dim=-1)
        if self.encoder_decoder:
            kw["decoder_input_ids"] = torch.randint(3, 100, (batch, max(seq - 2, 2)), generator=g)
            kw["use_cache"] = False
        return kw

    def dynamic_shapes(self, kwargs: dict) -> dict:
        """Dynamic batch for every tensor, dynamic length for token tensors (not pixels or mel frames)."""
        dyn, fixed_size = torch.export.Dim.DYNAMIC, ("pixel_values", "input_features")
        return {
            k: ({0: dyn} if k in fixed_size else {0: dyn, 1: dyn}) if isinstance(v, torch.Tensor) else None
            for k, v in kwargs.items()
        }

    def flip_model(self, model: torch.nn.Module) -> bool:
        """Change weights so the data-dependent branch takes its other side; False if none."""
        done = False
        with torch.no_grad():
            for name, p in model.named_parameters():
                for pattern, value in self.flip_weights.items():
                    if re.fullmatch(pattern, name):
                        p.fill_(value)
                        done = True
        return done


MODELS: dict[str, Tiny] = {
    "BartModel": Tiny("BartConfig", _BART, flip_weights=_OVERFLOW_LAYER_NORM),
    "PLBartModel": Tiny("PLBartConfig", _BART, flip_weights=_OVERFLOW_LAYER_NORM),
    "MarianMTModel": Tiny(
        "MarianConfig",
        dict(_BART, decoder_vocab_size=100, pad_token_id=1, eos_token_id=2, decoder_start_token_id=1),
        flip_weights=_OVERFLOW_LAYER_NORM,
    ),
    "MvpModel": Tiny("MvpConfig", _BART, flip_weights=_OVERFLOW_LAYER_NORM),
    "BlenderbotSmallModel": Tiny("BlenderbotSmallConfig", _BART, flip_weights=_OVERFLOW_LAYER_NORM),
    "LEDModel": Tiny(
        "LEDConfig",
        dict(
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            vocab_size=100,
            max_encoder_position_embeddings=64,
            max_decoder_position_embeddings=64,
            attention_window=4,
            onnx_export=True,
        ),  # LED's own switch to export-friendly chunking (unfold instead of a tensor div)
        flip_weights=_OVERFLOW_LAYER_NORM,
    ),
    "NllbMoeModel": Tiny(
        "NllbMoeConfig",
        dict(
            _BART,
            encoder_layers=2,
            decoder_layers=2,
            num_experts=2,
            expert_capacity=8,
            encoder_sparse_step=2,
            decoder_sparse_step=2,
        ),
        flip_weights={r"(en|de)coder\.layers\.0\.ffn\.fc2\.weight": 60000.0},
    ),
    "LongT5Model": Tiny(
        "LongT5Config",
        dict(_T5, local_radius=4, global_block_size=4),
        attention_mask=True,
        flip_weights={r"encoder\.block\.0\.layer\.0\.LocalSelfAttention\.o\.weight": 30000.0},
    ),
    "FSMTModel": Tiny(
        "FSMTConfig",
        dict(
            langs=["en", "de"],
            src_vocab_size=100,
            tgt_vocab_size=100,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            max_position_embeddings=64,
        ),
        flip_inputs="pad",
    ),
    "BlenderbotModel": Tiny("BlenderbotConfig", _BART),
    "PegasusModel": Tiny("PegasusConfig", _BART),
    "M2M100Model": Tiny("M2M100Config", _BART),
    "T5Model": Tiny("T5Config", _T5),
    "BigBirdPegasusModel": Tiny(
        "BigBirdPegasusConfig",
        dict(_BART, attention_type="original_full", pad_token_id=0, bos_token_id=2, eos_token_id=1),
        pad_token_id=0,
        flip_weights=_OVERFLOW_LAYER_NORM,
    ),
    "UdopModel": Tiny(
        "UdopConfig",
        dict(_T5, max_2d_position_embeddings=64, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0),
        attention_mask=True,
        pad_token_id=0,
        inputs_kind="layout",
    ),
    # models that export without unbranch (issue 7: torch_export_rewrite must change nothing)
    "LlamaModel": Tiny("LlamaConfig", _DECODER, encoder_decoder=False, attention_mask=True),
    "MistralModel": Tiny("MistralConfig", _DECODER, encoder_decoder=False, attention_mask=True),
    "Qwen2Model": Tiny("Qwen2Config", _DECODER, encoder_decoder=False, attention_mask=True),
    "GPTNeoXModel": Tiny(
        "GPTNeoXConfig",
        dict(_DECODER, num_key_value_heads=2),
        encoder_decoder=False,
        attention_mask=True,
    ),
    "GPT2Model": Tiny(
        "GPT2Config",
        dict(
            n_embd=16,
            n_inner=32,
            n_layer=1,
            n_head=2,
            vocab_size=100,
            n_positions=64,
            bos_token_id=1,
            eos_token_id=2,
            use_cache=False,
        ),
        encoder_decoder=False,
        attention_mask=True,
    ),
    "BertModel": Tiny("BertConfig", _ENCODER, encoder_decoder=False, attention_mask=True, pad_token_id=0),
    "RobertaModel": Tiny("RobertaConfig", _ENCODER, encoder_decoder=False, attention_mask=True),
    "DistilBertModel": Tiny(
        "DistilBertConfig",
        dict(dim=16, hidden_dim=32, n_layers=1, n_heads=2, vocab_size=100, max_position_embeddings=64),
        encoder_decoder=False,
        attention_mask=True,
        pad_token_id=0,
    ),
    # native image size, dynamic batch: with interpolate_pos_encoding=True a dynamic height and
    # width export, but guarded on not being the native size (ViT's shortcut for it)
    "ViTModel": Tiny(
        "ViTConfig",
        dict(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=32,
            patch_size=8,
        ),
        encoder_decoder=False,
        inputs_kind="image",
    ),
    "WhisperModel": Tiny(
        "WhisperConfig",
        dict(
            {k: v for k, v in _BART.items() if k != "max_position_embeddings"},
            num_mel_bins=8,
            max_source_positions=16,
            max_target_positions=32,
            pad_token_id=1,
            bos_token_id=2,
            eos_token_id=2,
            decoder_start_token_id=2,
        ),
        inputs_kind="audio",
    ),
}

# models that export in float32 without unbranch: torch_export_rewrite(model) must change nothing
# (tests/test_do_no_harm.py and benchmarks/harm_overhead.py)
EXPORT_TODAY = [
    "BartModel",
    "PLBartModel",
    "MarianMTModel",
    "MvpModel",
    "BlenderbotSmallModel",
    "BigBirdPegasusModel",
    "LongT5Model",
    "WhisperModel",
    "UdopModel",
    "T5Model",
    "BlenderbotModel",
    "PegasusModel",
    "M2M100Model",
    "LlamaModel",
    "MistralModel",
    "Qwen2Model",
    "GPTNeoXModel",
    "GPT2Model",
    "BertModel",
    "RobertaModel",
    "DistilBertModel",
    "ViTModel",
]
