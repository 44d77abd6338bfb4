package memory

import (
	"fmt"
	"strconv"
	"strings"
)

// Summary returns a text table like torch.cuda.memory_summary: for every
// tier and in total, the current and peak allocated, requested, reserved,
// active and inactive-split bytes and the call counts; then, per role, its
// placement, current and peak bytes, live and total allocations, then a
// "no role" row while blocks allocated from a tier's Pool directly
// (Manager.Pool), not through Alloc, are live: the total's current bytes
// and live blocks less the roles' (their peaks and calls are not kept
// apart: the tier table's allocs row counts them), and a total row: every
// tier's bytes, the sum of the rows above in current bytes and live
// blocks, and the Alloc calls. The fragmentation row is
// GMLake's measure, 1 - peak active / peak reserved: the share of the
// reserved peak that never held live data.
func (m *Manager) Summary() string {
	m.mu.Lock()
	s := m.stats()
	policy := m.policy
	var backends [NumTiers]string
	for t, p := range m.pools {
		if p != nil {
			backends[t] = p.name
		}
	}
	closed := m.closed
	spilledTo := m.spillDest(TierDevice)
	m.mu.Unlock()

	const (
		head  = 22
		col   = 15
		width = head + col*(int(NumTiers)+1)
	)
	var b strings.Builder
	rule := func(c string) { b.WriteString(strings.Repeat(c, width)); b.WriteByte('\n') }
	row := func(label string, cells [NumTiers + 1]string) {
		line := fmt.Sprintf("%-*s", head, label)
		for _, c := range cells {
			line += fmt.Sprintf("%*s", col, c)
		}
		b.WriteString(strings.TrimRight(line, " "))
		b.WriteByte('\n')
	}
	tierRow := func(label string, f func(u *Usage) string) {
		var cells [NumTiers + 1]string
		for t := range NumTiers {
			cells[t] = "-"
			if backends[t] != "" {
				cells[t] = f(&s.Tiers[t])
			}
		}
		cells[NumTiers] = f(&s.Total)
		row(label, cells)
	}
	bytesRow := func(label string, f func(u *Usage) *Stat) {
		tierRow(label+" current", func(u *Usage) string { return FormatBytes(f(u).Current) })
		tierRow(label+" peak", func(u *Usage) string { return FormatBytes(f(u).Peak) })
	}
	countRow := func(label string, f func(u *Usage) int64) {
		tierRow(label, func(u *Usage) string { return strconv.FormatInt(f(u), 10) })
	}

	rule("=")
	title := "strata memory summary"
	if closed {
		title += " (closed)"
	}
	b.WriteString(title + "\n")
	rule("-")
	var names [NumTiers + 1]string
	for t := range NumTiers {
		names[t] = t.String()
	}
	names[NumTiers] = "total"
	row("tier", names)
	var be [NumTiers + 1]string
	for t := range NumTiers {
		be[t] = "-"
		if backends[t] != "" {
			be[t] = backends[t]
		}
	}
	row("backend", be)
	var lim [NumTiers + 1]string
	for t := range NumTiers {
		lim[t] = "-"
		if backends[t] != "" && s.Limits[t] > 0 {
			lim[t] = FormatBytes(s.Limits[t])
		}
	}
	lim[NumTiers] = "-"
	row("limit", lim)
	rule("-")
	bytesRow("allocated     ", func(u *Usage) *Stat { return &u.Allocated })
	bytesRow("requested     ", func(u *Usage) *Stat { return &u.Requested })
	bytesRow("reserved      ", func(u *Usage) *Stat { return &u.Reserved })
	bytesRow("active        ", func(u *Usage) *Stat { return &u.Active })
	bytesRow("inactive split", func(u *Usage) *Stat { return &u.InactiveSplit })
	tierRow("fragmentation", func(u *Usage) string {
		if u.Reserved.Peak == 0 {
			return "-"
		}
		return strconv.FormatFloat(100*(1-float64(u.Active.Peak)/float64(u.Reserved.Peak)), 'f', 1, 64) + "%"
	})
	countRow("allocs", func(u *Usage) int64 { return u.Allocs })
	countRow("frees", func(u *Usage) int64 { return u.Frees })
	countRow("backend allocs", func(u *Usage) int64 { return u.BackendAllocs })
	countRow("backend frees", func(u *Usage) int64 { return u.BackendFrees })
	countRow("pages mapped", func(u *Usage) int64 { return u.PagesMapped })
	countRow("pages unmapped", func(u *Usage) int64 { return u.PagesUnmapped })
	countRow("device syncs", func(u *Usage) int64 { return u.Syncs })
	countRow("OOMs", func(u *Usage) int64 { return u.OOMs })
	countRow("cache flushes", func(u *Usage) int64 { return u.CacheFlushes })
	rule("-")

	roleRow := func(name, cur, peak, req, reqPeak, live, allocs, placed string) {
		line := fmt.Sprintf("%-*s%*s%*s%*s%*s%*s%*s  %s", head-8, name,
			col-3, cur, col-3, peak, col-3, req, col-3, reqPeak, 8, live, 9, allocs, placed)
		b.WriteString(strings.TrimRight(line, " "))
		b.WriteByte('\n')
	}
	roleRow("role", "allocated", "peak", "requested", "peak", "live", "allocs", "placement")
	var sum RoleUsage
	for r, u := range s.Roles {
		roleRow(Role(r).String(), FormatBytes(u.Allocated.Current), FormatBytes(u.Allocated.Peak),
			FormatBytes(u.Requested.Current), FormatBytes(u.Requested.Peak),
			strconv.FormatInt(u.Allocs-u.Frees, 10), strconv.FormatInt(u.Allocs, 10),
			policy.Placements[r].String())
		sum.Allocs += u.Allocs
		sum.Frees += u.Frees
		sum.Allocated.Current += u.Allocated.Current
		sum.Requested.Current += u.Requested.Current
	}
	t := s.Total
	// A migration allocates and frees in the tiers, not in the roles: the
	// live counts agree all the same.
	live, roleLive := t.Allocs-t.Frees, sum.Allocs-sum.Frees
	if live != roleLive || t.Allocated.Current != sum.Allocated.Current {
		roleRow("no role", FormatBytes(t.Allocated.Current-sum.Allocated.Current), "-",
			FormatBytes(t.Requested.Current-sum.Requested.Current), "-",
			strconv.FormatInt(live-roleLive, 10), "-", "the tiers' pools, directly")
	}
	roleRow("total", FormatBytes(t.Allocated.Current), FormatBytes(t.Allocated.Peak),
		FormatBytes(t.Requested.Current), FormatBytes(t.Requested.Peak),
		strconv.FormatInt(live, 10), strconv.FormatInt(sum.Allocs, 10), "")
	if s.Spills.Count > 0 {
		rule("-")
		fmt.Fprintf(&b, "spilled to %s: %d allocations, %s (the device tier was full; Policy.Spill)\n",
			spilledTo, s.Spills.Count, FormatBytes(s.Spills.Bytes))
	}
	rule("=")
	return b.String()
}
