// Package memviz turns strata's memory records into what people debug
// memory with: PyTorch's memory_viz and Perfetto. It reads the allocation
// history a memory.Manager records (Manager.RecordHistory) and its
// snapshots (Manager.Snapshot), and writes:
//
//   - WriteChromeTrace: a Chrome trace-event JSON file that opens in
//     ui.perfetto.dev or chrome://tracing. Each tier is a process with
//     counter tracks of its allocated and reserved bytes and of its
//     allocated bytes per role; the largest allocations are slices (named
//     by the op that asked, with role, size and address as arguments) on
//     as few lanes as they need without overlapping; reservations,
//     releases and marks (a training step's start) are instant events.
//   - WriteTimelinePNG: bytes by role over time, one panel per tier that
//     holds any, stacked like memory_viz's active-memory timeline, with
//     the tier's reserved bytes as a line and marks as vertical lines.
//   - WriteSegmentMapPNG: every segment of a snapshot laid out along rows
//     of equal bytes, each block coloured by its role, free bytes grey,
//     pending blocks hatched, unmapped pages of expandable segments white.
//   - WriteSnapshotJSON: the snapshot itself, indented.
//
// The package is separate from memory so that the memory manager does not
// import a plotting library (gonum.org/v1/plot). Time windows select a part
// of the history: Window(h, "step 3", "step 4") spans two marks.
//
// A nil history or a nil writer is an error wrapping
// memory.ErrInvalidArgument that names the function (the writers,
// Window, SnapshotAt), not a panic; WindowTime of a nil history gives nil
// (which the writers then refuse) and PeakEvent 0. So are a history with
// an event of a tier or role that does not exist (one made by hand), a
// live block of such a role in WriteSegmentMapPNG's snapshot (or a block
// of negative size, or sizes summing past 2^62 bytes), a tier or
// segment of such a tier in SnapshotAt's start snapshot, and
// PlotOptions whose size or DPI is negative or whose picture would have
// more than 2^28 pixels. A history without events writes a valid Chrome
// trace; the PNG writers refuse, with an error, a history in which no tier
// holds or moves bytes (no events, or marks only) and a snapshot without
// segments: nothing to draw.
package memviz
