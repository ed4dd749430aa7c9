package testutil

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// Log is a log that goroutines (a server's, a service's builds) write
// while the test reads it.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Await says whether s is in the log within 10 seconds: a server logs a
// request once its handler returns, which may be after the client has
// read the whole response.
func (l *Log) Await(s string) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(l.String(), s) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
