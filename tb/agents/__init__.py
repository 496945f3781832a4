"""Bus agents bound by pin maps (device-neutral): hwpe (HWPE peripheral port), tcdm (HWPE-Mem
initiator ports)."""
