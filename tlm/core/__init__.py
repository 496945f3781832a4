"""Device-neutral core of the TLMs: traces, the device registry, shared machinery.

Nothing here names a device; device packages (`tlm.<device>`) import core, never the
reverse."""
