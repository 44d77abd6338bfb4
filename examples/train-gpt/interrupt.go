package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-ml/strata/internal/cli"
)

// interrupts turns SIGINT, SIGTERM and SIGHUP (a closed terminal or SSH
// session) into a request to stop: training finishes the step it is in,
// saves the resumable training state and exits with 130, 143 or 129. A second signal cancels ctx, which aborts a save
// in progress (its temporary file is removed; the previous state file
// stays), and quits at once when nothing is being saved; during the
// final weights' save (finishing) it takes a third. A repeat that
// arrives within repeatWindow of the first is the same request, ignored:
// coreutils' timeout -s INT signals the process and then its process
// group, microseconds apart, and a shell's kill of the group may reach
// it twice.
type interrupts struct {
	ch      chan os.Signal
	sig     atomic.Int32              // the first signal, 0 before any
	firstAt atomic.Pointer[time.Time] // when it arrived
	saving  atomic.Bool
	ctx     context.Context
	cancel  context.CancelFunc
	note    atomic.Pointer[string] // what the first signal's message says will happen (setNote)
	// stopWriting (tests): act as if the signal arrived twice during this
	// write (write's what); "": never.
	stopWriting string
	// quit runs before a second signal ends the process (the output locks' files).
	quit atomic.Pointer[func()]
	// finishing, while set, names a save that a second signal does not
	// abandon (the final weights': the run is complete, and abandoning
	// it would lose every step with no state saved): the signal says so,
	// the save goes on, and a third abandons it. held counts the signals
	// it held off.
	finishing atomic.Pointer[string]
	held      atomic.Int32
}

// watchInterrupts starts watching; stop ends it. note says what the first
// signal does ("finishing the step, then ..."); setNote changes it as the
// run goes.
func watchInterrupts(note string) *interrupts {
	in := &interrupts{ch: make(chan os.Signal, 2)}
	in.setNote(note)
	in.ctx, in.cancel = context.WithCancel(context.Background())
	signal.Notify(in.ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for s := range in.ch {
			in.trigger(s.(syscall.Signal))
		}
	}()
	return in
}

// setNote sets what the first signal's message says will happen.
func (in *interrupts) setNote(note string) { in.note.Store(&note) }

// write runs an atomic write (what names it, for messages: "writing the
// loss curves to X") as a save: a second signal cancels its ctx, which
// abandons it (the temporary file removed) instead of ending the process
// in the middle of it. A write that does not watch ctx is abandoned once
// it returns.
func (in *interrupts) write(what, hook string, f func(ctx context.Context) error) error {
	in.saving.Store(true)
	defer in.saving.Store(false)
	if hook != "" && in.stopWriting == hook {
		in.trigger(syscall.SIGINT)
		in.triggerAgain(syscall.SIGINT)
	}
	err := f(in.ctx)
	if err == nil && in.ctx.Err() != nil {
		err = in.ctx.Err()
	}
	if err != nil {
		return in.abandoned(err, what)
	}
	return nil
}

func (in *interrupts) stop() {
	signal.Stop(in.ch)
	close(in.ch)
	in.cancel()
}

// repeatWindow is how soon after the first signal a repeat is taken as
// the same request (ignored) rather than a second one that quits at once:
// timeout's two signals come microseconds apart, a person's second
// Ctrl-C well after half a second.
const repeatWindow = 500 * time.Millisecond

// trigger handles one signal (the tests call it directly).
func (in *interrupts) trigger(s syscall.Signal) { in.handle(s, false) }

// triggerAgain is a second signal however soon after the first (the
// tests' hooks: stopSaving, stopWriting).
func (in *interrupts) triggerAgain(s syscall.Signal) { in.handle(s, true) }

func (in *interrupts) handle(s syscall.Signal, again bool) {
	now := time.Now()
	if in.sig.CompareAndSwap(0, int32(s)) {
		in.firstAt.Store(&now)
		if f := in.finishing.Load(); f != nil { // a second signal lets it finish
			fmt.Fprintf(os.Stderr, "\ntrain-gpt: %v: %s (%s finishes even if you press it again; a third %v abandons it)\n", s, *in.note.Load(), *f, s)
			return
		}
		fmt.Fprintf(os.Stderr, "\ntrain-gpt: %v: %s (%v again to quit at once)\n", s, *in.note.Load(), s)
		return
	}
	// A nil firstAt: the first is being handled this moment.
	if first := in.firstAt.Load(); !again && (first == nil || now.Sub(*first) < repeatWindow) {
		return // the same request, sent twice (timeout -s INT: to the process and to its group)
	}
	if f := in.finishing.Load(); f != nil && in.held.Add(1) == 1 {
		fmt.Fprintf(os.Stderr, "\ntrain-gpt: %v again: %s first, then stopping: the run is complete, and quitting now would lose it (%v once more to abandon the save)\n", s, *f, s)
		return
	}
	in.cancel()
	if !in.saving.Load() {
		fmt.Fprintf(os.Stderr, "\ntrain-gpt: %v again: quitting without saving\n", s)
		if q := in.quit.Load(); q != nil {
			(*q)()
		}
		exitProcess(128 + int(in.sig.Load()))
	}
}

// exitProcess is os.Exit (tests: a failure).
var exitProcess = os.Exit

// received reports the first signal, if any.
func (in *interrupts) received() (syscall.Signal, bool) {
	s := syscall.Signal(in.sig.Load())
	return s, s != 0
}

// exit is the error that ends a run stopped by signal s, with msg: a
// *cli.ExitError of status 128 + s, as a shell reports a process the
// signal killed.
func (in *interrupts) exit(s syscall.Signal, msg string) error {
	return &cli.ExitError{Code: 128 + int(s), Msg: msg}
}

// abandoned is err, a failed write, unless a second signal cancelled the
// write (doing what): then the error that ends the run with 128 + the
// first signal, the write abandoned (its temporary file removed, the
// previous file kept).
func (in *interrupts) abandoned(err error, doing string) error {
	s, ok := in.received()
	if !ok || in.ctx.Err() == nil {
		return err
	}
	return in.exit(s, fmt.Sprintf("%v again while %s: quit without finishing it (the file there before, if any, is unchanged)", s, doing))
}
