package memory

import "strconv"

// FormatBytes writes a byte count the way PyTorch's memory summary does:
// "0 B", "512 B", "1.50 KiB", "20.00 MiB", "1.00 GiB", "2.00 TiB". Negative
// counts keep their sign.
func FormatBytes(n int64) string {
	if n < 0 {
		if n == -n { // math.MinInt64
			return strconv.FormatInt(n, 10) + " B"
		}
		return "-" + FormatBytes(-n)
	}
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	// A value that two decimals round up to 1024 (1023.995 KiB and more)
	// is written in the next unit: "1.00 MiB", not "1024.00 KiB".
	const roundsTo1024 = 1023.995
	v, i := float64(n)/1024, 0
	for v >= roundsTo1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + " " + units[i:i+1] + "iB"
}
