// Package flock takes advisory locks (flock(2)) on files and directories,
// so that processes sharing a layout or a cache wait for each other instead
// of interleaving their writes. Locks go with the open file: a killed
// process releases them.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Lock is a held lock.
type Lock struct{ f *os.File }

// TryAcquire takes the lock on path (a file or directory) without waiting;
// ok is false when another process holds a conflicting lock.
func TryAcquire(path string, exclusive bool) (l *Lock, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("locking %s: %w", path, err)
	}
	return &Lock{f: f}, true, nil
}

// Acquire takes the lock on path, waiting while another process holds a
// conflicting one; waiting (when not nil) is called once if it has to
// wait. The wait ends with ctx.
func Acquire(ctx context.Context, path string, exclusive bool, waiting func()) (*Lock, error) {
	delay := 5 * time.Millisecond
	for told := false; ; {
		l, ok, err := TryAcquire(path, exclusive)
		if err != nil || ok {
			return l, err
		}
		if !told && waiting != nil {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the lock on %s: %w", path, context.Cause(ctx))
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// Stat describes the locked file.
func (l *Lock) Stat() (os.FileInfo, error) { return l.f.Stat() }

// Release lets the lock go.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
