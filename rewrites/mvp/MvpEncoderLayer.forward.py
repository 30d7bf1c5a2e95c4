# unbranch rewrite of MvpEncoderLayer.forward (transformers.models.mvp.modeling_mvp); `unbranch emit` regenerates it
def forward(
    self,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor,
    self_attn_prompt: torch.Tensor,
    output_attentions: bool | None = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """
    Args:
        hidden_states (`torch.Tensor`): input to the layer of shape `(batch, seq_len, embed_dim)`
        attention_mask (`torch.Tensor`): attention mask of size
            `(batch, 1, tgt_len, src_len)` where padding elements are indicated by very large negative values.
        self_attn_prompt (`torch.Tensor`): prompt of self attention of shape
            `(2, encoder_attention_heads, pro_len, head_dim)`.
        output_attentions (`bool`, *optional*):
            Whether or not to return the attentions tensors of all attention layers. See `attentions` under
            returned tensors for more detail.
    """
    residual = hidden_states
    hidden_states, attn_weights = self.self_attn(
        hidden_states=hidden_states,
        attention_mask=attention_mask,
        attn_prompt=self_attn_prompt,
        output_attentions=output_attentions,
    )
    hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
    hidden_states = residual + hidden_states
    hidden_states = self.self_attn_layer_norm(hidden_states)

    residual = hidden_states
    hidden_states = self.activation_fn(self.fc1(hidden_states))
    hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
    hidden_states = self.fc2(hidden_states)
    hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
    hidden_states = residual + hidden_states
    hidden_states = self.final_layer_norm(hidden_states)

    def branch_cond_then_1(hidden_states):
        clamp_value = torch.finfo(hidden_states.dtype).max - 1000
        hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
        return hidden_states
    def branch_cond_else_1(hidden_states):
        return hidden_states
    hidden_states = _ub.if_stmt(hidden_states.dtype == torch.float16 and _ub.not_(torch.isfinite(hidden_states).all()), branch_cond_then_1, branch_cond_else_1, (hidden_states,))

    return hidden_states, attn_weights
