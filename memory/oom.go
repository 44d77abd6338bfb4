package memory

import "strings"

// OOMError is the error of an allocation that failed for lack of memory,
// after the pool released its cached segments and retried. It carries what
// PyTorch's out-of-memory message carries, so the reader can tell a real
// shortage (little reserved, device full) from fragmentation (much reserved
// but unallocated) or a self-imposed limit. errors.Is(err, ErrOutOfMemory)
// holds for it.
type OOMError struct {
	// Tier and Backend say where the allocation was tried.
	Tier    Tier
	Backend string
	// Requested is the size the caller asked for.
	Requested int64
	// Limit is the pool's limit on reserved bytes, 0 for none; Shared
	// the bytes other tiers hold against it (the device budget also
	// covers the managed tier, whose pages live on the device).
	Limit, Shared int64
	// Held is what callers hold against the limit outside the pools
	// (Manager.Hold: the copy ring's slots).
	Held int64
	// Allocated and Reserved are the pool's bytes at the time of failure;
	// ReservedUnallocated is their difference, the cached bytes that could
	// not serve the request (fragmentation).
	Allocated, Reserved, ReservedUnallocated int64
	// DeviceFree and DeviceTotal are the backend's view of the underlying
	// resource, -1 when the backend cannot tell.
	DeviceFree, DeviceTotal int64
	// Cause is the backend's error, or nil when the limit refused the
	// allocation before the backend was asked.
	Cause error
	// Host says the memory is plain host memory (the CPU device's tiers
	// are), which the message calls so rather than a device.
	Host bool
	// Budget is the limit of the HostBudget the backend charges, 0 for
	// none, and BudgetSource where it came from (HostBudget's source);
	// DeviceFree and DeviceTotal are then the budget's.
	Budget       int64
	BudgetSource string
	// Wait is the error of a failed wait for blocks pending on other
	// streams' work, which might have made room, nil when none failed: the
	// pool went on to release its cache and retry all the same, and the
	// blocks stay pending (EmptyCache and Close wait for them again).
	Wait error
}

// Error reads like PyTorch's message, for example
//
//	memory: out of memory on device (cuda:0): tried to allocate 20.00 MiB;
//	limit 1.00 GiB; 900.00 MiB allocated; 950.00 MiB reserved (50.00 MiB
//	reserved but unallocated); device free 0 B of 80.00 GiB
//
// (on one line), followed by the limit or the backend's error as the cause.
// Host memory (the CPU device's) reads
//
//	memory: out of host memory for the device tier (host(device)): tried to
//	allocate 200.00 MiB; host memory budget of 17.66 GiB (75% of ...); ...;
//	budget free 972.00 KiB of 17.66 GiB
//
// naming the budget that applies, and what is left of it.
func (e *OOMError) Error() string {
	var b strings.Builder
	switch {
	case !e.Host:
		b.WriteString("memory: out of memory on ")
		b.WriteString(e.Tier.String())
	case e.Tier == TierHost:
		b.WriteString("memory: out of host memory")
	default:
		b.WriteString("memory: out of host memory for the ")
		b.WriteString(e.Tier.String())
		b.WriteString(" tier")
	}
	b.WriteString(" (")
	b.WriteString(e.Backend)
	b.WriteString("): tried to allocate ")
	b.WriteString(FormatBytes(e.Requested))
	// The pool's limit, and the host budget where one applies: "limit
	// none" only when neither does.
	switch {
	case e.Limit > 0:
		b.WriteString("; limit ")
		b.WriteString(FormatBytes(e.Limit))
		if e.Shared > 0 {
			b.WriteString(" (")
			b.WriteString(FormatBytes(e.Shared))
			b.WriteString(" of it held by managed memory)")
		}
		if e.Held > 0 {
			b.WriteString(" (")
			b.WriteString(FormatBytes(e.Held))
			b.WriteString(" of it held outside the pools)")
		}
	case e.Budget <= 0:
		b.WriteString("; limit none")
	}
	if e.Budget > 0 {
		b.WriteString("; ")
		b.WriteString(e.budget())
	}
	b.WriteString("; ")
	b.WriteString(FormatBytes(e.Allocated))
	b.WriteString(" allocated; ")
	b.WriteString(FormatBytes(e.Reserved))
	b.WriteString(" reserved (")
	b.WriteString(FormatBytes(e.ReservedUnallocated))
	b.WriteString(" reserved but unallocated)")
	if e.DeviceTotal >= 0 {
		switch {
		case e.Budget > 0:
			b.WriteString("; budget free ")
		case e.Host:
			b.WriteString("; host free ")
		default:
			b.WriteString("; device free ")
		}
		b.WriteString(FormatBytes(e.DeviceFree))
		b.WriteString(" of ")
		b.WriteString(FormatBytes(e.DeviceTotal))
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	} else {
		b.WriteString(": the limit on reserved bytes would be exceeded")
	}
	if e.Wait != nil {
		b.WriteString("; and waiting for blocks pending on other streams failed: ")
		b.WriteString(e.Wait.Error())
	}
	return b.String()
}

// Unwrap returns ErrOutOfMemory, the cause and the failed wait, so
// errors.Is and errors.As see them all.
func (e *OOMError) Unwrap() []error {
	errs := []error{ErrOutOfMemory}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	if e.Wait != nil {
		errs = append(errs, e.Wait)
	}
	return errs
}

// budget names the host memory budget, as HostBudget.String does.
func (e *OOMError) budget() string {
	s := "host memory budget of " + FormatBytes(e.Budget)
	if e.BudgetSource != "" {
		s += " (" + e.BudgetSource + ")"
	}
	return s
}
