# unbranch rewrite of make_padding_mask (transformers.models.fsmt.modeling_fsmt); `unbranch emit` regenerates it
def make_padding_mask(input_ids, padding_idx=1):
    """True for pad tokens"""
    padding_mask = input_ids.eq(padding_idx)
    return padding_mask
