"""Valid arguments for every computation call (shared by the argument-error and
command-buffer tests)."""
from tests.bm1880.bm1880_harness import I8, U8, Rig
from tlm.bm1880 import CTRL_NULL, api, bmk1880_tl_prealloc, shape_t2, shape_t4, stride_t4, tensor_gmem_default
from tlm.bm1880.descriptors import DEPENDENCY, KINDS

T = (1, 3, 2, 2)


def tg(addr, shape):
    return tensor_gmem_default(addr, shape_t4(*shape) if len(shape) == 4 else shape_t2(*shape))


def baseline(rig: Rig, name: str) -> dict:
    """Valid arguments for one computation call."""
    al = rig.alloc
    if name == "gdma_copy_gmem":
        return dict(dst=tg(0x1000, T), src=tg(0, T), ctrls=CTRL_NULL)
    if name == "gdma_copy_lmem":
        return dict(dst=al(T), src=al(T))
    if name in ("gdma_load", "gdma_store"):
        return dict(t=al(T), gaddr=0x100, ctrls=CTRL_NULL)
    if name in ("gdma_load_stride", "gdma_store_stride"):
        return dict(t=al(T), gaddr=0x100, stride=stride_t4(12, 4, 2, 1), ctrls=CTRL_NULL)
    if name == "gdma_lrn_shift":
        return dict(dst=al(T), src=al(T), right_shift=True, lrn_step=1)
    if name == "tpu_mul":
        return dict(res_high=None, res_low=al(T), a=al(T), b=al(T), rshift_width=0)
    if name == "tpu_mul_const":
        return dict(res_high=None, res_low=al(T), a=al(T), b=3, b_is_signed=True, rshift_width=0)
    if name == "tpu_mac":
        return dict(res_high=al(T), res_low=al(T), res_is_int8=False, a=al(T), b=al(T), lshift_width=0, rshift_width=0)
    if name == "tpu_mac_const":
        return dict(res_high=al(T), res_low=al(T), res_is_int8=False, a=al(T), b=-3, b_is_signed=True,
                    lshift_width=0, rshift_width=0)
    if name in ("tpu_add", "tpu_sub") or name.endswith("_int16"):
        return dict(res_high=al(T), res_low=al(T), a_high=al(T), a_low=al(T), b_high=al(T), b_low=al(T))
    if name == "tpu_add_const":
        return dict(res_high=None, res_low=al(T), a_high=al(T), a_low=al(T), b=5, b_is_signed=True)
    if name in ("tpu_max", "tpu_min"):
        return {name[4:]: al(T), "a": al(T), "b": al(T)}
    if name in ("tpu_max_const", "tpu_min_const"):
        return {name[4:7]: al(T), "a": al(T), "b": -1, "b_is_signed": True}
    if name == "tpu_arith_shift":
        return dict(res_high=al(T), res_low=al(T), a_high=al(T), a_low=al(T), bits=al(T))
    if name.endswith("_int8"):
        return dict(res=al(T), a=al(T), b=al(T))
    if name == "tpu_copy":
        return dict(dst=al(T), src=al(T))
    if name == "tpu_copy_with_stride":
        return dict(dst=al(T), dst_stride=stride_t4(4, 4, 2, 1), src=al(T), src_stride=stride_t4(4, 4, 2, 1))
    if name == "tpu_mdsum":
        return dict(res_high=None, res_low=al((1, 3, 1, 1), aligned=False), a=al(T))
    if name == "tpu_lut":
        return dict(ofmap=al(T), ifmap=al(T, U8), table=al((1, 32, 16, 16)))
    if name == "tpu_relu":
        return dict(ofmap=al(T), ifmap=al(T))
    if name in ("tpu_conv", "tpu_winograd", "tpu_depthwise", "tpu_max_pooling", "tpu_avg_pooling"):
        conv = name in ("tpu_conv", "tpu_winograd", "tpu_depthwise")
        a = dict(ofmap=al((1, 3, 2, 3 if conv else 2)),
                 ifmap=al((1, 2 if name in ("tpu_conv", "tpu_winograd") else 3, 4, 5)),
                 pad_top=0, pad_bottom=0, pad_left=0, pad_right=0)
        if name == "tpu_conv":
            wl = al((1, 3, 9, 2), aligned=False)
            a.update(weight=bmk1880_tl_prealloc(rig.ctx, wl.laddr, shape_t4(2, 3, 3, 3), I8),
                     bias=al((2, 3, 1, 1), aligned=False), stride_h=1, stride_w=1, dilation_h=1, dilation_w=1,
                     relu_enable=False, rshift_width=0)
        elif name == "tpu_winograd":
            a.update(weight=al((2, 3, 3, 3), aligned=False), bias=None, relu_enable=True, rshift_width=0)
        elif name == "tpu_depthwise":
            a.update(weight=al((1, 3, 3, 3), aligned=False), bias=None, stride_h=1, stride_w=1, rshift_width=0)
        else:
            a.update(kh=2, kw=2, stride_h=2, stride_w=2)
            if name == "tpu_avg_pooling":
                a.update(avg_pooling_const=1, rshift_width=0)
        return a
    if name == "tpu_matrix_mac":
        return dict(res=al((2, 5)), left=al((2, 4)), right=al((4, 5)), bias=al((2, 5)), lshift_width=0,
                    rshift_width=0, res_is_int8=True, ctrls=CTRL_NULL)
    if name == "tpu_matrix_mac_2":
        return dict(res=al((1, 256, 1, 256)), left=al((1, 256, 1, 256)), right=al((256, 16, 1, 16)))
    raise KeyError(name)


def call(rig: Rig, name: str, args: dict):
    fn = getattr(api, f"bmk1880_{name}")
    if name.startswith("gdma_"):
        return fn(rig.ctx, *args.values())
    return fn(rig.ctx, **args)



COMPUTE = [k.name for k in KINDS if k is not DEPENDENCY]
