package main

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// The loss history in the training state, so that the -loss-plot of a
// resumed run covers the whole run without -loss-log: the training loss
// of each step from keyLossFrom on (float32, little-endian, NaN for a
// step with none: one the fp16 scaler skipped) and the held-out loss of
// each evaluation (uint32 step, float32 loss), each in base64, about 5.4
// bytes of header a step. States saved before it was recorded have none:
// the plot of a run resumed from one covers the steps after the resume
// (plus those of -loss-log), and says so. A run past maxSavedLosses steps
// saves the last ones: the plot of a run resumed from its state starts
// there (or at -loss-log's first step), and says the state was trimmed.
// (A state holds exactly maxSavedLosses steps only when trimmed: from
// then on every save trims it again.)
const (
	keyLossFrom    = "train.loss_history_from"
	keyLossHistory = "train.loss_history"
	keyHeldOutHist = "train.held_out_history"
)

// maxSavedLosses is the most steps' losses a state holds (the last ones;
// about 5.6 MB of its header, a 20th of what safetensors takes). A
// variable for the tests, which lower it.
var maxSavedLosses = 1 << 20

// metadata is h's steps up to upTo as training-state metadata entries.
func (h *lossHistory) metadata(upTo int) map[string]string {
	from := max(h.first(), upTo-maxSavedLosses+1)
	if upTo < from {
		return map[string]string{}
	}
	train := make([]byte, 4*(upTo-from+1))
	for i := range upTo - from + 1 {
		binary.LittleEndian.PutUint32(train[4*i:], math.Float32bits(float32(math.NaN())))
	}
	for _, xy := range h.train {
		if s := int(xy.X); s >= from && s <= upTo {
			binary.LittleEndian.PutUint32(train[4*(s-from):], math.Float32bits(float32(xy.Y)))
		}
	}
	var held []byte
	for _, xy := range h.heldOut {
		if s := int(xy.X); s >= from && s <= upTo {
			held = binary.LittleEndian.AppendUint32(held, uint32(s))
			held = binary.LittleEndian.AppendUint32(held, math.Float32bits(float32(xy.Y)))
		}
	}
	enc := base64.StdEncoding.EncodeToString
	return map[string]string{keyLossFrom: strconv.Itoa(from), keyLossHistory: enc(train), keyHeldOutHist: enc(held)}
}

// first is the first step h covers.
func (h *lossHistory) first() int { return max(h.from, 1) }

// loadMetadata reads the loss history of a training state after step
// done into h; a state without one leaves h covering the steps after
// done. A malformed entry is an error naming its key.
func (h *lossHistory) loadMetadata(meta map[string]string, done int) error {
	h.from = done + 1
	if _, ok := meta[keyLossFrom]; !ok {
		h.gap = "the training state resumed holds no loss history, as states saved by an older train-gpt"
		return nil
	}
	from, err := strconv.Atoi(meta[keyLossFrom])
	if err != nil || from < 1 || from > done+1 {
		return fmt.Errorf("metadata %s = %q", keyLossFrom, meta[keyLossFrom])
	}
	train, err := base64.StdEncoding.DecodeString(meta[keyLossHistory])
	// Up to done, or done-1 in a state saved for a failed evaluation
	// (keyEvalDue): the resumed run logs that step again.
	if err != nil || len(train)%4 != 0 || from+len(train)/4-1 > done {
		return fmt.Errorf("metadata %s: not the training losses of steps %d to %d at most", keyLossHistory, from, done)
	}
	held, err := base64.StdEncoding.DecodeString(meta[keyHeldOutHist])
	if err != nil || len(held)%8 != 0 {
		return fmt.Errorf("metadata %s: not pairs of a step and a held-out loss", keyHeldOutHist)
	}
	var out lossHistory
	out.from = from
	switch {
	case from == 1:
	case len(train)/4 == maxSavedLosses:
		out.gap = fmt.Sprintf("the training state resumed holds the losses of its last %d steps only (a state keeps no more)", maxSavedLosses)
	default: // its run resumed from a state that held none
		out.gap = fmt.Sprintf("the training state resumed holds the losses from step %d on only", from)
	}
	heldAt := make(map[int]float64, len(held)/8)
	last := 0
	// metadata keeps the held-out losses of the steps it keeps the
	// training losses of: one past them is a corrupt state, refused
	// (not dropped: the plot would lack it without a word).
	lastTrain := from + len(train)/4 - 1
	for i := 0; i < len(held); i += 8 {
		s := int(binary.LittleEndian.Uint32(held[i:]))
		if s <= last || s < from || s > lastTrain {
			return fmt.Errorf("metadata %s: step %d out of order or outside %d to %d, the steps of %s", keyHeldOutHist, s, from, lastTrain, keyLossHistory)
		}
		heldAt[s], last = float64(math.Float32frombits(binary.LittleEndian.Uint32(held[i+4:]))), s
	}
	for i := range len(train) / 4 {
		s := from + i
		hl, ok := heldAt[s]
		if !ok {
			hl = math.NaN()
		}
		out.add(s, float64(math.Float32frombits(binary.LittleEndian.Uint32(train[4*i:]))), hl)
	}
	*h = out
	return nil
}
