// Package retry is the builder's one policy for trying a failed exchange
// again: a bounded number of retries, waits that start short and double up
// to a cap (longer when the other side asks), and a context that stops the
// waiting. What counts as worth another try is the caller's to say.
package retry

import (
	"context"
	"time"
)

// Policy is how often and how patiently to try again.
type Policy struct {
	Retries int           // tries after the first (0: none)
	Wait    time.Duration // before the first retry; doubles after each
	MaxWait time.Duration // the longest wait (0: no cap)
}

// Stopped is the error of a Do whose context ended while it waited to try
// again: it is the context's error (errors.Is(err, context.Canceled)
// holds), and it keeps the failure that was to be retried.
type Stopped struct {
	Cause error // ctx.Err()
	Last  error // the last try's error
}

func (e *Stopped) Error() string { return e.Cause.Error() }
func (e *Stopped) Unwrap() error { return e.Cause }

// Do calls try until it succeeds, fails with an error transient does not
// accept, or has been retried p.Retries times; it returns how many tries
// ran and the last error (nil on success). A try may ask for a longer wait
// than the policy's (a server's Retry-After) by returning it. notify, when
// not nil, hears of each failure about to be retried.
func (p Policy) Do(ctx context.Context, try func() (wait time.Duration, err error), transient func(error) bool, notify func(error)) (tries int, err error) {
	wait := p.Wait
	for {
		asked, err := try()
		tries++
		if err == nil || tries > p.Retries || !transient(err) {
			return tries, err
		}
		if notify != nil {
			notify(err)
		}
		d := max(wait, asked)
		if p.MaxWait > 0 {
			d = min(d, max(p.MaxWait, wait))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return tries, &Stopped{Cause: ctx.Err(), Last: err}
		case <-t.C:
		}
		wait *= 2
		if p.MaxWait > 0 && wait > p.MaxWait {
			wait = p.MaxWait
		}
	}
}
