"""Memory model: sparse store, transactions, fault injection, port routing."""
import numpy as np
import pytest

from tlm.ethos_u85.memory import (
    ADDR_MASK,
    BusFault,
    Channel,
    DataPort,
    Interface,
    Memory,
    RegionRoute,
    Resp,
    Transaction,
    TxnBatch,
    axcache,
    hash_select,
)


def test_sparse_store_zero_fill_and_page_crossing():
    m = Memory()
    assert m.read(0xFF_FFFF_FFF0, 16) == bytes(16)
    data = bytes(range(256)) * 600                       # crosses several 64 KiB pages
    m.write(0x12_3456_0000 - 7, data)
    assert m.read(0x12_3456_0000 - 7, len(data)) == data
    assert m.read(0x12_3456_0000 - 8, 1) == b"\0"
    m.write_u32(0x100, 0xDEADBEEF)
    assert m.read_u32(0x100) == 0xDEADBEEF and m.read(0x100, 4) == bytes.fromhex("efbeadde")


def test_backdoor_rejects_addresses_past_40_bits():
    m = Memory()
    with pytest.raises(ValueError):
        m.read(ADDR_MASK, 2)
    with pytest.raises(ValueError):
        m.write(-1, b"x")


def test_front_door_logs_and_faults():
    m = Memory()
    m.write(0x1000, b"abcd")
    seen = []
    m.listeners.append(seen.append)
    t = Transaction("SRAM0", Channel.rd_ifm, False, 0x1000, 4)
    txn, data = m.access(t)
    assert txn.resp == Resp.OKAY and bytes(data) == b"abcd" and m.log == [t] and seen == [t]
    m.inject_fault(0x1002, 0x1003, "DECERR", kind="w")
    txn, _ = m.access(Transaction("EXT0", Channel.wr_ofm, True, 0x1000, 4), b"WXYZ")
    assert txn.resp == Resp.DECERR and m.read(0x1000, 4) == b"abcd"      # no effect
    txn, data = m.access(t)                                              # reads still fine
    assert txn.resp == Resp.OKAY and bytes(data) == b"abcd"
    m.clear_faults()
    txn, _ = m.access(Transaction("EXT0", Channel.wr_ofm, True, 0x1000, 4), b"WXYZ")
    assert txn.resp == Resp.OKAY and m.read(0x1000, 4) == b"WXYZ"


def test_inject_fault_validates_arguments():
    m = Memory()
    with pytest.raises(ValueError):
        m.inject_fault(0, 1, Resp.OKAY)
    with pytest.raises(ValueError):
        m.inject_fault(0, 1, "SLVERR", kind="x")


def test_axcache_table_spot_values():
    # TRM axi_mem_encoding: write_back_read_and_write_allocate = 1111/1111,
    # write_through_no_allocate = ARCACHE 1010, AWCACHE 0110.
    assert axcache(0xB, False) == 0b1111 and axcache(0xB, True) == 0b1111
    assert axcache(0x4, False) == 0b1010 and axcache(0x4, True) == 0b0110
    assert axcache(0xC, False) == 0


def test_hash_select_fibonacci_mask_matches_formula():
    # TRM Table 2-1: 2 ports, 256B Fibonacci: addr[8]^addr[9]^addr[10]^addr[11]^addr[13]^addr[16]^addr[21]^addr[29]
    rng = np.random.default_rng(7)
    for a in rng.integers(0, 1 << 40, 200, dtype=np.int64):
        a = int(a)
        want = 0
        for b in (8, 9, 10, 11, 13, 16, 21, 29):
            want ^= (a >> b) & 1
        assert hash_select(0x0020212F00, a) == want


def test_dataport_routes_and_splits_by_stripe():
    m = Memory()
    r = RegionRoute(base=0x4000, interface=Interface.sram, memtype=0xB, domain=3, prot=0b10,
                    hash0=0x40, nports=2)                         # 64 B trivial striping
    port = DataPort(m, lambda region: r)
    port.write(0, 0x30, bytes(range(100)), Channel.wr_ofm)
    assert m.read(0x4030, 100) == bytes(range(100))
    ports = [(t.port, t.addr, t.length) for t in m.log]
    assert ports == [("SRAM0", 0x4030, 16), ("SRAM1", 0x4040, 64), ("SRAM0", 0x4080, 20)]
    assert all(t.cache == 0b1111 and t.domain == 3 and t.prot == 0b10 for t in m.log)
    assert bytes(port.read(0, 0x30, 100, Channel.rd_ifm)) == bytes(range(100))


def test_dataport_raises_busfault_with_context():
    m = Memory()
    r = RegionRoute(base=0, interface=Interface.ext, memtype=0, domain=0, prot=0)
    port = DataPort(m, lambda region: r)
    m.inject_fault(0x200, 0x300, Resp.SLVERR)
    with pytest.raises(BusFault) as e:
        port.read(0, 0x1F0, 32, Channel.rd_weights)
    assert e.value.channel == Channel.rd_weights and e.value.interface == Interface.ext
    assert e.value.resp == Resp.SLVERR


def test_dataport_wraps_at_40_bits():
    m = Memory()
    r = RegionRoute(base=ADDR_MASK - 3, interface=Interface.sram, memtype=0, domain=0, prot=0)
    port = DataPort(m, lambda region: r)
    port.write(0, 0, b"12345678", Channel.wr_ofm)
    assert m.read(ADDR_MASK - 3, 4) == b"1234" and m.read(0, 4) == b"5678"


def _batch(addr, length):
    return TxnBatch(("SRAM0",), None, Channel.wr_ofm, True, np.array(addr, np.int64), np.array(length, np.int64))


@pytest.mark.parametrize("how", ["write", "write_u32", "store", "store_crossing", "access", "batch_contiguous",
                                 "batch_scatter", "load_pages", "restore_pages"])
def test_every_content_change_moves_the_version(how):
    """Memory.version moves with every call that can change the contents (runner.Session
    restores only a frozen run's spans while it stands still)."""
    m = Memory()
    m.write(0x1000, bytes(64))
    v = m.version
    buf = np.full(8, 7, np.uint8)
    {"write": lambda: m.write(0x1000, b"x"),
     "write_u32": lambda: m.write_u32(0x1000, 1),
     "store": lambda: m.store(0x1000, buf),
     "store_crossing": lambda: m.store(0xFFFC, buf),
     "access": lambda: m.access(Transaction("EXT0", Channel.wr_ofm, True, 0x1000, 4), b"WXYZ"),
     "batch_contiguous": lambda: m.access_batch(_batch([0x1000, 0x1008], [8, 8]), np.ones(16, np.uint8)),
     "batch_scatter": lambda: m.access_batch(_batch([0x1000, 0x30000], [8, 8]), np.ones(16, np.uint8)),
     "load_pages": lambda: m.load_pages(m.copy_pages()),
     "restore_pages": lambda: m.restore_pages(m.copy_pages())}[how]()
    assert m.version > v, f"{how} left the version"
    assert not m.pages_out


def test_pages_out_marks_live_pages_handed_out():
    """page() and page_items() hand out live arrays (pages_out for good); reads, copies,
    read-only views, live_page (the warm paths') and page_indices do not, nor move the version."""
    m = Memory()
    m.write(0x1000, bytes(range(16)))
    v = m.version
    m.read(0x1000, 4), m.view(0x1000, 4), m.copy_pages(), m.equals(0x1000, b"\0"), m.page_indices()
    assert m.live_page(0) is not None and m.version == v and not m.pages_out
    m.page(0)
    assert m.pages_out
    m2 = Memory()
    list(m2.page_items())
    assert m2.pages_out
