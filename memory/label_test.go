package memory_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// liveBlock finds the live block at addr in a snapshot.
func liveBlock(t *testing.T, s memory.Snapshot, addr uintptr) memory.BlockInfo {
	t.Helper()
	for _, ts := range s.Tiers {
		for _, seg := range ts.Segments {
			for _, b := range seg.Blocks {
				if b.Live && b.Addr == addr {
					return b
				}
			}
		}
	}
	t.Fatalf("no live block at %#x in the snapshot", addr)
	return memory.BlockInfo{}
}

// TestSetLabelAppearsInSnapshotsAndLeakReports: SetLabel's doc promises
// the name in snapshots and leak reports; neither carried it.
func TestSetLabelAppearsInSnapshotsAndLeakReports(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	w, err := m.Alloc(1000, memory.RoleParameter)
	require.NoError(t, err)
	w.SetLabel("wte")
	plain, err := m.Alloc(2000, memory.RoleParameter)
	require.NoError(t, err)
	g, err := m.Alloc(3000, memory.RoleGradient)
	require.NoError(t, err)
	g.SetLabel("grad:wte")
	freed, err := m.Alloc(1000, memory.RoleParameter)
	require.NoError(t, err)
	freed.SetLabel("gone")
	require.NoError(t, freed.Free())

	snap := m.Snapshot()
	assert.Equal(t, "wte", liveBlock(t, snap, w.Addr()).Label)
	assert.Equal(t, "", liveBlock(t, snap, plain.Addr()).Label)
	assert.Equal(t, "grad:wte", liveBlock(t, snap, g.Addr()).Label)
	js, err := json.Marshal(snap)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"label":"wte"`)
	assert.NotContains(t, string(js), "gone", "a freed allocation's label leaves with it")
	segs := m.Pool(w.Tier()).Segments()
	found := false
	for _, s := range segs {
		for _, b := range s.Blocks {
			found = found || b.Live && b.Label == "wte"
		}
	}
	assert.True(t, found, "Pool.Segments of a manager's pool names labelled blocks too")

	// A migrated allocation keeps its label in the snapshot.
	require.NoError(t, m.Migrate(w, memory.TierOffload))
	assert.Equal(t, "wte", liveBlock(t, m.Snapshot(), w.Addr()).Label)
	w.SetLabel("wte2")
	assert.Equal(t, "wte2", liveBlock(t, m.Snapshot(), w.Addr()).Label)

	err = m.Close()
	require.ErrorIs(t, err, memory.ErrLeaked)
	msg := err.Error()
	t.Log(msg)
	assert.Contains(t, msg, "wte2")
	assert.Contains(t, msg, "grad:wte")
	assert.NotContains(t, msg, "gone")
	assert.True(t, strings.Index(msg, "parameter") < strings.Index(msg, "wte2"), msg)
}
