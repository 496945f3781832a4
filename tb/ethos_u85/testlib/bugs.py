"""Bugs planted in the TLM behind the pins (DUT=tlm), to prove that the bench's checkers fire:
``plant(env, bug)`` before ``env.start()``; ``BUGS`` maps each bug to the words the report
must contain."""
from __future__ import annotations

import dataclasses
import types

from tb.ethos_u85.testlib.regs import OFF, STATUS_F
from tlm.ethos_u85.memory import Channel, Resp

# bug -> words the scoreboard's report must contain
BUGS = {
    "none": None,
    "corrupt_data": "differ from the model",
    "stray_write": "outside the model's write footprint",
    "dropped_write": "never wrote",
    "wrong_port": "on another port",
    "wrong_cache": "port group/AxCACHE/AxDOMAIN",
    "long_burst": "burst boundary",
    "status": f"APB R 0x{OFF['STATUS']:04x}",
    "irq_pin": "rising IRQ edge",
    "outstanding": "bursts outstanding",          # reported by the AXI subordinate
    "wrong_prot": "AxPROT",
    "wrong_domain": "port group/AxCACHE/AxDOMAIN",
    "wrong_port_read": "port group/AxCACHE/AxDOMAIN",
    "stray_read": "outside the model's read footprint",
    "cross_4k": "4 KB boundary",                 # reported by the AXI subordinate
    "irq_stuck": "IRQ pin 1",
    "ro_write": f"APB R 0x{OFF['CONFIG']:04x}",
    "wide_strobe": "outside the beat's lanes",  # reported by the AXI subordinate
    "early_wlast": "WLAST=1 on beat 0",          # reported by the AXI subordinate
}


class StuckHigh:
    """An IRQ driver that, once high, ignores being driven low (CMD.clear_irq does nothing)."""

    def __init__(self, pin):
        self.pin = pin

    @property
    def value(self):
        return self.pin.value

    @value.setter
    def value(self, v):
        if int(v) or not int(self.pin.value):
            self.pin.value = v


def plant(env, bug: str) -> None:
    mgr = env.tlm.axi_manager
    orig = mgr.transfer

    async def transfer(txn, data, boundary, max_reads=1, max_writes=1, **kw):
        if bug == "outstanding":
            max_reads = max_writes = 64                   # ignores AXI_x.max_outstanding
        elif bug == "wrong_prot":
            txn = dataclasses.replace(txn, prot=txn.prot ^ 0x2)
        elif bug == "wrong_domain":
            txn = dataclasses.replace(txn, domain=txn.domain ^ 0x1)
        if not txn.write and txn.channel != Channel.rd_cmd:
            if bug == "wrong_port_read":                  # the DMA source read on the other port
                txn = dataclasses.replace(txn, port="SRAM0" if txn.port == "EXT0" else "EXT0")
            elif bug == "stray_read":                     # and 64 bytes nobody asked for
                await orig(dataclasses.replace(txn, addr=txn.addr + 0x1000, length=64), None,
                           boundary, max_reads, max_writes)
        if txn.write:
            if bug == "corrupt_data":
                buf = bytearray(bytes(data))
                buf[len(buf) // 2] ^= 0x40
                data = bytes(buf)
            elif bug == "dropped_write":
                return Resp.OKAY, None
            elif bug == "wrong_port":
                txn = dataclasses.replace(txn, port="SRAM0" if txn.port == "EXT0" else "EXT0")
            elif bug == "wrong_cache":
                txn = dataclasses.replace(txn, cache=txn.cache ^ 0x2)
            elif bug == "long_burst":
                boundary = 4096
            elif bug == "cross_4k":                       # one burst over the 4 KB line
                mgr.split = lambda addr, length, boundary: [(addr, length)]
                txn = dataclasses.replace(txn, addr=(txn.addr | 0xFFF) - 0x2F)
            elif bug == "stray_write":
                r = await orig(txn, data, boundary, max_reads, max_writes, **kw)
                await orig(dataclasses.replace(txn, addr=txn.addr + 0x800, length=16), bytes(16),
                           boundary, max_reads, max_writes)
                return r
        return await orig(txn, data, boundary, max_reads, max_writes, **kw)

    mgr.transfer = transfer
    full = (1 << mgr.BEAT) - 1
    if bug == "wide_strobe":                              # every lane strobed on first beats:
        # lanes below an unaligned AWADDR are outside the transfer (the job writes to 0x..34)
        mgr.w_beat_hook = lambda beat, beats, strb, last: (full if beat == 0 else strb, last)
    if bug == "early_wlast":                              # WLAST on the first beat of every burst
        mgr.w_beat_hook = lambda beat, beats, strb, last: (strb, int(beat == 0 or last))
    if bug == "irq_pin":
        env.tlm.irq = types.SimpleNamespace(value=0)          # the pin never rises
    if bug == "irq_stuck":
        env.tlm.irq = StuckHigh(env.tlm.irq)
    if bug == "status":
        def patch(dev):
            read = dev.apb_read

            def apb_read(addr, pprot=0b01):
                data, err = read(addr, pprot)
                if addr == OFF["STATUS"] and not STATUS_F.state.get(data) and STATUS_F.irq_raised.get(data):
                    data ^= STATUS_F.faulting_channel.put(0, 1)   # faulting_channel bit 0
                return data, err
            dev.apb_read = apb_read
        env.tlm.on_reset.append(patch)
    if bug == "ro_write":
        def patch_ro(dev):
            write, read, held = dev.apb_write, dev.apb_read, {}

            def apb_write(addr, data, pprot=0b01, pstrb=0xF):
                if addr == OFF["CONFIG"]:
                    held[addr] = data                         # the bug: a read-only word changes
                return write(addr, data, pprot, pstrb)

            def apb_read(addr, pprot=0b01):
                data, err = read(addr, pprot)
                return (held.get(addr, data), err)
            dev.apb_write, dev.apb_read = apb_write, apb_read
        env.tlm.on_reset.append(patch_ro)
