package memory_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

func TestBudgetBackendConformance(t *testing.T) {
	memtest.RunBackend(t, func() memory.Backend {
		return memory.NewBudgetBackend(memory.NewHostBackend(memory.TierHost), memory.NewHostBudget(1<<30, "test"))
	})
}

// One budget shared by every tier of a host manager: an allocation that
// would pass it fails with an *OOMError naming the budget, after the pools
// released their caches, and the manager keeps working.
func TestHostBudgetSharedByTiers(t *testing.T) {
	b := memory.NewHostBudget(64<<20, "test")
	m := memory.NewBudgetHostManager(memory.Config{}, b)
	defer func() { require.NoError(t, m.Close()) }()
	// Parameters and activations sit in different tiers' pools under the
	// hybrid policy on a GPU; on the host all tiers draw on one budget.
	p, err := m.Alloc(30<<20, memory.RoleParameter)
	require.NoError(t, err)
	a, err := m.Alloc(30<<20, memory.RoleStaging)
	require.NoError(t, err)
	used, _ := b.Used()
	require.GreaterOrEqual(t, used, int64(60<<20))
	_, err = m.Alloc(8<<20, memory.RoleActivation)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	var oom *memory.OOMError
	require.True(t, errors.As(err, &oom))
	require.Contains(t, err.Error(), "host memory budget of 64.00 MiB (test)")
	require.NoError(t, a.Free())
	require.NoError(t, m.EmptyCache())
	c, err := m.Alloc(8<<20, memory.RoleActivation)
	require.NoError(t, err, "the bytes given back are available again")
	require.NoError(t, c.Free())
	require.NoError(t, p.Free())
	require.NoError(t, m.EmptyCache())
	used, peak := b.Used()
	require.Zero(t, used)
	require.GreaterOrEqual(t, peak, int64(60<<20))
}

// A budget over a VirtualMemory backend is one too, and charges its pages.
func TestBudgetVirtualMemory(t *testing.T) {
	up := memory.NewHostBackend(memory.TierHost)
	vm, ok := up.(memory.VirtualMemory)
	if !ok {
		t.Skip("the host backend has no virtual memory here")
	}
	b := memory.NewHostBudget(2*vm.Granularity(), "test")
	w, ok := memory.NewBudgetBackend(up, b).(memory.VirtualMemory)
	require.True(t, ok, "the wrapper keeps the VirtualMemory interface")
	p1, err := w.CreatePage()
	require.NoError(t, err)
	p2, err := w.CreatePage()
	require.NoError(t, err)
	_, err = w.CreatePage()
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	require.NoError(t, w.ReleasePage(p1))
	require.NoError(t, w.ReleasePage(p2))
	used, _ := b.Used()
	require.Zero(t, used)
}

func TestParseHostMemory(t *testing.T) {
	for in, want := range map[string]int64{
		"off": 0, "none": 0, "0": 0, "1073741824": 1 << 30, "8GiB": 8 << 30, "8G": 8 << 30, "500MB": 500e6,
		"0.5GiB": 1 << 29, "50%": 500, " 25 % ": 250, "2 KiB": 2048,
	} {
		got, err := memory.ParseHostMemory(in, 1000)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	// A fraction a float64 loses is still no whole number of bytes.
	for _, in := range []string{"lots", "-1GiB", "8XB", "0%", "150%", "NaN", "1e30GiB", "0.1", "4611686018427387903.9", "1000000000000000000.5"} {
		_, err := memory.ParseHostMemory(in, 1000)
		require.Error(t, err, in)
	}
	_, err := memory.ParseHostMemory("50%", 0)
	require.ErrorContains(t, err, "cannot be read")
}

func TestDefaultHostBudget(t *testing.T) {
	t.Setenv(memory.EnvHostMemory, "")
	b, err := memory.DefaultHostBudget()
	require.NoError(t, err)
	if b != nil {
		require.Positive(t, b.Limit())
		require.Contains(t, b.String(), memory.EnvHostMemory, "the message says how to change it")
	}
	t.Setenv(memory.EnvHostMemory, "3GiB")
	b, err = memory.DefaultHostBudget()
	require.NoError(t, err)
	require.Equal(t, int64(3<<30), b.Limit())
	require.Equal(t, "host memory budget of 3.00 GiB (STRATA_HOST_MEMORY=3GiB)", b.String())
	t.Setenv(memory.EnvHostMemory, "off")
	b, err = memory.DefaultHostBudget()
	require.NoError(t, err)
	require.Nil(t, b)
	t.Setenv(memory.EnvHostMemory, "plenty")
	_, err = memory.DefaultHostBudget()
	require.ErrorContains(t, err, `STRATA_HOST_MEMORY="plenty"`)
}

// A limit of 0 is no budget, as ParseHostMemory reads "off": not a budget
// of 0 bytes refusing every allocation. A negative limit panics with an
// error naming it.
func TestNewHostBudgetZeroIsNoBudget(t *testing.T) {
	off, err := memory.ParseHostMemory("off", 1<<30)
	require.NoError(t, err)
	b := memory.NewHostBudget(off, "STRATA_HOST_MEMORY=off")
	require.Nil(t, b)
	require.Zero(t, b.Limit())
	m := memory.NewBudgetHostManager(memory.Config{}, b)
	a, err := m.Alloc(1<<20, memory.RoleParameter)
	require.NoError(t, err)
	require.NoError(t, a.Free())
	require.NoError(t, m.Close())

	defer func() {
		err, _ := recover().(error)
		require.ErrorIs(t, err, memory.ErrInvalidArgument)
		require.ErrorContains(t, err, "NewHostBudget: negative limit -1 bytes (test)")
	}()
	memory.NewHostBudget(-1, "test")
	t.Fatal("a negative limit did not panic")
}

// TestParseHostMemoryWholeCountWithPoint: a whole byte count written with
// a point ("9007199254740993.0") is read exactly, as one without is: it
// went through a float64, which rounded it to 9007199254740992, read
// 2^62-1 as 2^62 and took 2^62+1, past the largest size, as 2^62.
func TestParseHostMemoryWholeCountWithPoint(t *testing.T) {
	for in, want := range map[string]int64{
		"9007199254740993.0": 1<<53 + 1, "9007199254740993.000B": 1<<53 + 1,
		"4611686018427387903.0": 1<<62 - 1, "4611686018427387904.0": 1 << 62, "1e3": 1000,
	} {
		got, err := memory.ParseHostMemory(in, 0)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"4611686018427387905.0", "4611686018427387905.0B"} {
		got, err := memory.ParseHostMemory(in, 0)
		require.ErrorContains(t, err, "more than the largest size", "%s read as %d", in, got)
	}
}
