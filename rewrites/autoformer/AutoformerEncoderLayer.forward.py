# unbranch rewrite of AutoformerEncoderLayer.forward (transformers.models.autoformer.modeling_autoformer); `unbranch emit` regenerates it
def forward(
    self,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor = None,
    **kwargs: Unpack[TransformersKwargs],
) -> torch.Tensor:
    """
    Args:
        hidden_states (`torch.Tensor`): input to the layer of shape `(batch, seq_len, embed_dim)`
        attention_mask (`torch.Tensor`): attention mask of size
            `(batch, 1, tgt_len, src_len)` where padding elements are indicated by very large negative values.
    """
    residual = hidden_states
    hidden_states, _ = self.self_attn(
        hidden_states,
        attention_mask=attention_mask,
        **kwargs,
    )
    hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
    hidden_states = residual + hidden_states
    # added layer norm here as an improvement
    hidden_states = self.self_attn_layer_norm(hidden_states)
    hidden_states, _ = self.decomp1(hidden_states)

    residual = hidden_states
    hidden_states = self.activation_fn(self.fc1(hidden_states))
    hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
    hidden_states = self.fc2(hidden_states)
    hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
    hidden_states = residual + hidden_states
    hidden_states, _ = self.decomp2(hidden_states)
    hidden_states = self.final_layer_norm(hidden_states)

    def branch_cond_then_1(hidden_states):
        clamp_value = torch.finfo(hidden_states.dtype).max - 1000
        hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
        return hidden_states
    def branch_cond_else_1(hidden_states):
        return hidden_states
    hidden_states = _ub.if_stmt(hidden_states.dtype == torch.float16 and _ub.not_(torch.isfinite(hidden_states).all()), branch_cond_then_1, branch_cond_else_1, (hidden_states,))

    return hidden_states
