package memviz

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestTimelineEndsOnFinalState: a time bucket keeps its moment of most
// allocated bytes, and the timeline used to end on that peak when a
// tier's last events fell into one bucket: a block allocated and freed at
// the history's last timestamp, or by a tier that then went quiet while
// another tier went on, showed as held to the end. Each tier's last
// sample is now its state after its last event, at the history's end;
// the peak stays in the samples.
func TestTimelineEndsOnFinalState(t *testing.T) {
	act := memory.RoleActivation
	ev := func(at int64, k memory.EventKind, tier memory.Tier, block int64) memory.Event {
		return memory.Event{Time: at, Kind: k, Tier: tier, Role: act, Size: block, Block: block}
	}
	dev, host := memory.TierDevice, memory.TierHost
	for name, tc := range map[string]struct {
		events []memory.Event
		tier   memory.Tier
	}{
		"last events share a timestamp": {events: []memory.Event{
			ev(0, memory.EventAlloc, dev, 1000),
			ev(50, memory.EventAlloc, dev, 1<<20),
			ev(50, memory.EventFree, dev, 1<<20),
		}, tier: dev},
		"a tier goes quiet after a peak": {events: []memory.Event{
			ev(0, memory.EventAlloc, dev, 1000),
			ev(40, memory.EventAlloc, dev, 1<<20),
			ev(41, memory.EventFree, dev, 1<<20),
			ev(50, memory.EventAlloc, host, 512),
			ev(1000, memory.EventFree, host, 512),
		}, tier: dev},
	} {
		h := &memory.History{Events: tc.events}
		for _, byEvent := range []bool{false, true} {
			samples, _ := tierSamples(h, 1, byEvent) // one bucket for all but the last moment
			ss := samples[tc.tier]
			require.NotEmpty(t, ss, name)
			last := ss[len(ss)-1]
			assert.Equal(t, int64(1000), last.allocated[act], "%s (by event %v): the timeline ends on the final state", name, byEvent)
			var peak int64
			for _, s := range ss {
				peak = max(peak, s.allocated[act])
			}
			assert.Equal(t, int64(1000+1<<20), peak, "%s (by event %v): the peak is kept", name, byEvent)
			want := float64(h.Events[len(h.Events)-1].Time-h.Events[0].Time) / 1e6
			if byEvent {
				want = float64(len(h.Events) - 1)
			}
			assert.Equal(t, want, last.t, "%s (by event %v): the last sample is at the end", name, byEvent)
		}
	}
}
