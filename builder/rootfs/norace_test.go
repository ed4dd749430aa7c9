//go:build !race

package rootfs

const raceEnabled = false
