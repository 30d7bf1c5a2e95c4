# unbranch rewrite of LongT5Block.forward (transformers.models.longt5.modeling_longt5); `unbranch emit` regenerates it
def forward(
    self,
    hidden_states,
    attention_mask=None,
    position_bias=None,
    encoder_hidden_states=None,
    encoder_attention_mask=None,
    encoder_decoder_position_bias=None,
    past_key_values=None,
    use_cache=False,
    output_attentions=False,
    return_dict=True,
    **kwargs,
):
    self_attention_outputs = self.layer[0](
        hidden_states,
        attention_mask=attention_mask,
        position_bias=position_bias,
        past_key_values=past_key_values,
        use_cache=use_cache,
        output_attentions=output_attentions,
    )
    hidden_states = self_attention_outputs[0]
    attention_outputs = self_attention_outputs[1:]  # Keep self-attention outputs and relative position weights

    # clamp inf values to enable fp16 inference - check https://github.com/huggingface/transformers/pull/19229/
    def branch_cond_then_1(hidden_states):
        clamp_value = torch.finfo(hidden_states.dtype).max - 1000
        hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
        return hidden_states
    def branch_cond_else_1(hidden_states):
        return hidden_states
    hidden_states = _ub.if_stmt(hidden_states.dtype == torch.float16 and torch.isinf(hidden_states).any(), branch_cond_then_1, branch_cond_else_1, (hidden_states,))

    do_cross_attention = self.is_decoder and encoder_hidden_states is not None
    if do_cross_attention:
        cross_attention_outputs = self.layer[1](
            hidden_states,
            key_value_states=encoder_hidden_states,
            attention_mask=encoder_attention_mask,
            position_bias=encoder_decoder_position_bias,
            past_key_values=past_key_values,
            output_attentions=output_attentions,
        )
        hidden_states = cross_attention_outputs[0]

        # clamp inf values to enable fp16 inference - check https://github.com/huggingface/transformers/pull/19229/
        def branch_cond_then_2(hidden_states):
            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
            return hidden_states
        def branch_cond_else_2(hidden_states):
            return hidden_states
        hidden_states = _ub.if_stmt(hidden_states.dtype == torch.float16 and torch.isinf(hidden_states).any(), branch_cond_then_2, branch_cond_else_2, (hidden_states,))

        # Keep cross-attention outputs and relative position weights
        attention_outputs = attention_outputs + cross_attention_outputs[1:]

    # Apply Feed Forward layer
    hidden_states = self.layer[-1](hidden_states)

    # clamp inf values to enable fp16 inference - check https://github.com/huggingface/transformers/pull/19229/
    def branch_cond_then_3(hidden_states):
        clamp_value = torch.finfo(hidden_states.dtype).max - 1000
        hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
        return hidden_states
    def branch_cond_else_3(hidden_states):
        return hidden_states
    hidden_states = _ub.if_stmt(hidden_states.dtype == torch.float16 and torch.isinf(hidden_states).any(), branch_cond_then_3, branch_cond_else_3, (hidden_states,))

    return (
        (hidden_states,) + attention_outputs
    )  # hidden-states, (self-attention position bias), (self-attention weights), (cross-attention position bias), (cross-attention weights)
