package memory

// RecordHistory starts recording the pool's allocation history, as
// Manager.RecordHistory does. A pool of a Manager is recorded through
// the manager: there it does nothing. Its events have RoleOther.
func (p *Pool) RecordHistory(capacity int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sinks.parent != nil {
		return
	}
	var seq uint64
	if p.hist != nil {
		seq = p.hist.n
	}
	r := newRecorder(capacity, seq)
	r.past.before = startState([]*Pool{p})
	p.hist, p.recorded = r, r
}

// History returns a copy of the pool's recorded history, nil when it
// records none. For a pool of a Manager it is, as Manager.History, the
// last recording after StopHistory, and the pool's part of the
// manager's history: the events of the pool's tier and the manager's
// marks (so that memviz.Window finds the steps), Before and Backends of
// that tier only, and Dropped counting the events of the tier and the
// marks that left the ring. Seqs stay the manager's: they skip the
// events of other tiers. Manager.History has every tier's.
func (p *Pool) History() *History {
	p.mu.Lock()
	r := p.recorded
	p.mu.Unlock()
	if r == nil {
		return nil
	}
	var names [NumTiers]string
	names[p.tier] = p.name
	events, past := r.copyRing(p.mu)
	if p.sinks.parent != nil {
		events, past = tierPart(p.tier, events, past)
	}
	return r.history(names, events, past)
}

// tierPart is the part of a copy of a manager's history that concerns
// tier t: its events and the marks, and its past state.
func tierPart(t Tier, events []Event, past ringState) ([]Event, ringState) {
	mine := func(e *Event) bool { return e.Kind == EventMark || e.Tier == t }
	n := 0
	for i := range events {
		if mine(&events[i]) {
			n++
		}
	}
	part := make([]Event, 0, n) // not the whole ring's array, kept alive
	for i := range events {
		if mine(&events[i]) {
			part = append(part, events[i])
		}
	}
	var own ringState
	own.before[t] = past.before[t]
	own.dropped[t], own.dropped[NumTiers] = past.dropped[t], past.dropped[NumTiers]
	return part, own
}
