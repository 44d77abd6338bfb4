package autograd

// PadHeadAlways makes HeadPadding pad on every device until the returned
// function is called: the CPU tests run the padded head's path.
func PadHeadAlways() (undo func()) {
	headPadAlways = true
	return func() { headPadAlways = false }
}
