package gorgonia_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/interop/gorgonia"
	"github.com/strata-ml/strata/memory"
)

// An Engine not made by NewEngine (the zero value, or nil) has no manager
// to allocate from: its methods return an error wrapping
// memory.ErrInvalidArgument that says so (Memclr, which returns none,
// panics with it), not a nil dereference.
func TestEngineNotFromNewEngine(t *testing.T) {
	var nilEngine *gorgonia.Engine
	d := gt.New(gt.WithShape(2), gt.WithBacking([]float32{1, 2}))
	for name, e := range map[string]*gorgonia.Engine{"zero value": {}, "nil": nilEngine} {
		check := func(what string, err error) {
			t.Helper()
			require.ErrorIs(t, err, memory.ErrInvalidArgument, "%s: %s", name, what)
			assert.ErrorContains(t, err, "not made by NewEngine", "%s: %s", name, what)
		}
		require.NotPanics(t, func() {
			_, err := e.Alloc(8)
			check("Alloc", err)
			check("Free", e.Free(d, 8))
			_, err = e.Accessible(d)
			check("Accessible", err)
			check("Memset", e.Memset(d, float32(0)))
			check("Memcpy", e.Memcpy(d, d))
		}, name)
		require.PanicsWithError(t, "gorgonia: Engine.Memclr: an Engine not made by NewEngine: invalid argument", func() { e.Memclr(d) }, name)
	}
}
