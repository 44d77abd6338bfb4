// Package addition is the built-in task of train-gpt, shared with the
// commands that evaluate its models (examples/generate): n-digit addition
// as text, "123+456=" answered "9750\n" (the sum zero-padded to n+1
// digits and written least-significant digit first, which a left-to-right
// model can compute carry by carry), with one problem in ten held out of
// training by a hash of its operands.
package addition

import "fmt"

// HeldOut reports whether the problem x+y is held out of training: one in
// ten, by a mixing hash of (x, y), the same in every command.
func HeldOut(x, y int) bool {
	h := uint64(x)*0x9E3779B97F4A7C15 ^ uint64(y)*0xC2B2AE3D27D4EB4F
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return h%10 == 0
}

// Problem is x+y as text for operands of digits digits: the prompt
// "x+y=" (operands zero-padded) and the answer, the sum zero-padded to
// digits+1 digits, reversed, and a newline.
func Problem(digits, x, y int) (prompt, answer string) {
	r := []byte(fmt.Sprintf("%0*d", digits+1, x+y))
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return fmt.Sprintf("%0*d+%0*d=", digits, x, digits, y), string(r) + "\n"
}

// Tokens is a problem's length as a model's input: the prompt and the
// answer but its final newline, which is only a target.
func Tokens(digits int) int { return 3*digits + 3 }
