"""The trace contract (docs/trace-format.md): parser errors, replay verdicts, writer
round trip, and `npu-tlm replay` exit statuses, on a small fake device and on the U85."""
import re
import subprocess
import sys

import pytest

from tlm.core import registry
from tlm.core.trace import RecordingTarget, TraceFormatError, TraceTarget, TraceWriter, parse, parse_text, replay


class FakeTarget(TraceTarget):
    """Registers are a dict; a write to 0x0 with value 1 'runs a job' that copies 4 bytes
    from 0x100 to 0x200 and raises the interrupt after 3 steps; 0xFC reads a fault."""
    device = "fake"
    reg_bits = 64
    addr_bits = 16

    def __init__(self):
        self.regs, self.mem = {}, bytearray(1 << 16)
        self.countdown, self.irq, self._faults = None, False, []

    def write_reg(self, offset, value):
        self.regs[offset] = value
        if offset == 0 and value == 1:
            self.countdown = 3
        if offset == 0xFC:
            self._faults.append("bus error")

    def read_reg(self, offset):
        return self.regs.get(offset, 0)

    def load_mem(self, addr, data):
        self.mem[addr:addr + len(data)] = data

    def read_mem(self, addr, length):
        return bytes(self.mem[addr:addr + length])

    def _step(self):
        if self.countdown is not None:
            self.countdown -= 1
            if self.countdown == 0:
                self.mem[0x200:0x204] = self.mem[0x100:0x104]
                self.irq, self.countdown = True, None
                self.regs[8] = 0xD0

    def wait_irq(self, max_steps):
        for _ in range(max_steps):
            if self.irq:
                return True
            self._step()
        return self.irq

    def idle(self):
        self._step()

    def faults(self):
        out, self._faults = self._faults, []
        return out


def _trace(tmp_path, body, name="t.txt"):
    (tmp_path / "in.bin").write_bytes(b"\x01\x02\x03\x04")
    (tmp_path / "out.bin").write_bytes(b"\x01\x02\x03\x04")
    p = tmp_path / name
    p.write_text(body)
    return p


GOOD = """# a job
device fake
load_mem 0x100 in.bin
fill_mem 0x300 8 0xAA
write_reg 0x0 1          # start
wait_irq 10
read_reg 0x8 0xD0
read_reg 0x8 0x50 0x70
poll_reg 0x8 0xD0 0xFF 5
check_mem 0x200 out.bin
"""


def test_replay_good_trace(tmp_path):
    tr = parse(_trace(tmp_path, GOOD))
    assert (tr.device, tr.config, len(tr.steps), tr.checks) == ("fake", None, 8, 5)
    res = replay(tr, FakeTarget())
    assert (res.passed, res.failed, res.messages, res.exit_status) == (5, 0, [], 0)
    assert res.summary == "replay: 5 checks passed, 0 failed"


def test_failures_name_line_and_values(tmp_path):
    body = GOOD.replace("read_reg 0x8 0xD0\n", "read_reg 0x8 0xD1\n").replace("wait_irq 10", "wait_irq 2")
    tr = parse(_trace(tmp_path, body))
    (tmp_path / "out.bin").write_bytes(b"\x01\x09\x03\x05")
    res = replay(tr, FakeTarget())
    assert res.failed == 4 and res.passed == 1 and res.exit_status == 1      # poll_reg passed
    wait, read, masked, mem = res.messages
    assert wait.endswith("t.txt:6: wait_irq: interrupt not raised within 2 steps")
    assert "t.txt:7: read_reg: offset 0x8: expected 0x00000000000000d1, got 0x0000000000000000" in read
    assert masked.endswith("t.txt:8: read_reg: offset 0x8: expected 0x0000000000000050, got "
                           "0x0000000000000000 under mask 0x0000000000000070 (read 0x0000000000000000)")
    assert mem.endswith("check_mem: out.bin: first difference at 0x201: expected 0x09, got 0x02; "
                        "2 of 4 bytes differ")


def test_device_fault_fails_the_replay(tmp_path):
    res = replay(parse(_trace(tmp_path, "device fake\nwrite_reg 0xfc 0\n")), FakeTarget())
    assert res.passed == res.failed == 0 and res.faulted and res.exit_status == 1
    assert res.messages == [f"{tmp_path / 't.txt'}:2: device fault after write_reg: bus error"]


@pytest.mark.parametrize("body, line, what", [
    ("", 0, "empty trace"),
    ("write_reg 0 0\n", 1, "first command must be 'device NAME'"),
    ("device fake\ndevice fake\n", 2, "only once"),
    ("device fake\nwrite_reg 0 0\nconfig x\n", 3, "right after 'device'"),
    ("device fake\nfrobnicate 1\n", 2, "unknown command 'frobnicate'"),
    ("device fake\nwrite_reg 0x10\n", 2, "write_reg takes 2 arguments, got 1"),
    ("device fake\nread_reg 1 2 3 4\n", 2, "read_reg takes 2 to 3 arguments, got 4"),
    ("device fake\nwrite_reg 0x1G 0\n", 2, "offset '0x1G' is not a decimal or 0x hexadecimal number"),
    ("device fake\nwrite_reg -4 0\n", 2, "offset '-4'"),
    ("device fake\nfill_mem 0 4 256\n", 2, "does not fit in 8 bits"),
    ("device fake\n\n# c\nload_mem 0 missing.bin\n", 4, "file 'missing.bin' not found"),
    ("device fake\npoll_reg 0 0 1 0\n", 2, "maximum of 0"),
])
def test_malformed_traces_name_the_line(tmp_path, body, line, what):
    p = _trace(tmp_path, body)
    with pytest.raises(TraceFormatError) as e:
        parse(p)
    assert e.value.line == line and what in str(e.value)
    assert str(e.value).startswith(f"{p}:{line}: " if line else f"{p}: ")


@pytest.mark.parametrize("body, what", [
    ("device fake\nwrite_reg 0x2 0\n", "not a multiple of 4"),
    ("device fake\nwrite_reg 0 0x10000000000000000\n", "does not fit in the fake registers (64 bits)"),
    ("device fake\nfill_mem 0xFFFF 2 0\n", "outside the fake address space (16 bits)"),
    ("device fake\ncheck_mem 0xFFFE in.bin\n", "outside the fake address space"),
])
def test_values_checked_against_the_target_before_running(tmp_path, body, what):
    t = FakeTarget()
    t.write_reg(0x40, 7)
    with pytest.raises(TraceFormatError, match=re.escape(what)):
        replay(parse(_trace(tmp_path, body)), t)
    assert t.regs == {0x40: 7}                       # nothing ran


def test_binary_file_is_malformed(tmp_path):
    p = tmp_path / "x.txt"
    p.write_bytes(b"device fake\n\xff\xfe\n")
    with pytest.raises(TraceFormatError, match=r"x.txt:2: not a text file"):
        parse(p)


def test_writer_round_trip(tmp_path):
    rec = RecordingTarget(FakeTarget())
    rec.load_mem(0x100, b"\x05\x06\x07\x08")
    rec.load_mem(0x400, b"\x00" * 64)                # written as fill_mem
    rec.write_reg(0x0, 1)
    assert rec.wait_irq(10)
    rec.read_reg(0x8)
    assert rec.poll_reg(0x8, 0xD0, 0xF0)
    rec.check_mem(0x200, 4)
    p = rec.writer.save(tmp_path / "rec")
    text = p.read_text()
    assert "fill_mem 0x400 64 0x00" in text and "read_reg 0x8 0x00000000000000d0" in text
    res = replay(parse(p), FakeTarget())
    assert (res.passed, res.failed) == (4, 0)
    (tmp_path / "rec" / "mem_001.bin").write_bytes(b"\x05\x06\x07\x09")   # corrupt the expectation
    res = replay(parse(p), FakeTarget())
    assert res.failed == 1 and "first difference at 0x203: expected 0x09, got 0x08" in res.messages[0]


def test_writer_comment_and_config():
    w = TraceWriter("fake", "fake-1")
    w.comment("two\nlines")
    assert w.text().splitlines() == ["device fake", "config fake-1", "# two", "# lines"]
    assert parse_text(w.text()).config == "fake-1"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tlm.ethos_u85.cli", "replay", *map(str, args)],
                          capture_output=True, text=True)


def test_cli_replay_u85_job(tmp_path):
    """A one-command job on the Ethos-U85 TLM, recorded, then replayed by the CLI."""
    from tlm.ethos_u85 import isa
    from tlm.ethos_u85 import registers as R
    rec = RecordingTarget(registry.get("ethos-u85").make_target("ethos-u85-256"))
    stream = b"".join(w.to_bytes(4, "little") for w in isa.encode("NPU_OP_STOP", mask=1))
    rec.load_mem(0x1000, stream)
    rec.write_reg(R.offset_of("QBASE_LO"), 0x1000)
    rec.write_reg(R.offset_of("QSIZE"), len(stream))
    rec.write_reg(R.offset_of("CMD"), 1)
    assert rec.wait_irq()
    status = rec.read_reg(R.offset_of("STATUS"))
    assert R.get("STATUS").decode(status)["irq_raised"] == 1
    p = rec.writer.save(tmp_path / "u85")
    r = _cli(p)
    assert (r.returncode, r.stdout, r.stderr) == (0, "replay: 2 checks passed, 0 failed\n", "")
    p.write_text(p.read_text().replace(f"read_reg 0x4 0x{status:08x}", f"read_reg 0x4 0x{status ^ 1:08x}"))
    r = _cli(p)
    assert r.returncode == 1 and r.stdout.splitlines()[-1] == "replay: 1 checks passed, 1 failed"
    assert f"{p}:7: read_reg: offset 0x4: expected" in r.stdout


@pytest.mark.parametrize("body, what", [
    ("device nosuch\n", "t.txt:1: unknown device 'nosuch' (devices: "),
    ("device ethos-u85\nconfig ethos-u85-99\n", "t.txt:2: ethos-u85 has no configuration 'ethos-u85-99'"),
    ("device ethos-u85\nwrite_reg 0x10 0x1\nbogus\n", "t.txt:3: unknown command 'bogus'"),
])
def test_cli_malformed_is_one_line_exit_2(tmp_path, body, what):
    r = _cli(_trace(tmp_path, body))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and what in r.stderr and r.stderr.startswith("npu-tlm: error: ")


def test_cli_missing_trace_file(tmp_path):
    r = _cli(tmp_path / "nope.txt")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot read trace" in r.stderr


# ------------------------------------------------------------------ the pin-level player
class AsyncFake:
    """FakeTarget behind the pin-level player's async interface (tb/core/trace_player.py)."""
    wait_default = 100

    def __init__(self):
        self.t = FakeTarget()
        self.device, self.reg_bits, self.addr_bits, self.reg_align = "fake", 64, 16, 4

    async def write_reg(self, offset, value):
        self.t.write_reg(offset, value)

    async def read_reg(self, offset):
        return self.t.read_reg(offset)

    def load_mem(self, addr, data):
        self.t.load_mem(addr, data)

    def read_mem(self, addr, length):
        return self.t.read_mem(addr, length)

    async def wait_irq(self, n):
        return self.t.wait_irq(n)

    async def idle(self):
        self.t.idle()

    def faults(self):
        return self.t.faults()


def test_pin_player_judges_like_replay(tmp_path):
    """tb.core.trace_player.play gives the same verdicts and lines as replay (steps -> cycles
    in the wait_irq message: the pins count clock cycles)."""
    import asyncio

    from tb.core.trace_player import play
    body = GOOD.replace("read_reg 0x8 0xD0\n", "read_reg 0x8 0xD1\n") + "write_reg 0xfc 0\n"
    tr = parse(_trace(tmp_path, body))
    (tmp_path / "out.bin").write_bytes(b"\x01\x09\x03\x05")
    want = replay(tr, FakeTarget())
    got = asyncio.run(play(tr, AsyncFake()))
    assert (got.passed, got.failed, got.faulted) == (want.passed, want.failed, want.faulted) == (3, 2, True)
    assert got.messages == want.messages
    tr = parse(_trace(tmp_path, GOOD.replace("wait_irq 10", "wait_irq 2"), "t2.txt"))
    got = asyncio.run(play(tr, AsyncFake()))
    assert got.messages[0].endswith("t2.txt:6: wait_irq: interrupt not raised within 2 cycles")


def test_npu_tlm_devices_lists_the_registry():
    from tlm.core import registry
    p = subprocess.run([sys.executable, "-m", "tlm.core.cli", "devices"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    names = [ln.split()[0] for ln in p.stdout.splitlines()]
    assert names == sorted(registry.devices())


def test_device_subcommands_are_registered_once():
    from tlm.core import cli
    sets = cli.command_sets()
    with pytest.raises(RuntimeError, match="registered twice"):
        cli.build_parser(sets + [sets[0]])


class SettlingTarget(FakeTarget):
    """FakeTarget that counts reads and says when nothing can change (no job running)."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    def read_reg(self, offset):
        self.reads += 1
        return super().read_reg(offset)

    def settled(self, offset):
        return self.countdown is None


def test_poll_on_a_settled_device_ends_early_with_the_same_verdict(tmp_path):
    """TraceTarget.settled: a poll that can never match stops once a read repeats and the
    device has nothing left to run; while a job runs it keeps polling, and a match is a match."""
    t = SettlingTarget()
    res = replay(parse(_trace(tmp_path, "device fake\npoll_reg 0x8 0xD0 0xFF 1000000\n")), t)
    assert res.failed == 1 and t.reads == 2, (res.messages, t.reads)
    assert "in 2 reads (last 0x0); the device had settled" in res.messages[0]
    t = SettlingTarget()              # the job raises 0xD0 after 3 steps: found, not cut short
    res = replay(parse(_trace(tmp_path, "device fake\nwrite_reg 0x0 1\npoll_reg 0x8 0xD0 0xFF 1000\n")), t)
    assert res.failed == 0 and res.passed == 1 and t.reads == 4, (res.messages, t.reads)
    t = FakeTarget()                  # the default (settled False): every read is made
    res = replay(parse(_trace(tmp_path, "device fake\npoll_reg 0x8 0xD0 0xFF 50\n")), t)
    assert res.failed == 1 and "in 50 reads (last 0x0)" in res.messages[0] and "had settled" not in res.messages[0]


def test_dtpu_poll_after_a_dma_error_ends_at_once(tmp_path):
    """A DTPU trace whose input DMA halts (a length far beyond the stream, DMAINTERR) polls
    DMASR.Idle with MAX 1,000,000 reads: the model has settled, the poll fails after two."""
    from pathlib import Path
    import shutil
    src = Path(__file__).resolve().parents[1] / "dtpu" / "traces" / "depthwise_small"
    for f in src.iterdir():
        shutil.copy(f, tmp_path / f.name)
    lines = (src / "trace.txt").read_text().split("\n")
    i = next(n for n, ln in enumerate(lines) if ln.startswith("write_reg 0x400028 "))
    lines[i] = "write_reg 0x400028 0x038bdb64"
    (tmp_path / "trace.txt").write_text("\n".join(lines))
    target = registry.get("dtpu").make_target(None)
    res = replay(parse(tmp_path / "trace.txt"), target)
    polls = [m for m in res.messages if "poll_reg" in m]
    assert polls and all("in 2 reads" in m and "settled" in m for m in polls), polls
    assert any("DMAINTERR" in m for m in res.messages), res.messages[:3]
