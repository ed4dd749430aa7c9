package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/nodeforge/builder/internal/progress"
	"github.com/nodeforge/builder/pkgbase/cache"
)

// stderrIsTerminal decides between a live progress display and plain lines.
func stderrIsTerminal() bool { return term.IsTerminal(int(os.Stderr.Fd())) }

// progressView shows the long steps of a command. On a terminal each
// stage is one live line (mpb) with its count, bytes and rate, and the
// command's log lines print above them; otherwise each stage prints one
// plain line when it ends (logs stay quiet and diffable); with --quiet,
// nothing.
type progressView struct {
	w          io.Writer
	quiet, tty bool
	p          *mpb.Progress

	mu        sync.Mutex
	figuresMu sync.Mutex // a stage's figures, read by the display's goroutine
	stages    map[string]*stageView
	order     []string
	// downloads, as the cache reports them, counted under eventMu, which
	// also orders the updates they make: an older count never overwrites
	// a newer one
	eventMu         sync.Mutex
	fetched, cached int64
	fetchedBytes    int64
}

type stageView struct {
	u     progress.Update
	start time.Time
	bar   *mpb.Bar
	done  bool
}

// stageDownloads is the stage of the package downloads.
const stageDownloads = "downloading packages"

func newProgressView(w io.Writer, quiet bool) *progressView {
	tty := false
	if !quiet && stderrIsTerminal() {
		// A terminal of no width (a pty nobody sized) shows no live line.
		cols, _, err := term.GetSize(int(os.Stderr.Fd()))
		tty = err == nil && cols > 0
	}
	return &progressView{w: w, quiet: quiet, tty: tty, stages: map[string]*stageView{}}
}

// writer is where the command's log lines go: above the live lines.
func (v *progressView) writer() io.Writer {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.p != nil {
		return v.p
	}
	return v.w
}

// logf prints a log line unless --quiet.
func (v *progressView) logf(format string, a ...any) {
	if !v.quiet {
		fmt.Fprintf(v.writer(), format+"\n", a...)
	}
}

// update shows a stage's progress.
func (v *progressView) update(u progress.Update) {
	if v.quiet {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if u.Stage != stageDownloads {
		v.finishLocked(stageDownloads) // the downloads come first
	}
	s := v.stages[u.Stage]
	if s == nil {
		s = &stageView{start: time.Now()}
		v.stages[u.Stage] = s
		v.order = append(v.order, u.Stage)
		if v.tty {
			if v.p == nil {
				// Live lines while a stage runs; log lines print above them.
				v.p = mpb.New(mpb.WithOutput(v.w), mpb.WithWidth(28))
			}
			// Made with no total, a bar ends only when told to (mpb ends a
			// bar that reaches the total it was made with, and drops what
			// is written once every bar has ended).
			s.bar = v.p.New(0, mpb.BarStyle().Lbound("[").Rbound("]"),
				mpb.PrependDecorators(decor.Name(u.Stage+" ", decor.WCSyncSpaceR)),
				mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return v.figures(s) })))
		}
	}
	if s.done {
		return
	}
	v.figuresMu.Lock()
	s.u = u
	v.figuresMu.Unlock()
	if s.bar != nil {
		s.bar.SetTotal(max(u.Total, u.Done, 1), false)
		s.bar.SetCurrent(u.Done)
	}
	if u.Finished {
		v.finishLocked(u.Stage)
	}
}

// figures are a stage's count, bytes and rate: "12/60 packages, 118.2 MiB, 24.1 MiB/s".
func (v *progressView) figures(s *stageView) string {
	v.figuresMu.Lock()
	u, start := s.u, s.start
	v.figuresMu.Unlock()
	text := fmt.Sprintf("%d", u.Done)
	if u.Total > 0 {
		text += fmt.Sprintf("/%d", u.Total)
	}
	text += " " + u.Unit
	if u.Bytes > 0 {
		text += ", " + humanBytes(u.Bytes)
		if secs := time.Since(start).Seconds(); secs > 0.05 {
			text += fmt.Sprintf(", %s/s", humanBytes(int64(float64(u.Bytes)/secs)))
		}
	}
	return text
}

// finishLocked ends a stage: its bar completes; without a terminal its
// one line is printed.
func (v *progressView) finishLocked(stage string) {
	s := v.stages[stage]
	if s == nil || s.done {
		return
	}
	s.done = true
	if s.bar != nil {
		s.bar.SetCurrent(s.u.Done)
		s.bar.SetTotal(s.u.Done, true)
		for _, o := range v.stages {
			if o.bar != nil && !o.done {
				return
			}
		}
		// No live line left: the display ends, so that log lines print
		// straight again (a line written to it now would be lost).
		v.p.Wait()
		v.p = nil
		return
	}
	fmt.Fprintf(v.w, "%s: %s in %.1f s\n", stage, v.figures(s), time.Since(s.start).Seconds())
}

// finish ends a stage (the downloads, once the lock is there).
func (v *progressView) finish(stage string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.finishLocked(stage)
}

// cacheEvent shows the package downloads; retries and failures print as
// lines.
func (v *progressView) cacheEvent(ev cache.Event) {
	switch ev.Kind {
	case "damaged":
		fmt.Fprintf(v.writer(), "%s: %v\n", ev.Name, ev.Err)
		return
	case "retry":
		fmt.Fprintf(v.writer(), "retrying %s: %v\n", ev.Name, ev.Err)
		return
	case "failed":
		fmt.Fprintf(v.writer(), "failed %s: %v\n", ev.Name, ev.Err)
		return
	}
	v.eventMu.Lock()
	defer v.eventMu.Unlock()
	switch ev.Kind {
	case "done":
		v.fetched++
		v.fetchedBytes += ev.Total
	case "cached":
		v.cached++
	default:
		return
	}
	v.update(progress.Update{Stage: stageDownloads, Unit: fmt.Sprintf("packages (%d already cached)", v.cached), Done: v.fetched + v.cached, Bytes: v.fetchedBytes})
}

// end finishes every stage and waits for the display to settle.
func (v *progressView) end() {
	v.mu.Lock()
	for _, st := range v.order {
		v.finishLocked(st)
	}
	v.mu.Unlock()
	v.mu.Lock()
	p := v.p
	v.p = nil
	v.mu.Unlock()
	if p != nil {
		p.Wait()
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// defaultCacheDir is $NODEFORGE_CACHE, else the user cache dir.
func defaultCacheDir() string {
	if d := os.Getenv("NODEFORGE_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "nodeforge")
	}
	return filepath.Join(os.TempDir(), "nodeforge-cache")
}
