package cpukern

import "math"

// Convert sets dst[i] = D(src[i]) between float32, float64 and int32
// (and types defined on them). Float to float rounds to nearest even.
// Float to int32 truncates toward zero like a C cast and PyTorch, and,
// where Go leaves the result unspecified, saturates: NaN gives 0,
// values beyond the int32 range give MinInt32 or MaxInt32. It panics when
// lengths differ.
func Convert[D, S Number](dst []D, src []S) {
	mustEq("Convert", "src", len(src), len(dst))
	if serial(len(dst), grainMem) {
		convertRange(dst, src)
		return
	}
	ParallelFor(len(dst), grainMem, func(lo, hi int) { convertRange(dst[lo:hi], src[lo:hi]) })
}

func convertRange[D, S Number](dst []D, src []S) {
	if same, ok := any(dst).([]S); ok {
		copy(same, src)
		return
	}
	src = src[:len(dst)]
	if isInt[D]() && !isInt[S]() {
		for i, v := range src {
			f := float64(v)
			switch {
			case f != f:
				dst[i] = 0
			case f >= math.MaxInt32:
				dst[i] = math.MaxInt32
			case f <= math.MinInt32:
				dst[i] = math.MinInt32
			default:
				dst[i] = D(f)
			}
		}
		return
	}
	for i, v := range src {
		dst[i] = D(v)
	}
}
