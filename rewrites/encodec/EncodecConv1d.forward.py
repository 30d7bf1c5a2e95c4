# unbranch rewrite of EncodecConv1d.forward (transformers.models.encodec.modeling_encodec); `unbranch emit` regenerates it
def forward(self, hidden_states):
    extra_padding = self._get_extra_padding_for_conv1d(hidden_states)

    if self.causal:
        # Left padding for causal
        hidden_states = self._pad1d(hidden_states, ((((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - self.conv.stride[0]), extra_padding), mode=self.pad_mode)
    else:
        # Asymmetric padding required for odd strides
        padding_right = (((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - self.conv.stride[0]) // 2
        padding_left = (((self.conv.kernel_size[0] - 1) * self.conv.dilation[0] + 1) - self.conv.stride[0]) - padding_right
        hidden_states = self._pad1d(
            hidden_states, (padding_left, padding_right + extra_padding), mode=self.pad_mode
        )

    hidden_states = self.conv(hidden_states)

    if self.norm_type == "time_group_norm":
        hidden_states = self.norm(hidden_states)

    return hidden_states
