package cpukern

import "errors"

// ErrIndex is wrapped by the errors of kernels that index with data: an
// embedding id or a class target outside its range. Test with errors.Is.
var ErrIndex = errors.New("cpukern: index out of range")
