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

    def build(self, name: str, dtype=torch.float32) -> torch.nn.Module:
        import transformers

        torch.manual_seed(0)
        config = getattr(transformers, self.config)(**self.kwargs)
        return getattr(transformers, name)(config).eval().to(dtype)

    def inputs(self, batch: int, seq: int, flip: bool = False) -> dict:
        g = torch.Generator().manual_seed(batch * 100 + seq)
        ids = torch.randint(3, 100, (batch, seq), generator=g)
        kw: dict = {"input_ids": ids}
        if self.attention_mask or self.flip_inputs:  # the same keys whether flipped or not
            kw["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
        if flip and self.flip_inputs == "pad":
            ids[0, -2:] = self.pad_token_id
            kw["attention_mask"][0, -2:] = 0
        if self.encoder_decoder:
            kw["decoder_input_ids"] = torch.randint(3, 100, (batch, max(seq - 2, 2)), generator=g)
            kw["use_cache"] = False
        return kw

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
}
