package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Interruptible runs write, an atomic write of a file (or the probe of
// an output path, which creates and removes one; doing names it for the
// message: "saving the weights to X"), with SIGINT and SIGTERM cancelling
// its ctx: the write is abandoned, its temporary file removed and the
// file there before left as it was, and the run ends with 128 + the
// signal (an *ExitError). A signal that arrives as the write ends leaves
// what it wrote whole and still ends the run so. Without it the signal
// ends the process in the middle of the write and leaves the partial
// temporary file behind. Outside it a signal is the process's again (it
// ends the process at once, by default).
func Interruptible(doing string, write func(ctx context.Context) error) error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(ch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got os.Signal
	stop, done := make(chan struct{}), make(chan struct{})
	// A write that panics (a recovered panic, up the stack) still ends the
	// goroutine below: it waited on stop for ever.
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	defer halt()
	go func() {
		defer close(done)
		select {
		case got = <-ch:
			cancel()
		case <-stop:
		}
	}()
	err := write(ctx)
	// Stop delivery first: a signal that arrived as the write ended is
	// then in ch, taken below, not dropped with ch.
	signal.Stop(ch)
	halt()
	<-done
	if got == nil {
		select {
		case got = <-ch:
		default:
		}
	}
	s, ok := got.(syscall.Signal)
	switch {
	case !ok:
		return err
	case err == nil: // it arrived as the write ended: what it wrote is whole
		return &ExitError{Code: 128 + int(s), Msg: fmt.Sprintf("%v after %s: done, then stopped", s, doing)}
	}
	return &ExitError{Code: 128 + int(s), Msg: fmt.Sprintf("%v while %s: abandoned it (the file there before, if any, is unchanged)", s, doing)}
}
