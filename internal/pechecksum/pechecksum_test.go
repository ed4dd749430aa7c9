package pechecksum

import (
	"math/rand/v2"
	"testing"
)

// Add over an image in parts gives Of's checksum, whatever the parts
// (each starting at an even offset) and whatever the bytes: all ones,
// all zeros and random, of even and odd lengths.
func TestAddInParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 2, 7, 8, 9, 64, 1001, 4096, 100003} {
		for _, fill := range []string{"zero", "ones", "random"} {
			b := make([]byte, size)
			for i := range b {
				switch fill {
				case "ones":
					b[i] = 0xff
				case "random":
					b[i] = byte(rng.Uint32())
				}
			}
			field := -8 // no checksum field inside: its bytes are zero in Add's input
			want := Of(b, field)
			for range 5 {
				var sum uint32
				for rest := b; len(rest) > 0; {
					n := min(len(rest), 2*rng.IntN(len(rest)/2+2))
					if n == 0 {
						n = len(rest)
					}
					sum = Add(sum, rest[:n])
					rest = rest[n:]
				}
				if got := Finish(sum, int64(size)); got != want {
					t.Fatalf("%d %s bytes: Add in parts gives %#x, Of %#x", size, fill, got, want)
				}
			}
		}
	}
}
