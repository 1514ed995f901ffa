// The VMM's snapshot format version (native/vmm/snapfile.h, SNAP_VERSION; docs/snapshots.md). A VMM refuses a
// snapshot of another version, so whatever the engine keys on a snapshot it will restore later (a Smolfile's base)
// carries it: after a format change, the next `smol up` boots afresh and bakes a new base instead of failing.
export const SNAPSHOT_FORMAT = 2;
