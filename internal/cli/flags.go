package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// ParseFlags parses args with fs (made with flag.ContinueOnError) the way
// the programs answer their command lines: a bad or unknown flag is one
// line naming it with a hint, "NAME -h lists the flags", returned as a
// UsageError (status 2) with nothing printed, so that the program prints
// the error once (the flag package printed it, then the whole usage, and
// the program the error again); -h, -help or --help prints the whole
// usage (fs.Usage when the program set one, else the flag package's) to
// fs.Output() and returns flag.ErrHelp (status 0). Positional arguments
// are left in fs.Args() for the program to check (UsageHint words their
// error alike).
func ParseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		if fs.Usage != nil {
			fs.Usage()
		} else {
			fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return flag.ErrHelp
	}
	return UsageHint(fs, err)
}

// UsageHint is err as a UsageError (status 2) with ParseFlags's hint
// appended: "ERR (NAME -h lists the flags)".
func UsageHint(fs *flag.FlagSet, err error) error {
	return UsageError{fmt.Errorf("%w (%s -h lists the flags)", err, fs.Name())}
}
