package memviz

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestTimelineKeepsReservedPeak: a time bucket kept its moment of most
// allocated bytes but the reserved bytes of its last event, so a segment
// reserved and released within one bucket while fewer bytes were
// allocated than the bucket's peak (an expandable pool maps and unmaps
// pages as it goes) vanished from the reserved line, and the bucket could
// show fewer bytes reserved than allocated. A bucket now keeps its most
// reserved bytes too, and the line still ends on the final state.
func TestTimelineKeepsReservedPeak(t *testing.T) {
	act, dev := memory.RoleActivation, memory.TierDevice
	ev := func(at int64, k memory.EventKind, size int64) memory.Event {
		e := memory.Event{Time: at, Kind: k, Tier: dev, Role: act, Size: size}
		if k == memory.EventAlloc || k == memory.EventFree {
			e.Block = size
		}
		return e
	}
	for name, tc := range map[string]struct {
		events []memory.Event
		peak   int64
	}{
		"a segment between two allocations": {events: []memory.Event{
			ev(0, memory.EventReserve, 2<<20),
			ev(10, memory.EventAlloc, 2<<20), // the bucket's allocated peak
			ev(20, memory.EventFree, 2<<20),
			ev(30, memory.EventReserve, 8<<20), // the reserved peak, 10 MiB
			ev(40, memory.EventAlloc, 1<<20),
			ev(50, memory.EventFree, 1<<20),
			ev(60, memory.EventRelease, 8<<20),
			ev(1000, memory.EventRelease, 2<<20),
		}, peak: 10 << 20},
		"the peak's segment released": {events: []memory.Event{
			ev(0, memory.EventReserve, 8<<20),
			ev(10, memory.EventAlloc, 8<<20),
			ev(20, memory.EventFree, 8<<20),
			ev(30, memory.EventRelease, 8<<20),
			ev(40, memory.EventAlloc, 0),
			ev(1000, memory.EventFree, 0),
		}, peak: 8 << 20},
	} {
		h := &memory.History{Events: tc.events}
		for _, byEvent := range []bool{false, true} {
			samples, _ := tierSamples(h, 1, byEvent) // one bucket for all but the last moment
			ss := samples[dev]
			require.NotEmpty(t, ss, name)
			var peak int64
			for _, s := range ss {
				peak = max(peak, s.reserved)
				assert.GreaterOrEqual(t, s.reserved, sum(s.allocated), "%s (by event %v): the sample at %v reserves what it allocates", name, byEvent, s.t)
			}
			assert.Equal(t, tc.peak, peak, "%s (by event %v): the reserved peak is kept", name, byEvent)
			assert.Equal(t, int64(0), ss[len(ss)-1].reserved, "%s (by event %v): the line ends on the final state", name, byEvent)
		}
	}
}
