//go:build race

package rootfs

// raceEnabled: the race detector's shadow memory would make a 4 GiB file
// in the tree cost several times that.
const raceEnabled = true
