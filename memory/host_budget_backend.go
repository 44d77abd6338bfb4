package memory

// The backends a HostBudget charges: NewBudgetBackend wraps a backend so
// that every region it hands out (and, for a VirtualMemory, every physical
// page it creates) is charged to the budget before it reaches the backend,
// and settled when it is freed. The budget itself, its default and
// EnvHostMemory are in host_budget.go.

// NewBudgetBackend wraps up so that every region it hands out is charged
// to b, and an allocation that would pass b's limit fails with
// ErrOutOfMemory without reaching up. When up is a VirtualMemory, so is
// the wrapper: address space is free, and each physical page is charged
// when it is created. With a nil b (no budget) it returns up itself.
func NewBudgetBackend(up Backend, b *HostBudget) Backend {
	if b == nil {
		return up
	}
	bb := budgetBackend{up: up, budget: b}
	if vm, ok := up.(VirtualMemory); ok {
		return &budgetVM{budgetBackend: bb, vm: vm}
	}
	return &bb
}

// budgetBackend is NewBudgetBackend's wrapper.
type budgetBackend struct {
	up     Backend
	budget *HostBudget
}

func (w *budgetBackend) Name() string { return w.up.Name() }
func (w *budgetBackend) Tier() Tier   { return w.up.Tier() }

// hostBudget is the budget charged (budgetOf).
func (w *budgetBackend) hostBudget() *HostBudget { return w.budget }

func (w *budgetBackend) Alloc(size int64) (Region, error) {
	if size <= 0 {
		return w.up.Alloc(size) // the backend's own error for a bad size
	}
	if err := w.budget.charge(w.up.Name(), size); err != nil {
		return Region{}, err
	}
	r, err := w.up.Alloc(size)
	if err != nil {
		w.budget.release(size)
	} else if r.Size != size {
		// A bad region, which the pool gives back at once: charged at
		// the size its Free releases.
		w.budget.resize(size, r.Size)
	}
	return r, err
}

// Free gives r back and settles its charge (HostBudget.freed): a failed
// free leaves it charged, and lost.
func (w *budgetBackend) Free(r Region) error {
	err := w.up.Free(r)
	w.budget.freed(r.Size, err)
	return err
}

// Info reports the budget: what is left of it, and the limit.
func (w *budgetBackend) Info() (free, total int64, ok bool) {
	used, _ := w.budget.Used()
	return max(0, w.budget.limit-used), w.budget.limit, true
}

// budgetVM is the wrapper of a VirtualMemory backend.
type budgetVM struct {
	budgetBackend
	vm VirtualMemory
}

func (w *budgetVM) Granularity() int64                        { return w.vm.Granularity() }
func (w *budgetVM) AddressSpace() int64                       { return w.vm.AddressSpace() }
func (w *budgetVM) ReserveAddress(size int64) (Region, error) { return w.vm.ReserveAddress(size) }
func (w *budgetVM) FreeAddress(r Region) error                { return w.vm.FreeAddress(r) }
func (w *budgetVM) Map(addr uintptr, pages []Page) error      { return w.vm.Map(addr, pages) }
func (w *budgetVM) Unmap(addr uintptr, pages []Page) error    { return w.vm.Unmap(addr, pages) }
func (w *budgetVM) Sync() error                               { return w.vm.Sync() }

// largestRequest is the wrapped backend's bound on one request.
func (w *budgetVM) largestRequest() (int64, string) { return requestBound(w.vm) }

func (w *budgetVM) CreatePage() (Page, error) {
	g := w.vm.Granularity()
	if err := w.budget.charge(w.vm.Name(), g); err != nil {
		return 0, err
	}
	p, err := w.vm.CreatePage()
	if err != nil {
		w.budget.release(g)
	}
	return p, err
}

// ReleasePage gives p back and settles its charge, as Free does.
func (w *budgetVM) ReleasePage(p Page) error {
	err := w.vm.ReleasePage(p)
	w.budget.freed(w.vm.Granularity(), err)
	return err
}

// budgetOf returns the budget a backend of NewBudgetBackend charges, nil
// for other backends.
func budgetOf(b Backend) *HostBudget {
	if w, ok := b.(interface{ hostBudget() *HostBudget }); ok {
		return w.hostBudget()
	}
	return nil
}

// hostMemory reports whether b hands out plain host memory: a host
// backend, alone or charged to a budget.
func hostMemory(b Backend) bool {
	switch w := b.(type) {
	case *budgetBackend:
		return hostOnly(w.up)
	case *budgetVM:
		return hostOnly(w.up)
	}
	return hostOnly(b)
}
