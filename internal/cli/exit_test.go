package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExitError: an *ExitError is found through wrapping (errors.As) and
// gives its own status in ExitCode, before a UsageError's 2; its message
// is Msg alone. generate and train-gpt each had an exitError of their own,
// and mapped it to a status in their own main.
func TestExitError(t *testing.T) {
	ex := &ExitError{Code: 130, Msg: "interrupt after step 3: saved"}
	require.EqualError(t, ex, "interrupt after step 3: saved")
	for _, err := range []error{
		ex,
		fmt.Errorf("strategy hybrid: %w", ex),
		fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", ex)),
		errors.Join(errors.New("other"), ex),
		UsageError{Err: ex},
	} {
		var got *ExitError
		require.True(t, errors.As(err, &got), "%v", err)
		require.Same(t, ex, got)
		require.Equal(t, 130, ExitCode(err), "%v", err)
	}
	require.Equal(t, 143, ExitCode(&ExitError{Code: 143}))
	require.Equal(t, 2, ExitCode(fmt.Errorf("late: %w", &ExitError{Code: 2, Msg: "-resume x: bad"})))
	// The other statuses stay as they were.
	require.Equal(t, 0, ExitCode(nil))
	require.Equal(t, 0, ExitCode(fmt.Errorf("parsing: %w", flag.ErrHelp)))
	require.Equal(t, 2, ExitCode(Usagef("-n %d: want more", 0)))
	require.Equal(t, 2, ExitCode(fmt.Errorf("wrapped: %w", Usagef("bad"))))
	require.Equal(t, 1, ExitCode(os.ErrNotExist))
}

// TestInterruptible: a signal during Interruptible's write (here, sent by
// the write itself) cancels its ctx and ends the run with 128 + the
// signal (an *ExitError, its status ExitCode's); after it, signals are
// the process's again, and without one the write's own result is
// returned.
func TestInterruptible(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		err := Interruptible("writing x", func(ctx context.Context) error {
			require.NoError(t, syscall.Kill(os.Getpid(), sig))
			<-ctx.Done()
			return ctx.Err()
		})
		var ex *ExitError
		require.True(t, errors.As(err, &ex), "%v", err)
		require.Equal(t, 128+int(sig), ex.Code)
		require.Equal(t, 128+int(sig), ExitCode(err))
		require.Equal(t, fmt.Sprintf("%v while writing x: abandoned it (the file there before, if any, is unchanged)", sig), ex.Msg)
	}
	require.NoError(t, Interruptible("writing y", func(context.Context) error { return nil }))
	want := errors.New("disk full")
	require.Equal(t, want, Interruptible("writing z", func(context.Context) error { return want }))
}

// TestInterruptiblePanicEndsItsGoroutine: a write that panics, the panic
// recovered up the stack, leaves no goroutine behind (the signal watcher
// waited for ever before).
func TestInterruptiblePanicEndsItsGoroutine(t *testing.T) {
	// The first signal.Notify starts os/signal's own goroutine for good.
	require.NoError(t, Interruptible("writing", func(context.Context) error { return nil }))
	before := runtime.NumGoroutine()
	for range 20 {
		func() {
			defer func() { require.Equal(t, "boom", recover()) }()
			_ = Interruptible("writing", func(context.Context) error { panic("boom") })
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left by panicking writes")
}
