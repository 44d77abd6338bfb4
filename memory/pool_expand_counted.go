package memory

// countedVM is an expandable pool's backend as the pool calls it: the
// backend, counting the pages mapped and unmapped and the
// synchronisations into the pool's statistics (Usage.PagesMapped,
// PagesUnmapped, Syncs), so that a run shows whether its steps keep
// moving pages. Only calls that succeed count.
type countedVM struct {
	VirtualMemory
	sinks *usageSinks
}

func (c countedVM) Map(addr uintptr, pages []Page) error {
	err := c.VirtualMemory.Map(addr, pages)
	if err == nil {
		c.sinks.each(func(u *liveUsage) { u.PagesMapped += int64(len(pages)) })
	}
	return err
}

func (c countedVM) Unmap(addr uintptr, pages []Page) error {
	err := c.VirtualMemory.Unmap(addr, pages)
	if err == nil {
		c.sinks.each(func(u *liveUsage) { u.PagesUnmapped += int64(len(pages)) })
	}
	return err
}

func (c countedVM) Sync() error {
	err := c.VirtualMemory.Sync()
	if err == nil {
		c.sinks.each(func(u *liveUsage) { u.Syncs++ })
	}
	return err
}
