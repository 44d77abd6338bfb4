package dl

import (
	"os"
	"path/filepath"
	"strings"
)

// Spec says where to look for one library and how to explain failure.
type Spec struct {
	Pkg   string   // the binding's package, the error's prefix: "cuda"
	What  string   // "the CUDA driver library (libcuda)"
	Env   string   // override variable: when set, only its file is tried
	Names []string // sonames, resolved by the dynamic loader's own search
	Dirs  []string // folders tried after the names, where the file exists
	Fix   string   // how to fix a failure, for the error message
	Kind  error    // sentinel the failure wraps
}

// Attempt is one file the loader tried and why it failed.
type Attempt struct{ Path, Err string }

// LoadError explains a failed discovery: every candidate tried, why each
// failed, and what to do about it. It wraps the Spec's Kind.
type LoadError struct {
	Spec  Spec
	Env   string // value of Spec.Env when set
	Tried []Attempt
}

func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString(e.Spec.Pkg + ": cannot load " + e.Spec.What)
	if e.Env != "" {
		b.WriteString(" from " + e.Spec.Env + "=" + e.Env)
	}
	b.WriteString(": tried ")
	for i, a := range e.Tried {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.Path + " (" + a.Err + ")")
	}
	if e.Env != "" {
		b.WriteString(": point " + e.Spec.Env + " at the library file, or unset it to search the default locations")
	} else {
		b.WriteString(": " + e.Spec.Fix)
	}
	return b.String()
}

func (e *LoadError) Unwrap() error { return e.Spec.Kind }

// Find loads the library spec describes with open (the binding's Open,
// whose error on an unsupported platform it keeps) and returns its handle
// and the path that worked. getenv is os.Getenv outside tests.
func Find(spec Spec, getenv func(string) string, open func(string) (uintptr, error)) (uintptr, string, error) {
	if !Supported {
		_, err := open("")
		return 0, "", &LoadError{Spec: spec, Tried: []Attempt{{spec.Names[0], err.Error()}}}
	}
	if p := getenv(spec.Env); p != "" {
		h, err := open(p)
		if err != nil {
			return 0, "", &LoadError{Spec: spec, Env: p, Tried: []Attempt{{p, Message(err)}}}
		}
		return h, p, nil
	}
	le := &LoadError{Spec: spec}
	for _, name := range spec.Names {
		h, err := open(name)
		if err == nil {
			return h, name, nil
		}
		le.Tried = append(le.Tried, Attempt{name, Message(err)})
	}
	for _, dir := range spec.Dirs {
		for _, name := range spec.Names {
			p := filepath.Join(dir, name)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			h, err := open(p)
			if err == nil {
				return h, p, nil
			}
			le.Tried = append(le.Tried, Attempt{p, Message(err)})
		}
	}
	return 0, "", le
}

// Message trims the loader's message to what matters.
func Message(err error) string {
	return strings.TrimSpace(strings.TrimPrefix(err.Error(), "dlopen: "))
}
