//go:build race

package testutil

// raceDetector says whether the test binary was built with -race.
const raceDetector = true
