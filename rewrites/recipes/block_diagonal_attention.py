# unbranch recipe block_diagonal_attention, shown on CohereCompassVisionAttention.forward (transformers.models.cohere_compass.modeling_cohere_compass); `unbranch emit` regenerates it.
# It rewrites the forward of these 28 classes, picked by their source matching the pattern
#   \blengths\.tolist\(\)(?s:.*?)\battn_outputs = \[(?s:.*?)\bin zip\(\*splits\)\s*\](?s:.*?)\btorch\.cat\(attn_outputs\b
# in this version:
#   transformers.models.cohere_compass.modeling_cohere_compass:CohereCompassVisionAttention.forward
#   transformers.models.dots3_note.modeling_dots3_note:Dots3NoteVisionAttention.forward
#   transformers.models.ernie4_5_vl_moe.modeling_ernie4_5_vl_moe:Ernie4_5_VLMoeVisionAttention.forward
#   transformers.models.exaone4_5.modeling_exaone4_5:Exaone4_5_VisionAttention.forward
#   transformers.models.glm4v.modeling_glm4v:Glm4vVisionAttention.forward
#   transformers.models.glm4v_moe.modeling_glm4v_moe:Glm4vMoeVisionAttention.forward
#   transformers.models.glm5_next.modeling_glm5_next:Glm5NextVisionAttention.forward
#   transformers.models.glm_image.modeling_glm_image:GlmImageVisionAttention.forward
#   transformers.models.glm_ocr.modeling_glm_ocr:GlmOcrVisionAttention.forward
#   transformers.models.hunyuan_vl.modeling_hunyuan_vl:HunYuanVLVisionAttention.forward
#   transformers.models.kimi_k25.modeling_kimi_k25:Kimi_K25VisionAttention.forward
#   transformers.models.minicpm_ocr.modeling_minicpm_ocr:MiniCPMOcrVisionAttention.forward
#   transformers.models.minicpmv4_6.modeling_minicpmv4_6:MiniCPMV4_6VisionAttention.forward
#   transformers.models.minicpmv4_7.modeling_minicpmv4_7:MiniCPMV4_7VisionAttention.forward
#   transformers.models.muse_glimmer.modeling_muse_glimmer:MuseGlimmerVisionAttention.forward
#   transformers.models.muse_spark.modeling_muse_spark:MuseSparkVisionAttention.forward
#   transformers.models.qwen2_5_omni.modeling_qwen2_5_omni:Qwen2_5OmniAudioAttention.forward
#   transformers.models.qwen2_5_omni.modeling_qwen2_5_omni:Qwen2_5OmniVisionAttention.forward
#   transformers.models.qwen2_5_vl.modeling_qwen2_5_vl:Qwen2_5_VLVisionAttention.forward
#   transformers.models.qwen2_vl.modeling_qwen2_vl:VisionAttention.forward
#   transformers.models.qwen3_5.modeling_qwen3_5:Qwen3_5VisionAttention.forward
#   transformers.models.qwen3_5_moe.modeling_qwen3_5_moe:Qwen3_5MoeVisionAttention.forward
#   transformers.models.qwen3_asr.modeling_qwen3_asr:Qwen3ASRAudioAttention.forward
#   transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe:Qwen3OmniMoeAudioAttention.forward
#   transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe:Qwen3OmniMoeVisionAttention.forward
#   transformers.models.qwen3_vl.modeling_qwen3_vl:Qwen3VLVisionAttention.forward
#   transformers.models.qwen3_vl_moe.modeling_qwen3_vl_moe:Qwen3VLMoeVisionAttention.forward
#   transformers.models.qwen4_exp.modeling_qwen4_exp:Qwen4ExpVisionAttention.forward
def forward(
    self,
    hidden_states: torch.Tensor,
    cu_seqlens: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
    max_seqlen: int | None = None,
    **kwargs,
) -> torch.Tensor:
    seq_length = hidden_states.shape[0]
    query_states, key_states, value_states = (
        self.qkv(hidden_states).reshape(seq_length, 3, self.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
    )
    cos, sin = position_embeddings
    query_states, key_states = apply_rotary_pos_emb_vision(query_states, key_states, cos, sin)

    query_states = query_states.transpose(0, 1).unsqueeze(0)
    key_states = key_states.transpose(0, 1).unsqueeze(0)
    value_states = value_states.transpose(0, 1).unsqueeze(0)

    attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
        self.config._attn_implementation, eager_attention_forward
    )

    if is_flash_attention_requested(self.config):
        # Flash Attention: Use cu_seqlens for variable length attention
        max_seqlen = get_max_seqlen(cu_seqlens, self.config, kwargs={"max_seqlen": max_seqlen})
        attn_output, _ = attention_interface(
            self,
            query_states,
            key_states,
            value_states,
            attention_mask=None,
            scaling=self.scaling,
            dropout=0.0 if not self.training else self.attention_dropout,
            cu_seq_lens_q=cu_seqlens,
            cu_seq_lens_k=cu_seqlens,
            max_length_q=max_seqlen,
            max_length_k=max_seqlen,
            is_causal=False,
            **kwargs,
        )
    else:
        # Other implementations: Process each chunk separately
        if torch.compiler.is_compiling():
            # under export: one attention over all the chunks, masked to each chunk's own positions
            segment = torch.searchsorted(cu_seqlens[1:].contiguous(), torch.arange(query_states.shape[2], device=query_states.device), right=True)
            same = (segment[:, None] == segment[None, :])[None, None]
            mask = torch.zeros(same.shape, dtype=query_states.dtype, device=query_states.device).masked_fill(~same, torch.finfo(query_states.dtype).min)
            attn_output = attention_interface(
                    self,
                    query_states,
                    key_states,
                    value_states,
                    attention_mask=mask,
                    scaling=self.scaling,
                    dropout=0.0 if not self.training else self.attention_dropout,
                    is_causal=False,
                    **kwargs,
                )[0]
        else:
            lengths = cu_seqlens[1:] - cu_seqlens[:-1]
            splits = [
                torch.split(tensor, lengths.tolist(), dim=2) for tensor in (query_states, key_states, value_states)
            ]

            attn_outputs = [
                attention_interface(
                    self,
                    q,
                    k,
                    v,
                    attention_mask=None,
                    scaling=self.scaling,
                    dropout=0.0 if not self.training else self.attention_dropout,
                    is_causal=False,
                    **kwargs,
                )[0]
                for q, k, v in zip(*splits)
            ]
            attn_output = torch.cat(attn_outputs, dim=1)

    attn_output = attn_output.reshape(seq_length, -1).contiguous()
    attn_output = self.proj(attn_output)
    return attn_output
