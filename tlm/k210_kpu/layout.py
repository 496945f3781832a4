"""Feature maps in the 2 MiB KPU RAM: 64-byte lines, rows and channel groups.

A map of C channels, H rows and W columns at ``base`` (in 64-byte units) with ``group``
channels per line, ``row_switch`` lines per row and ``channel_switch`` lines per channel
group puts pixel (c, y, x) at byte

    64*base + (c // group)*64*channel_switch + (c % group)*(64 // group) + 64*row_switch*y + x

(seed: row_switch_addr = ceil(W/64), channel_switch_addr = row_switch_addr*H, coef_group by
width; EXT nncase ``get_kpu_row_layout`` / kpu.c ``kpu_upload_core``: groups 4 for W <= 16,
2 for W <= 32, else 1, row pitch 64/groups). The KPU uses the register values it is given;
``Fmap.problems()`` names the combinations that do not describe a map (overlapping rows or
channels, past the end of the RAM).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LINE = 64                              # bytes per KPU RAM line (the address unit)
RAM_SIZE = 2 * 1024 * 1024             # img_ram_size
RAM_LINES = RAM_SIZE // LINE
GROUPS = (1, 2, 4)                     # valid coef_group / wb_group values


def row_layout(width: int) -> tuple:
    """(groups, row_len, row_pitch) for a map of this width (EXT get_kpu_row_layout)."""
    if width <= 16:
        return 4, 1, 16
    if width <= 32:
        return 2, 1, 32
    return 1, (width + LINE - 1) // LINE, LINE


@dataclass(frozen=True)
class Fmap:
    base: int              # image_src_addr / image_dst_addr (64-byte units)
    channels: int
    height: int
    width: int
    group: int             # coef_group / wb_group
    row_switch: int        # row_switch_addr / wb_row_switch_addr
    channel_switch: int    # channel_switch_addr / wb_channel_switch_addr

    @classmethod
    def packed(cls, base: int, channels: int, height: int, width: int) -> "Fmap":
        """The layout the compiler chooses (seed formulas)."""
        g, row_len, _ = row_layout(width)
        return cls(base, channels, height, width, g, row_len, row_len * height)

    @property
    def lines(self) -> int:
        """64-byte lines from `base` to the end of the last channel group."""
        return -(-self.channels // self.group) * self.channel_switch

    @property
    def nbytes(self) -> int:
        return self.lines * LINE

    def problems(self) -> list:
        """Why these values do not describe a feature map (empty when they do)."""
        out = []
        if self.group not in GROUPS:
            out.append(f"group {self.group} is not 1, 2 or 4")
            return out
        pitch = LINE // self.group
        if self.width > (pitch if self.group > 1 else LINE * self.row_switch):
            out.append(f"width {self.width} does not fit in a row of {self.row_switch} line(s) "
                       f"with {self.group} channel(s) per line")
        if self.row_switch < 1:
            out.append("row switch address 0")
        if self.channel_switch < self.row_switch * self.height:
            out.append(f"channel switch address {self.channel_switch} < {self.row_switch} x "
                       f"{self.height} rows")
        if self.base + self.lines > RAM_LINES:
            out.append(f"lines {self.base}..{self.base + self.lines - 1} pass the end of the "
                       f"2 MiB KPU RAM")
        return out

    def offsets(self) -> np.ndarray:
        """int64 [C, H, W] byte offsets in KPU RAM."""
        c = np.arange(self.channels, dtype=np.int64)
        y = np.arange(self.height, dtype=np.int64)
        x = np.arange(self.width, dtype=np.int64)
        pitch = LINE // self.group
        co = LINE * self.base + (c // self.group) * LINE * self.channel_switch + (c % self.group) * pitch
        return co[:, None, None] + (LINE * self.row_switch * y)[None, :, None] + x[None, None, :]

    def span(self) -> tuple:
        """(first byte, end) of the bytes the map touches."""
        o = self.offsets()
        return int(o.min()), int(o.max()) + 1

    def gather(self, ram: np.ndarray, lo: int = 0) -> np.ndarray:
        """uint8 [C, H, W] from `ram`, a uint8 view of KPU RAM starting at byte `lo`."""
        return ram[self.offsets() - lo]

    def scatter(self, ram: np.ndarray, data: np.ndarray, lo: int = 0) -> None:
        """Write uint8 [C, H, W] into `ram` (bytes between rows/channels are left as they are)."""
        ram[self.offsets() - lo] = data
