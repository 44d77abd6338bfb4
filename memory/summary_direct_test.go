package memory_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestSummaryCountsDirectPoolBlocks: blocks allocated from a tier's Pool
// directly (no role) get a row of their own, so the role table adds up
// to its total. The total row took its bytes from the tiers (3 MiB of a
// direct block included) and its counts from the roles (5 KiB of them),
// which its doc said were equal.
func TestSummaryCountsDirectPoolBlocks(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic})
	defer func() { require.NoError(t, m.Close()) }()
	a := mustManagerAlloc(t, m, 5*KiB, memory.RoleGradient)
	p := m.Pool(memory.TierDevice)
	b, err := p.Alloc(3*MiB, 0)
	require.NoError(t, err)
	// A migration allocates and frees in the tiers only: no row of its own.
	require.NoError(t, m.Migrate(a, memory.TierManaged))
	row := func(out, prefix string) []string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prefix) {
				return strings.Fields(strings.TrimPrefix(l, prefix))
			}
		}
		return nil
	}
	out := m.Summary()
	assert.Equal(t, []string{"3.00", "MiB", "-", "3.00", "MiB", "-", "1", "-", "the", "tiers'", "pools,", "directly"}, row(out, "no role "), out)
	assert.Equal(t, []string{"3.00", "MiB", "3.01", "MiB", "3.00", "MiB", "3.01", "MiB", "2", "1"}, row(out, "total "), out)
	require.NoError(t, p.Free(b))
	out = m.Summary()
	assert.Nil(t, row(out, "no role "), "no direct block live: no row\n%s", out)
	assert.Equal(t, []string{"5.00", "KiB", "3.01", "MiB", "5.00", "KiB", "3.01", "MiB", "1", "1"}, row(out, "total "), out)
	require.NoError(t, a.Free())
}
