package testutil

import (
	"context"
	"testing"
	"time"
)

// WaitBuildsAtEnd makes the test's end wait for a factory's builds in
// flight (wait: its WaitBuilds): a build's cache entry is written after
// its response, and the test's temporary directories must go after that
// write. Registered after them, it runs before their removal.
func WaitBuildsAtEnd(t testing.TB, wait func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := wait(ctx); err != nil {
			t.Errorf("builds still in flight at the test's end: %v", err)
		}
	})
}
