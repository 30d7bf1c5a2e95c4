# unbranch rewrite of MimiConv1d.forward (transformers.models.mimi.modeling_mimi); `unbranch emit` regenerates it
def forward(self, hidden_states, padding_cache=None):
    extra_padding = self._get_extra_padding_for_conv1d(hidden_states)

    if not self.causal and padding_cache is not None:
        raise ValueError("`padding_cache` is not supported for non-causal convolutions.")

    if self.causal and padding_cache is not None:
        layer_padding_cache = padding_cache.update(hidden_states, self.layer_idx)
        hidden_states = torch.cat([layer_padding_cache, hidden_states], dim=2)

    elif self.causal:
        # Left padding for causal
        hidden_states = self._pad1d(hidden_states, ((((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - self.conv.stride[0]), extra_padding), mode=self.pad_mode)

    else:
        hidden_states = self._pad1d(
            hidden_states, (((((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - self.conv.stride[0]) - (((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - self.conv.stride[0]) // 2), ((((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - self.conv.stride[0]) // 2) + extra_padding), mode=self.pad_mode
        )

    hidden_states = self.conv(hidden_states)
    return hidden_states
