"""Weight streams of the Ethos-U85 (TRM 3.9): SWD/FWD codecs and the weight ordering."""

from .codec import (  # noqa: F401
    FwdHeader,
    SliceInfo,
    WeightStreamError,
    decode_fwd,
    decode_swd,
    decode_swd_ref,
    decode_swd_slices,
    encode_fwd,
    encode_swd,
    fold,
    parse_fwd_header,
    unfold,
)
from .ordering import (  # noqa: F401
    NUM_WD,
    WeightOrder,
    decode_weight_tensor,
    decode_weight_tensor_ref,
    fwd_from_weights,
    fwd_indices,
    microblock_depth,
    num_wd,
    reference_order,
    stream_indices,
    streams_from_weights,
    weights_from_fwd,
    weights_from_streams,
)
