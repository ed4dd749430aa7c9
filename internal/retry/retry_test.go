package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

var errFlaky = errors.New("flaky")

func TestDo(t *testing.T) {
	always := func(error) bool { return true }
	p := Policy{Retries: 3, Wait: time.Millisecond, MaxWait: 2 * time.Millisecond}
	// Succeeds on the third try; the two failures are heard of.
	n, heard := 0, 0
	tries, err := p.Do(context.Background(), func() (time.Duration, error) {
		if n++; n < 3 {
			return 0, errFlaky
		}
		return 0, nil
	}, always, func(error) { heard++ })
	if err != nil || tries != 3 || heard != 2 {
		t.Errorf("tries %d, heard %d, err %v", tries, heard, err)
	}
	// Retries run out: the last error, 1+3 tries.
	tries, err = p.Do(context.Background(), func() (time.Duration, error) { return 0, errFlaky }, always, nil)
	if !errors.Is(err, errFlaky) || tries != 4 {
		t.Errorf("tries %d, err %v", tries, err)
	}
	// A final error is not retried.
	tries, err = p.Do(context.Background(), func() (time.Duration, error) { return 0, errFlaky }, func(error) bool { return false }, nil)
	if tries != 1 || !errors.Is(err, errFlaky) {
		t.Errorf("tries %d, err %v", tries, err)
	}
	// A context that ends during a wait stops it, keeping the failure.
	ctx, cancel := context.WithCancel(context.Background())
	slow := Policy{Retries: 5, Wait: time.Hour}
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	_, err = slow.Do(ctx, func() (time.Duration, error) { return 0, errFlaky }, always, nil)
	var st *Stopped
	if !errors.Is(err, context.Canceled) || !errors.As(err, &st) || st.Last != errFlaky {
		t.Errorf("err %v", err)
	}
	// A try asks for a longer wait; the cap holds it.
	start := time.Now()
	n = 0
	Policy{Retries: 1, Wait: time.Millisecond, MaxWait: 30 * time.Millisecond}.Do(context.Background(), func() (time.Duration, error) {
		if n++; n == 1 {
			return time.Hour, errFlaky
		}
		return 0, nil
	}, always, nil)
	if d := time.Since(start); d < 30*time.Millisecond || d > 10*time.Second {
		t.Errorf("waited %v, want the cap", d)
	}
}
