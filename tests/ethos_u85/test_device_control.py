"""Device control plane: reset and its APB window, IRQ, run/stop/resume, end of stream,
parse errors, bus faults, branches, the step budget and a no-raise fuzz property."""
import os
import random

import numpy as np
import pytest

from tlm.core.errors import Unpredictable
from tlm.ethos_u85 import isa
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.config import Policy
from tlm.ethos_u85.device import Device, StopKind
from tlm.ethos_u85.memory import Channel, Memory, Resp, axcache
from tlm.ethos_u85.ops import KERNEL_OP_NAMES, KERNEL_OPS

OFF = {r.ident: r.offset for r in R.REGISTERS}
CMD, STATUS, RESET, QREAD, QSIZE, QBASE_LO = (OFF[k] for k in ("CMD", "STATUS", "RESET", "QREAD", "QSIZE", "QBASE_LO"))
STREAM = 0x4000
SP, SU, NSP, NSU = 0b01, 0b00, 0b11, 0b10


def enc(*cmds):
    words = []
    for c in cmds:
        name, kw = (c, {}) if isinstance(c, str) else c
        words += isa.encode(name, **kw)
    return words


def dev(words=None, policy=None, pins=None, config="ethos-u85-256", memory=None, **kw):
    d = Device(config, memory=memory, pins=pins, policy=policy, settle=True, **kw)
    if words is not None:
        d.load_stream(STREAM, words)
    return d


def status(d, pprot=SP):
    return R.get("STATUS").decode(d.apb_read(STATUS, pprot)[0])


def rd(d, name, pprot=SP):
    data, err = d.apb_read(OFF[name], pprot)
    assert err == 0
    return data


def events(d, name):
    return [e for n, e in d.events if n == name]


# ================================================================================= reset
def test_reset_sequence_window_and_polling():
    d = Device(policy=Policy(reset_cycles=9, apb_cycles=2))
    polls = []
    for _ in range(20):
        v, err = d.apb_read(STATUS)
        polls.append(v)
        if not v & 8:
            break
    assert polls[0] == 0x8 and polls[-1] == 0 and 2 <= len(polls) <= 6
    assert all(p == 0x8 for p in polls[:-1])
    assert [n for n, _ in d.events].count("reset_done") == 1


def test_reads_and_writes_during_reset_follow_trm_3_1_1():
    d = dev(policy=Policy(reset_cycles=64))
    d.apb_write(OFF["BASEP2_LO"], 0x1111)
    d.apb_write(RESET, 0b00)
    assert d.in_reset
    assert d.apb_read(STATUS) == (0x8, 0)
    assert d.apb_read(OFF["ID"]) == (0, 0)                   # others read 0
    assert d.apb_read(OFF["CONFIG"]) == (0, 0)
    assert d.apb_write(OFF["BASEP2_LO"], 0x2222) == 1         # other writes: PSLVERR
    assert d.apb_write(QBASE_LO, 0x40) == 1
    assert d.apb_write(CMD, 0x0000_0011) == 0                 # CMD: only [3:2] taken (RS/SQ ignored)
    assert d.apb_write(RESET, 0b11) == 0                      # RESET: privilege update, no restart
    remaining = d.reset_remaining
    d.wait_reset()
    assert not d.running
    assert rd(d, "CMD") == 0x0                                # bits [3:2] from the write (0), RS not taken
    assert rd(d, "BASEP2_LO") == 0 and rd(d, "QBASE_LO") == 0  # cleared, and the in-reset writes lost
    assert d.prot_word == 0b11 and rd(d, "RESET") == 0b11     # pending privilege from the second write
    assert remaining < 64 - 6                                 # the sequence was not restarted


def test_reset_window_stall_policy():
    d = dev(policy=Policy(reset_read="stall", reset_write="stall", reset_cycles=64))
    d.apb_write(RESET, 0)
    assert d.in_reset
    assert d.apb_read(OFF["ID"]) == (0x20007001, 0)           # delayed to the end of the sequence
    assert not d.in_reset
    d.apb_write(RESET, 0)
    assert d.apb_write(OFF["BASEP2_LO"], 0x2222) == 0 and rd(d, "BASEP2_LO") == 0x2222


def test_reset_window_chapter7_policy_ignores_cmd_and_reset():
    d = dev(policy=Policy(reset_write="ignore_cmd_reset", reset_cycles=64))
    d.apb_write(RESET, 0b01)
    assert d.apb_write(CMD, 0x0) == 0 and d.apb_write(RESET, 0b10) == 0
    assert d.apb_write(OFF["MEM_ATTR1"], 5) == 1
    d.wait_reset()
    assert rd(d, "CMD") == 0xC and d.prot_word == 0b01 and rd(d, "RESET") == 0b01


@pytest.mark.parametrize("start_cpl,start_csl", [(0, 1), (1, 0)])
def test_soft_reset_pending_privilege_and_security_rules(start_cpl, start_csl):
    for pprot in (SP, SU, NSP, NSU):
        for pending in range(4):
            d = dev(pins=dict(PORPL=start_cpl, PORSL=start_csl))
            permitted = (pprot & 1) >= start_cpl and (pprot >> 1) <= start_csl
            err = d.apb_write(RESET, pending, pprot)
            if not permitted:
                assert err == 1 and not d.in_reset and d.prot_word == start_csl << 1 | start_cpl
                continue
            assert err == 0 and d.in_reset
            d.wait_reset()
            cpl = min(pprot & 1, pending & 1)                    # TRM 3.3.1.4
            csl = (pending >> 1) | (pprot >> 1)                  # TRM 2.2: never more secure than the requester
            assert d.prot_word == csl << 1 | cpl, (pprot, pending)


def test_soft_reset_csl_policy_pending_only():
    d = dev(pins=dict(PORPL=0, PORSL=1), policy=Policy(csl_rule="pending"))
    d.apb_write(RESET, 0b00, NSU)
    d.wait_reset()
    assert d.prot_word == 0b00


def test_prot_update_timing_policy():
    d = dev(pins=dict(PORPL=1, PORSL=0))
    d.apb_write(RESET, 0b11, SP)
    assert d.prot_word == 0b01                                # applied at the end (CPM step 5)
    d.wait_reset()
    assert d.prot_word == 0b11
    e = dev(pins=dict(PORPL=1, PORSL=0), policy=Policy(prot_update_at_end=False))
    e.apb_write(RESET, 0b11, SP)
    assert e.prot_word == 0b11 and e.in_reset


def test_soft_reset_clears_everything_and_raises_no_irq():
    words = enc(("NPU_SET_IFM_REGION", dict(region=3)), ("NPU_OP_IRQ", dict(mask=0x8001)), "NPU_OP_STOP")
    d = dev(words)
    for name, v in (("BASEP5_LO", 0xABC0), ("BASEP5_HI", 0x12), ("MEM_ATTR3", 0xB7), ("REGIONCFG", 0xFFFF),
                    ("AXI_EXT", 0x31F3F), ("POWER_CTRL", 7), ("PMCNTENSET", 0x80000003),
                    ("PMEVTYPER2", 0x11), ("PMCR", 1), ("QCONFIG", 2)):
        d.apb_write(OFF[name], v)
    d.lut[:] = 7
    d.start()
    d.run()
    assert d.irq and status(d)["irq_history_mask"] == 0x8001 and d.rf.field("NPU_SET_IFM_REGION", "region") == 3
    irq_events = len(events(d, "irq"))
    d.apb_write(RESET, 0)
    assert not d.irq                                           # cleared, no new IRQ on a reset stop
    d.wait_reset()
    for r in R.REGISTERS:
        if r.ident == "STATUS":
            assert rd(d, "STATUS") == 0
        else:
            assert d.read_register(r.offset) == R.reset_word(r, d.config, d.pins), r.ident
    assert d.rf.field("NPU_SET_IFM_REGION", "region") == 0 and not d.lut.any()
    assert [e["level"] for e in events(d, "irq")[irq_events:]] == [0]


def test_reset_of_running_npu_stops_without_irq():
    d = dev(enc(("NPU_OP_BRANCH", dict(branch_target=0))))
    d.start()
    assert d.run(max_steps=5).kind == StopKind.BUDGET and d.running
    d.apb_write(RESET, 0)
    assert not d.running and not d.irq
    d.wait_reset()
    assert status(d)["state"] == 0 and not d.irq


def test_power_control_masked_until_next_cmd_write():
    d = dev()
    assert d.power_off_permitted                               # CMD=0xC out of hard reset
    d.apb_write(RESET, 0)
    d.wait_reset()
    assert d.power_q_enable and not d.power_off_permitted      # TRM 3.3.1.4: masked
    d.apb_write(CMD, 0xC)
    assert d.power_off_permitted
    d.apb_write(CMD, 0x4)
    assert not d.power_off_permitted and d.clock_off_permitted


def test_power_down_needs_interrupts_cleared():
    d = dev(enc(("NPU_OP_IRQ", dict(mask=1))))
    d.start()
    d.run()
    assert d.irq and not d.power_off_permitted
    d.apb_write(CMD, 0xC | 2)
    assert not d.irq and d.power_off_permitted


def test_hard_reset_api_uses_por_pins_and_restarts_sequence():
    d = dev(pins=dict(PORPL=1, PORSL=1))
    d.apb_write(OFF["BASEP0_LO"], 0x40, NSP)
    d.pins = d.pins.replace(PORPL=0, CFGEXTCAP=0x1)
    d.reset()
    assert d.in_reset and d.apb_read(STATUS, NSU) == (8, 0)
    d.wait_reset()
    assert d.prot_word == 0b10 and rd(d, "BASEP0_LO", NSU) == 0 and rd(d, "CFG_EXT_CAP", NSU) == 1


# ================================================================================= IRQ
def test_irq_set_clear_and_history():
    words = enc(("NPU_OP_IRQ", dict(mask=0x0005)), ("NPU_OP_IRQ", dict(mask=0x0100)),
                ("NPU_OP_STOP", dict(mask=0x8000)))
    d = dev(words)
    levels = []
    d.hooks.append(lambda ev, det: ev == "irq" and levels.append(det["level"]))
    d.start()
    r = d.run()
    assert r.kind == StopKind.STOP and d.irq
    st = status(d)
    assert st["irq_raised"] == 1 and st["irq_history_mask"] == 0x8105 and st["state"] == 0
    d.apb_write(CMD, 0xC | 0x2)                                 # clear_irq
    st = status(d)
    assert not d.irq and st["irq_raised"] == 0 and st["irq_history_mask"] == 0x8105
    d.apb_write(CMD, 0xC | 0x0101_0000)                         # clear_irq_history bits 0 and 8
    assert status(d)["irq_history_mask"] == 0x8004
    d.apb_write(CMD, 0xC | 0xFFFF_0000)
    assert status(d)["irq_history_mask"] == 0
    assert levels == [1, 0]


def test_npu_op_irq_does_not_stop():
    d = dev(enc(("NPU_OP_IRQ", dict(mask=2)), ("NPU_SET_OFM_REGION", dict(region=5))))
    d.start()
    r = d.run()
    assert r.kind == StopKind.END and r.steps == 2 and d.rf.field("NPU_SET_OFM_REGION", "region") == 5


# ================================================================================= run/stop/resume
RUN_STREAM = enc(("NPU_SET_IFM_REGION", dict(region=1)), ("NPU_OP_STOP", dict(mask=1)),
                 ("NPU_SET_IFM_REGION", dict(region=2)), ("NPU_OP_STOP", dict(mask=2)),
                 ("NPU_SET_IFM_REGION", dict(region=3)))


def test_stop_and_resume_at_qread():
    d = dev(RUN_STREAM)
    assert status(d)["state"] == 0
    d.start()
    assert status(d)["state"] == 1 and d.running
    r = d.run()
    assert r.kind == StopKind.STOP and r.qread == 8 and rd(d, "QREAD") == 8
    assert d.rf.field("NPU_SET_IFM_REGION", "region") == 1
    d.apb_write(CMD, 0xC | 2)
    d.start()
    r = d.run()
    assert r.kind == StopKind.STOP and r.qread == 16 and d.rf.field("NPU_SET_IFM_REGION", "region") == 2
    d.start()
    r = d.run()
    assert r.kind == StopKind.END and r.qread == 20 == rd(d, "QREAD")
    assert d.rf.field("NPU_SET_IFM_REGION", "region") == 3
    assert status(d)["cmd_end_reached"] == 1


@pytest.mark.parametrize("reg", ["QBASE_LO", "QBASE_HI", "QSIZE"])
def test_writing_qbase_or_qsize_restarts_at_qbase(reg):
    d = dev(RUN_STREAM)
    d.start()
    d.run()
    assert rd(d, "QREAD") == 8
    d.apb_write(OFF[reg], rd(d, reg))                              # same value: still "written"
    d.start()
    assert rd(d, "QREAD") == 0
    r = d.run()
    assert r.kind == StopKind.STOP and r.qread == 8 and r.steps == 2


def test_start_while_running_has_no_effect():
    d = dev(RUN_STREAM)
    d.start()
    assert d.step() is None and rd(d, "QREAD") == 4
    d.start()
    assert rd(d, "QREAD") == 4 and d.running


def test_step_api():
    d = dev(RUN_STREAM)
    assert d.step().kind == StopKind.NOT_RUNNING
    d.start()
    assert d.step() is None
    r = d.step()
    assert r is not None and r.kind == StopKind.STOP and r.qread == 8


def test_run_when_stopped_reports_not_running():
    d = dev(RUN_STREAM)
    r = d.run()
    assert r.kind == StopKind.NOT_RUNNING and r.steps == 0 and not d.running


# ================================================================================= end of queue
def test_end_of_queue_sets_cmd_end_reached_and_irq():
    d = dev(enc(("NPU_SET_OFM_REGION", dict(region=1)), ("NPU_SET_OFM_BASE0", dict(addr=0x12_3456_7890))))
    d.start()
    r = d.run()
    st = status(d)
    assert r.kind == StopKind.END and r.steps == 2 and st["cmd_end_reached"] == 1 and st["irq_raised"] == 1
    assert rd(d, "QREAD") == rd(d, "QSIZE") == 12 and d.irq
    assert d.rf.field("NPU_SET_OFM_BASE0", "addr") == 0x12_3456_7890
    d.apb_write(CMD, 0xC | 2)
    assert status(d)["cmd_end_reached"] == 1                       # not cleared by clear_irq
    d.start()                                                       # restarts from 0 (no STOP)
    assert rd(d, "QREAD") == 0
    d.run()
    d.apb_write(QSIZE, 12)
    assert status(d)["cmd_end_reached"] == 0                       # cleared by a QSIZE write
    d.start()
    d.run()
    d.apb_write(QBASE_LO, STREAM)
    assert status(d)["cmd_end_reached"] == 0                       # ... and by a QBASE write


def test_qsize_zero_ends_immediately():
    d = dev([])
    d.start()
    r = d.run()
    assert r.kind == StopKind.END and r.steps == 0 and d.irq and [t for t in d.memory.log] == []


def test_fetch_transactions_attributes_and_overread_bound():
    m = Memory()
    d = dev(memory=m, pins=dict(PORPL=1, PORSL=1))
    d.apb_write(OFF["MEM_ATTR2"], 0x97, NSP)                          # ext, write_back_read_allocate, system
    d.apb_write(OFF["QCONFIG"], 2, NSP)
    words = enc(*[("NPU_SET_IFM_REGION", dict(region=i % 8)) for i in range(40)])
    base = 0x1_0000_0010
    d.load_stream(base, words, pprot=NSP)
    d.start(NSP)
    assert d.run().kind == StopKind.END
    fetches = [t for t in m.log if t.channel == Channel.rd_cmd]
    assert fetches and all(t.port == "EXT0" and t.prot == 0b011 and t.cache == axcache(9, False)
                           and t.domain == 3 and not t.write for t in fetches)
    lo = min(t.addr for t in fetches)
    hi = max(t.addr + t.length for t in fetches)
    assert lo >= base and hi <= -(-(base + 160) // 128) * 128       # TRM 3.3.1.8 over-read bound
    covered = set()
    for t in fetches:
        covered |= set(range(t.addr, t.addr + t.length))
    assert set(range(base, base + 160)) <= covered


def test_fetch_port_striping_by_hash_pins():
    m = Memory()
    d = dev(memory=m, config="ethos-u85-1024", pins=dict(CFGEXTHASH0=0x40))
    d.apb_write(OFF["MEM_ATTR0"], 0x4)                              # ext
    d.load_stream(0x8000, enc(*[("NPU_SET_IFM_REGION", dict(region=1))] * 64))
    d.start()
    d.run()
    ports = {(t.addr >> 6) & 1: t.port for t in m.log if t.channel == Channel.rd_cmd}
    assert ports == {0: "EXT0", 1: "EXT1"}


# ================================================================================= parse errors
@pytest.mark.parametrize("bad", [
    0x0000_0004,            # unused cmd0 opcode 4
    0x0000_03FF,            # unused cmd0 opcode
    0x0000_4007,            # unused cmd1 opcode
    0x0000_0400,            # bits [13:10] != 0
    0x0000_8000,            # control = 2
    0x0000_C000,            # control = 3
])
def test_reserved_encoding_sets_cmd_parse_error(bad):
    d = dev(enc(("NPU_OP_IRQ", dict(mask=1))) + [bad] + enc(("NPU_OP_IRQ", dict(mask=2))))
    d.start()
    r = d.run()
    st = status(d)
    assert r.kind == StopKind.ERROR and r.error == "cmd_parse_error"
    assert st["cmd_parse_error"] == 1 and st["irq_raised"] == 1 and st["state"] == 0 and d.irq
    assert st["irq_history_mask"] == 1                                  # the command after never ran
    d.apb_write(CMD, 0xC | 2)
    assert not d.irq and status(d)["cmd_parse_error"] == 1             # sticky until reset
    d.start()
    assert not d.running                                               # Policy.run_with_sticky_fault
    d.apb_write(RESET, 0)
    d.wait_reset()
    assert status(d)["cmd_parse_error"] == 0


def test_reserved_encoding_can_be_skipped_by_policy():
    d = dev(enc(("NPU_OP_IRQ", dict(mask=1))) + [0x0000_0004] + enc(("NPU_OP_IRQ", dict(mask=2))),
            policy=Policy(parse_error_on_reserved=False))
    d.start()
    r = d.run()
    assert r.kind == StopKind.END and status(d)["irq_history_mask"] == 3 and status(d)["cmd_parse_error"] == 0


def test_truncated_cmd1_is_a_parse_error():
    words = enc(("NPU_SET_IFM_BASE0", dict(addr=0x100)))
    d = dev(words)
    d.apb_write(QSIZE, 4)                                              # cuts the payload word
    d.start()
    r = d.run()
    assert r.kind == StopKind.ERROR and r.error == "cmd_parse_error" and status(d)["cmd_parse_error"]
    assert rd(d, "QREAD") <= rd(d, "QSIZE")


# ================================================================================= bus faults
@pytest.mark.parametrize("attr,iface", [(0x0, 0), (0x4, 1)])
def test_fetch_fault_sets_bus_status_with_interface_and_channel(attr, iface):
    words = enc(*[("NPU_SET_IFM_REGION", dict(region=1))] * 40)
    d = dev(words)
    d.apb_write(OFF["MEM_ATTR1"], attr)
    d.apb_write(OFF["QCONFIG"], 1)
    d.memory.inject_fault(STREAM + 100, STREAM + 104, Resp.SLVERR, kind="r")
    d.start()
    r = d.run()
    st = status(d)
    assert r.kind == StopKind.ERROR and r.error == "bus_status" and 0 < r.steps < 40
    assert st["bus_status"] == 1 and st["irq_raised"] == 1 and st["state"] == 0
    assert st["faulting_interface"] == iface and st["faulting_channel"] == 0       # rd_cmd
    assert rd(d, "QREAD") <= 100
    d.apb_write(CMD, 0xC | 2)
    assert status(d)["bus_status"] == 1


def test_fetch_fault_on_first_word_decerr():
    d = dev(enc("NPU_OP_STOP"))
    d.memory.inject_fault(STREAM, STREAM + 4, Resp.DECERR)
    d.start()
    r = d.run()
    assert r.error == "bus_status" and r.steps == 1 and status(d)["faulting_channel"] == 0


def dma_stream(src_region=1, dst_region=2, length=64):
    return enc(("NPU_SET_DMA0_SRC_REGION", dict(region=src_region)),
               ("NPU_SET_DMA0_DST_REGION", dict(region=dst_region)),
               ("NPU_SET_DMA0_SRC", dict(addr=0x10)), ("NPU_SET_DMA0_DST", dict(addr=0x20)),
               ("NPU_SET_DMA0_LEN", dict(addr=length)), "NPU_OP_DMA_START", ("NPU_OP_DMA_WAIT", dict(k=0)),
               ("NPU_OP_KERNEL_WAIT", dict(n=0)))


def program_regions(d):
    d.apb_write(OFF["BASEP1_LO"], 0x10_0000)
    d.apb_write(OFF["BASEP2_LO"], 0x20_0000)
    d.apb_write(OFF["BASEP2_HI"], 0x01)
    d.apb_write(OFF["MEM_ATTR1"], 0x4 | 0x30)                          # ext
    d.apb_write(OFF["REGIONCFG"], 1 << 4)                              # region2 -> MEM_ATTR1


def test_ecc_fault_injection_is_sticky_and_stops():
    d = dev(enc(("NPU_OP_BRANCH", dict(branch_target=0))))
    d.start()
    d.run(max_steps=2)
    d.inject_ecc_error("ecc_mac_ib", corrected=True)
    assert d.running and not d.irq
    d.inject_ecc_error("ecc_ao_lut")
    st = status(d)
    assert st["ecc_fault"] == 1 and st["irq_raised"] == 1 and st["state"] == 0 and d.last_stop.error == "ecc_fault"
    d.apb_write(CMD, 0xC | 2)
    assert status(d)["ecc_fault"] == 1
    assert d.pmu.totals["ecc_mac_ib"] == 1 and d.pmu.totals["ecc_ao_lut"] == 1


def test_dma_start_copies_through_regions():
    d = dev(dma_stream())
    program_regions(d)
    payload = bytes(range(64))
    d.memory.write(0x10_0010, payload)
    d.start()
    r = d.run()
    assert r.kind == StopKind.END
    assert d.memory.read(0x1_0020_0020, 64) == payload
    wr = [t for t in d.memory.log if t.channel == Channel.wr_mem2mem]
    rdm = [t for t in d.memory.log if t.channel == Channel.rd_mem2mem]
    assert {t.port for t in wr} == {"EXT0"} and {t.port for t in rdm} == {"SRAM0"}
    assert all(t.cache == axcache(3, True) for t in wr)
    assert d.op_counts["NPU_OP_DMA_START"] == 1 and d.op_counts["NPU_OP_DMA_WAIT"] == 1
    assert d.op_counts["NPU_OP_KERNEL_WAIT"] == 1


@pytest.mark.parametrize("write,chan,iface", [(False, 4, 0), (True, 9, 1)])
def test_dma_fault_reports_channel_and_interface(write, chan, iface):
    d = dev(dma_stream())
    program_regions(d)
    if write:
        d.memory.inject_fault(0x1_0020_0020, 0x1_0020_0021, Resp.SLVERR, kind="w")
    else:
        d.memory.inject_fault(0x10_0010, 0x10_0011, Resp.DECERR, kind="r")
    d.start()
    r = d.run()
    st = status(d)
    assert r.error == "bus_status" and st["faulting_channel"] == chan and st["faulting_interface"] == iface
    assert d.irq and not d.running


def test_dma_unpredictable_continues_by_default():
    words = enc(("NPU_SET_DMA0_SRC_REGION", dict(region=1, region_mode=1)), "NPU_OP_DMA_START",
                ("NPU_OP_IRQ", dict(mask=4)))
    d = dev(words)
    d.start()
    r = d.run()
    assert r.kind == StopKind.END and status(d)["irq_history_mask"] == 4
    assert events(d, "unpredictable")
    d2 = dev(words, policy=Policy(on_unpredictable="parse_error"))
    d2.start()
    assert d2.run().error == "cmd_parse_error"


# ================================================================================= branch
def branch_stream(cond, target):
    return enc(("NPU_OP_BRANCH", dict(branch_cond=cond, branch_target=target)),   # 0x00..0x07
               ("NPU_OP_IRQ", dict(mask=1)),                                        # 0x08
               ("NPU_OP_IRQ", dict(mask=2)))                                        # 0x0C


def test_branch_always_taken():
    d = dev(branch_stream(0, 0x0C))
    d.start()
    r = d.run()
    assert r.kind == StopKind.END and status(d)["irq_history_mask"] == 2
    assert events(d, "branch")[0]["taken"] is True


@pytest.mark.parametrize("flag,mask", [(0, 3), (1, 2)])
def test_branch_rf_true_uses_cond_status(flag, mask):
    d = dev(branch_stream(1, 0x0C))
    d.set_result_flag(flag)
    assert rd(d, "COND_STATUS") == flag
    d.start()
    assert d.run().kind == StopKind.END
    assert status(d)["irq_history_mask"] == mask


@pytest.mark.parametrize("cond,flag", [(0, 0), (1, 0), (1, 1)])
def test_branch_fault_even_when_not_taken(cond, flag):
    d = dev(branch_stream(cond, 0x10))                               # == QSIZE
    d.set_result_flag(flag)
    d.start()
    r = d.run()
    st = status(d)
    assert r.kind == StopKind.ERROR and r.error == "branch_fault" and st["branch_fault"] == 1
    assert st["irq_raised"] == 1 and st["irq_history_mask"] == 0 and not d.running
    d.apb_write(CMD, 0xC | 2)
    assert status(d)["branch_fault"] == 1                             # sticky


def test_branch_to_last_word_and_not_taken_backwards_branch():
    words = enc(("NPU_OP_IRQ", dict(mask=1)),                               # 0x00
                ("NPU_OP_BRANCH", dict(branch_cond=1, branch_target=0)),     # 0x04: flag 0, not taken
                ("NPU_OP_BRANCH", dict(branch_cond=0, branch_target=0x18)),  # 0x0C: skips 0x14
                ("NPU_OP_IRQ", dict(mask=4)),                               # 0x14
                ("NPU_OP_IRQ", dict(mask=2)))                               # 0x18 = QSIZE - 4
    d = dev(words)
    d.start()
    r = d.run()
    assert r.kind == StopKind.END and r.steps == 4
    assert status(d)["irq_history_mask"] == 3 and not status(d)["branch_fault"]
    assert [e["taken"] for e in events(d, "branch")] == [False, True]


@pytest.mark.parametrize("choice,result", [("parse_error", "cmd_parse_error"), ("branch_fault", "branch_fault"),
                                           ("align", None)])
def test_misaligned_branch_target_policy(choice, result):
    d = dev(branch_stream(0, 0x0E), policy=Policy(branch_misaligned=choice))
    d.start()
    r = d.run()
    if result:
        assert r.error == result
    else:
        assert r.kind == StopKind.END and status(d)["irq_history_mask"] == 2


# ================================================================================= budget / stop_request
def test_step_budget_cuts_a_branch_loop():
    d = dev(enc(("NPU_OP_IRQ", dict(mask=1)), ("NPU_OP_BRANCH", dict(branch_target=4))))
    d.start()
    r = d.run(max_steps=1000)
    assert r.kind == StopKind.BUDGET and r.steps == 1000 and r.running and d.running
    assert status(d)["state"] == 1 and events(d, "budget")
    r2 = d.run(max_steps=10)                                          # can continue
    assert r2.kind == StopKind.BUDGET and r2.steps == 10
    d2 = dev(enc(("NPU_OP_BRANCH", dict(branch_target=0))), policy=Policy(default_max_steps=77))
    d2.start()
    r3 = d2.run()
    assert r3.kind == StopKind.BUDGET and r3.steps == 77


def _indexed_dma_loop(lines=64):
    """An always-taken loop around a legal indexed DMA (one index read per line, no batching)."""
    return enc(("NPU_SET_DMA0_SRC_REGION", dict(region=1, stride_mode=1, idx_mode=1)),
               ("NPU_SET_DMA0_DST_REGION", dict(region=2)), ("NPU_SET_DMA0_IDX_REGION", dict(region=3)),
               ("NPU_SET_DMA0_IDX_MAX", dict(idx_max=1000)), ("NPU_SET_DMA0_LEN", dict(addr=16)),
               ("NPU_SET_DMA0_SIZE0", dict(size=lines)), ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=16)),
               "NPU_OP_DMA_START", ("NPU_OP_BRANCH", dict(branch_target=0x28)))    # to the DMA_START


def test_work_budget_cuts_a_stream_of_legal_dmas():
    """max_steps bounds commands, not work: a loop of expensive legal DMAs stops on max_work
    (Policy.default_max_work when None) with the BUDGET reason, still RUNNING, resumable."""
    d = dev(_indexed_dma_loop())
    d.start()
    r = d.run(max_steps=1000, max_work=5000)
    assert r.kind == StopKind.BUDGET and r.running and d.running and r.steps < 1000
    assert 5000 <= r.work < 5000 + 258 and "5000 work units" in r.detail    # 258 units per loop (see Policy)
    assert events(d, "budget")[-1]["work"] == r.work
    r2 = d.run(max_steps=3, max_work=None)                           # resumes; steps bind now
    assert r2.kind == StopKind.BUDGET and r2.steps == 3 and r2.work > 0
    d2 = dev(_indexed_dma_loop(), policy=Policy(default_max_work=2000))
    d2.start()
    r3 = d2.run()
    assert r3.kind == StopKind.BUDGET and 2000 <= r3.work < 2258 and r3.steps < 100
    d3 = dev(_indexed_dma_loop(), policy=Policy(default_max_work=None))
    d3.start()
    assert d3.run(max_steps=50).steps == 50                          # None: unbounded work


def test_work_counts_transactions_bytes_and_kernel_elements():
    d = dev(enc(("NPU_SET_DMA0_SRC_REGION", dict(region=1)), ("NPU_SET_DMA0_DST_REGION", dict(region=2)),
                ("NPU_SET_DMA0_LEN", dict(addr=4096)), "NPU_OP_DMA_START"))
    d.start()
    r = d.run()
    fetches = sum(1 + (t.length >> 6) for t in d.memory.log if t.channel == Channel.rd_cmd)
    # DMA: 1 + 2 x (1 transaction + 4096 / 64) + 64 for the one page it writes
    assert r.kind == StopKind.END and r.work == 3 + 1 + (1 + 64) * 2 + 64 + fetches
    noop = {n: (lambda snap, port, dev: None) for n in KERNEL_OP_NAMES}
    sets = enc(("NPU_SET_OFM_HEIGHT_M1", dict(height_m1=1)), ("NPU_SET_OFM_WIDTH_M1", dict(width_m1=2)),
               ("NPU_SET_OFM_DEPTH_M1", dict(depth_m1=3)), ("NPU_SET_KERNEL_HEIGHT_M1", dict(height_m1=2)),
               ("NPU_SET_KERNEL_WIDTH_M1", dict(width_m1=1)))
    for op, per in (("NPU_OP_POOL", 2 * 3 * 4 * 3 * 2), ("NPU_OP_ELEMENTWISE", 2 * 3 * 4)):
        d = dev(sets + enc(op), kernel_ops=noop)
        d.start()
        r = d.run()
        fetches = sum(1 + (t.length >> 6) for t in d.memory.log if t.channel == Channel.rd_cmd)
        assert r.work == 5 + 1 + per + fetches, op                       # OFM elements (x kernel taps)


def test_model_budgets_of_kernel_ops_come_from_the_policy():
    words = enc(("NPU_SET_OFM_HEIGHT_M1", dict(height_m1=63)), ("NPU_SET_OFM_WIDTH_M1", dict(width_m1=63)),
                ("NPU_SET_OFM_DEPTH_M1", dict(depth_m1=15)), ("NPU_OP_ELEMENTWISE", dict(elementwise_mode=0)))
    tight = dev(words, policy=Policy(max_op_elements=64 * 64 * 16 - 1))
    tight.start()
    r = tight.run()
    assert r.error == "cmd_parse_error" and "65536 OFM elements" in events(tight, "model_limit")[0]["error"]
    loose = dev(words)
    loose.start()
    loose.run()
    assert not events(loose, "model_limit")


def test_ifm_read_budget_comes_from_the_policy():
    """A 64x64 pooling kernel over a 1x1 OFM reads 4096 IFM elements: over max_op_elements."""
    from tests.ethos_u85.support.opbench import MAX, REGION_BASE, pool_bench
    b = pool_bench(np.zeros((64, 64, 1), np.int8), (1, 1, 1), k=(64, 64))
    for pol in (Policy(max_op_elements=4095), Policy()):
        d = Device(b.config, Memory(), policy=pol, settle=True)
        for n, base in REGION_BASE.items():
            d.apb_write(OFF[f"BASEP{n}_LO"], base)
        b.run("NPU_OP_POOL", pooling_mode=MAX, device=d)
        limited = events(d, "model_limit")
        if pol.max_op_elements == 4095:
            assert b.stop.error == "cmd_parse_error" and "4096" in limited[0]["error"], limited
        else:
            assert not limited and b.stop.kind == StopKind.STOP


def test_kernel_op_page_budget_stops_huge_ofm_strides():
    """A 64x64 MAX pool whose OFM strides put every element on its own 64 KiB page of the
    sparse memory (4096 pages; 131k elements would be 8 GiB): max_op_pages stops the op at
    the first write beyond the budget, before that write is made."""
    from tests.ethos_u85.support.opbench import MAX, REGION_BASE, pool_bench
    b = pool_bench(np.zeros((64, 64, 1), np.int8), (64, 64, 1))
    b.set("NPU_SET_OFM_STRIDE_X", addr=1 << 16)
    b.set("NPU_SET_OFM_STRIDE_Y", addr=1 << 22)
    for limit, pages in ((100, 100), (None, 4097)):             # new pages (+1: the stream)
        pol = Policy() if limit is None else Policy(max_op_pages=limit)
        d = Device(b.config, Memory(), policy=pol, settle=True)
        for n, base in REGION_BASE.items():
            d.apb_write(OFF[f"BASEP{n}_LO"], base)
        before = d.memory.page_count
        b.run("NPU_OP_POOL", pooling_mode=MAX, device=d)
        assert d.memory.page_count - before <= pages, limit
        limited = events(d, "model_limit")
        assert (b.stop.error == "cmd_parse_error" and "more than 100 memory pages" in limited[0]["error"]
                if limit else not limited and b.stop.kind == StopKind.STOP)


def test_policy_rejects_bad_budgets():
    for kw in (dict(dma_max_pages=-1), dict(max_op_elements=1.5), dict(default_max_work="x"),
               dict(dma_max_bytes=None), dict(max_op_macs=True)):
        with pytest.raises(ValueError, match="non-negative integer"):
            Policy(**kw)
    assert Policy(default_max_work=None).default_max_work is None


def test_stop_request_stops_a_running_npu_with_irq():
    d = dev(enc(("NPU_SET_IFM_REGION", dict(region=1)), ("NPU_OP_BRANCH", dict(branch_target=0))))
    d.start()
    d.run(max_steps=7)
    assert d.running and not d.irq
    qread = rd(d, "QREAD")
    d.apb_write(CMD, 0xC | 0x10)
    st = status(d)
    assert st["state"] == 0 and st["irq_raised"] == 1 and rd(d, "QREAD") == qread
    assert d.run().kind == StopKind.NOT_RUNNING
    assert d.last_stop.kind == StopKind.STOP_REQUEST
    d.apb_write(CMD, 0xC | 0x2 | 0x1)                                   # restart: TRM -> from QBASE
    assert rd(d, "QREAD") == 0 and d.running


def test_stop_request_resume_policy():
    d = dev(enc(("NPU_SET_IFM_REGION", dict(region=1)), ("NPU_OP_BRANCH", dict(branch_target=0))),
            policy=Policy(resume_after_stop_request=True))
    d.start()
    d.run(max_steps=3)
    q = rd(d, "QREAD")
    d.apb_write(CMD, 0xC | 0x10)
    d.start()
    assert rd(d, "QREAD") == q == 4


def test_stop_request_in_stopped_state_has_no_effect():
    d = dev(RUN_STREAM)
    d.apb_write(CMD, 0xC | 0x10)
    assert not d.irq and status(d)["state"] == 0


def test_running_state_unpredictable_accesses():
    d = dev(enc(("NPU_OP_BRANCH", dict(branch_target=0))))
    d.start()
    d.run(max_steps=3)
    assert d.apb_write(QBASE_LO, 0x9990) == 1 and d.qbase == STREAM     # default: PSLVERR, no effect
    assert d.apb_read(OFF["COND_STATUS"]) == (0, 1)
    assert d.apb_read(OFF["REGIONCFG"]) == (0, 0)                       # readable in RUNNING
    assert d.apb_write(OFF["REGIONCFG"], 3) == 1
    assert d.apb_write(OFF["BASEP3_LO"], 0x40) == 0                     # not restricted
    e = dev(enc(("NPU_OP_BRANCH", dict(branch_target=0))), policy=Policy(running_unpredictable="allow"))
    e.start()
    e.run(max_steps=3)
    assert e.apb_write(OFF["REGIONCFG"], 3) == 0 and rd(e, "REGIONCFG") == 3


# ================================================================================= kernel ops
def test_unimplemented_kernel_op_policy():
    words = enc("NPU_OP_CONV", "NPU_OP_POOL", ("NPU_OP_IRQ", dict(mask=1)))
    d = dev(words, kernel_ops={})                          # default: stop, never a silent wrong answer
    d.start()
    r = d.run()
    assert r.error == "cmd_parse_error" and r.qread == 0 and d.irq
    assert [e["name"] for e in events(d, "op_unimplemented")] == ["NPU_OP_CONV"]
    d2 = dev(words, policy=Policy(on_unimplemented_op="continue"), kernel_ops={})
    d2.start()
    r2 = d2.run()
    assert r2.kind == StopKind.END
    assert [e["name"] for e in events(d2, "op_unimplemented")] == ["NPU_OP_CONV", "NPU_OP_POOL"]


def test_kernel_op_table_dispatch_and_errors():
    seen = []

    def good(snap, port, device):
        seen.append(snap.field("NPU_SET_OFM_REGION", "region"))
        port.write(2, 0, b"\xAA" * 4, Channel.wr_ofm)
        device.set_result_flag(1)

    def unpred(snap, port, device):
        raise Unpredictable("test assert")

    def broken(snap, port, device):
        raise RuntimeError("model bug")

    ops = {"NPU_OP_ELEMENTWISE": good, "NPU_OP_POOL": unpred, "NPU_OP_RESIZE": broken}
    words = enc(("NPU_SET_OFM_REGION", dict(region=2)), "NPU_OP_ELEMENTWISE", ("NPU_SET_OFM_REGION", dict(region=6)),
                "NPU_OP_POOL", ("NPU_OP_IRQ", dict(mask=1)), "NPU_OP_RESIZE", ("NPU_OP_IRQ", dict(mask=2)))
    d = dev(words, kernel_ops=ops)
    program_regions(d)
    d.start()
    r = d.run()
    assert seen == [2] and d.memory.read(0x1_0020_0000, 4) == b"\xAA" * 4 and rd(d, "COND_STATUS") == 1
    assert r.error == "cmd_parse_error" and status(d)["irq_history_mask"] == 1   # broken op stops
    assert events(d, "internal_error") and events(d, "unpredictable")
    ops_events = [e["name"] for e in events(d, "op")]
    assert ops_events == ["NPU_OP_ELEMENTWISE", "NPU_OP_POOL", "NPU_OP_IRQ", "NPU_OP_RESIZE"]
    assert set(KERNEL_OPS) == set(KERNEL_OP_NAMES)          # the default table covers every kernel op


def test_snapshot_captured_at_each_op():
    words = enc(("NPU_SET_IFM_REGION", dict(region=1)), ("NPU_OP_IRQ", dict(mask=1)),
                ("NPU_SET_IFM_REGION", dict(region=2)), ("NPU_OP_IRQ", dict(mask=1)))
    d = dev(words)
    d.start()
    d.run()
    snaps = [e["snapshot"] for e in events(d, "op")]
    assert [s.field("NPU_SET_IFM_REGION", "region") for s in snaps] == [1, 2]


def test_hooks_see_events_and_their_errors_propagate():
    d = dev(enc(("NPU_OP_IRQ", dict(mask=1))))

    def hook(ev, det):
        if ev == "irq":
            raise AssertionError("bench check")

    d.hooks.append(hook)
    d.start()
    with pytest.raises(AssertionError, match="bench check"):
        d.run()


# ================================================================================= fuzz
def _fuzz_seed():
    return int(os.environ.get("FUZZ_SEED", random.SystemRandom().randrange(1 << 32)))


@pytest.mark.parametrize("round_", range(4))
def test_fuzz_random_streams_never_raise(round_):
    seed = _fuzz_seed()
    print(f"fuzz seed {seed} (rerun with FUZZ_SEED={seed})")
    rng = random.Random(seed)
    names = [c.name for c in isa.COMMANDS]
    for _ in range(60):
        n = rng.randrange(0, 48)
        words = []
        for _ in range(n):
            pick = rng.random()
            if pick < 0.4:
                words.append(rng.getrandbits(32))
            else:
                cmd = isa.BY_NAME[rng.choice(names)]
                raw = cmd.header | (rng.getrandbits(48) << 16)
                words += [raw & 0xFFFFFFFF, (raw >> 32) & 0xFFFFFFFF][: 1 + cmd.kind]
        policy = Policy(dma_max_bytes=1 << 16, parse_error_on_reserved=rng.random() < 0.8,
                        on_unpredictable=rng.choice(["continue", "parse_error"]),
                        on_model_limit=rng.choice(["continue", "parse_error"]),
                        branch_misaligned=rng.choice(["parse_error", "align", "branch_fault"]),
                        fetch_block=rng.choice([4, 64, 256]))
        d = dev(words, config=rng.choice(["ethos-u85-128", "ethos-u85-1024", "ethos-u85-2048"]),
                pins=dict(CFGSRAMHASH0=0x40, CFGSRAMHASH1=0x80, CFGEXTHASH0=0x100), policy=policy)
        for k in range(4):
            d.apb_write(OFF[f"MEM_ATTR{k}"], rng.getrandbits(8))
        for k in range(8):
            d.apb_write(OFF[f"BASEP{k}_LO"], rng.getrandbits(32))
            d.apb_write(OFF[f"BASEP{k}_HI"], rng.getrandbits(8))
        d.apb_write(OFF["REGIONCFG"], rng.getrandbits(16))
        d.apb_write(OFF["QCONFIG"], rng.getrandbits(2))
        if rng.random() < 0.5:
            d.apb_write(QSIZE, rng.randrange(0, 4 * len(words) + 16))
        if rng.random() < 0.3:
            lo = STREAM + rng.randrange(0, 4 * len(words) + 8)
            d.memory.inject_fault(lo, lo + 4, rng.choice([Resp.SLVERR, Resp.DECERR]))
        d.set_result_flag(rng.getrandbits(1))
        d.start()
        r = d.run(max_steps=300)
        st = status(d) if r.kind != StopKind.BUDGET else None
        if r.kind == StopKind.BUDGET:
            assert d.running and r.steps == 300
        else:
            assert not d.running and st["state"] == 0
            if r.kind == StopKind.ERROR:
                assert st[r.error] == 1 and st["irq_raised"] == 1
            if r.kind == StopKind.END:
                assert st["cmd_end_reached"] == 1 and rd(d, "QREAD") == rd(d, "QSIZE") & ~3
            assert rd(d, "QREAD") <= rd(d, "QSIZE")
        assert not events(d, "internal_error"), events(d, "internal_error")[0]["tb"]


def test_fuzz_random_apb_traffic_never_raises():
    seed = _fuzz_seed()
    print(f"fuzz seed {seed} (rerun with FUZZ_SEED={seed})")
    rng = np.random.default_rng(seed)
    d = dev(RUN_STREAM)
    offsets = [r.offset for r in R.REGISTERS] + [0x2C, 0x1FFC, 0x100]
    for _ in range(4000):
        addr = int(rng.choice(offsets)) + (int(rng.integers(0, 4)) if rng.random() < 0.05 else 0)
        pprot = int(rng.integers(0, 8))
        if rng.random() < 0.5:
            data, err = d.apb_read(addr, pprot)
            assert 0 <= data < 1 << 32 and err in (0, 1) and (data == 0 or err == 0)
        else:
            value = int(rng.integers(0, 1 << 32))
            if addr == RESET and rng.random() < 0.7:
                continue
            err = d.apb_write(addr, value, pprot, int(rng.integers(0, 16)) if rng.random() < 0.1 else 0xF)
            assert err in (0, 1)
        if d.running and rng.random() < 0.3:
            d.run(max_steps=int(rng.integers(1, 20)))
    assert not events(d, "internal_error")


def test_policy_rejects_unknown_choices():
    with pytest.raises(ValueError):
        Policy(reset_write="sometimes")
    with pytest.raises(ValueError):
        Policy(fetch_block=48)
    assert Policy().replace(on_unimplemented_op="parse_error").on_unimplemented_op == "parse_error"


def test_set_runs_equal_command_by_command():
    """run() applies a fetch buffer's run of NPU_SET commands at once (cached by the bytes):
    the registers, QREAD, cycles and step counts are those of step() command by command, and
    a step budget that ends inside a run ends it at the same command."""
    rnd = random.Random(7)
    cmds = []
    for _ in range(40):
        if rnd.random() < 0.5:
            cmds.append(("NPU_SET_IFM_REGION", dict(region=rnd.randrange(8))))
        else:
            cmds.append(("NPU_SET_IFM_BASE0", dict(addr=rnd.randrange(1 << 32))))
        if rnd.random() < 0.1:
            cmds.append(("NPU_OP_KERNEL_WAIT", dict(n=0)))
    words = enc(*cmds, ("NPU_OP_STOP", dict(mask=1)))
    ref = dev(words)
    ref.start()
    trace = []                                                # (qread, cycle) after each command
    while ref.step() is None:
        trace.append((ref.qread, ref.cycle, dict(ref.rf._raw)))
    assert ref.qread == 4 * len(words)
    for budget in (None, 1, 2, 5, 9, 17, 30):
        d = dev(words)
        d.start()
        r = d.run(max_steps=budget)
        if budget is None:
            assert (r.kind, r.qread, d.cycle, d.rf) == (StopKind.STOP, ref.qread, ref.cycle, ref.rf)
        else:
            assert r.kind == StopKind.BUDGET and r.steps == budget
            assert (d.qread, d.cycle, dict(d.rf._raw)) == trace[budget - 1]


def test_set_runs_stop_at_qsize():
    """NPU_SET commands past QSIZE are not executed, even when their words are fetched and
    decoded before (run()'s fast path for runs of NPU_SET commands)."""
    words = enc(*[("NPU_SET_IFM_REGION", dict(region=i % 8)) for i in range(12)])
    d = dev(words)
    d.start()
    assert d.run().kind == StopKind.END                       # decodes all 12 (cache warm)
    d2 = dev(words)
    d2.apb_write(QSIZE, 16)                                   # only the first 4
    d2.start()
    r = d2.run()
    assert (r.kind, r.steps, r.qread) == (StopKind.END, 4, 16)
    assert d2.rf.field("NPU_SET_IFM_REGION", "region") == 3
