"""A reference model for ``TB_DEVICE_FACTORY`` (tests/ethos_u85/test_sim.py): the TLM with
one deliberate difference, ID read with bit 0 flipped, so a run that uses it must fail."""
from __future__ import annotations

from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.device import Device

ID = R.OFFSET["ID"]


class WrongIdDevice(Device):
    def apb_read(self, addr: int, pprot: int = 0b01) -> tuple[int, int]:
        data, err = super().apb_read(addr, pprot)
        return (data ^ 1 if addr == ID and not err else data), err
