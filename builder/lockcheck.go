package builder

import (
	"errors"
	"fmt"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/internal/digest"
)

// ErrStaleLock is (wrapped) a lock made for another spec, or for the spec
// before it was edited: it is to be made again.
var ErrStaleLock = errors.New("lock it again: builder lock with the same --spec or --branch (builder release: --relock)")

// CheckLock is nil when the lock was made for the spec as it is now, and
// otherwise says how they differ, wrapping ErrStaleLock.
func CheckLock(s *specs.Spec, l *lock.Lock) error {
	if l.Spec.Name != s.Name || l.Spec.Version != s.Version {
		return fmt.Errorf("the lock is for %s %s, the spec is %s %s: %w", l.Spec.Name, l.Spec.Version, s.Name, s.Version, ErrStaleLock)
	}
	if want := digest.SHA256Hex(s.Raw); l.Spec.SHA256 != want {
		return fmt.Errorf("the spec changed since the lock was made (lock pins spec sha256 %s, spec is %s): %w", l.Spec.SHA256, want, ErrStaleLock)
	}
	return nil
}
