package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/term"

	"github.com/nodeforge/builder/pkgbase/cache"
)

// stderrIsTerminal decides between a live progress display and plain lines.
func stderrIsTerminal() bool { return term.IsTerminal(int(os.Stderr.Fd())) }

// downloadProgress renders cache events: a single updating status line on
// a terminal, and nothing but retries and failures otherwise (logs stay
// quiet and diffable).
func downloadProgress(w io.Writer, quiet bool) func(cache.Event) {
	tty := stderrIsTerminal() && !quiet
	done, cached := 0, 0
	var bytes int64
	return func(ev cache.Event) {
		switch ev.Kind {
		case "done":
			done++
			bytes += ev.Total
		case "cached":
			cached++
		case "damaged":
			fmt.Fprintf(w, "\r%s: %v\n", ev.Name, ev.Err)
			return
		case "retry":
			fmt.Fprintf(w, "\rretrying %s: %v\n", ev.Name, ev.Err)
			return
		case "failed":
			fmt.Fprintf(w, "\rfailed %s: %v\n", ev.Name, ev.Err)
			return
		}
		if tty {
			cur := ""
			if ev.Kind == "progress" && ev.Total > 0 {
				cur = fmt.Sprintf(" %s %d%%", ev.Name, ev.Bytes*100/ev.Total)
			}
			fmt.Fprintf(w, "\r\033[Kpackages: %d downloaded (%s), %d cached%s", done, humanBytes(bytes), cached, cur)
		}
	}
}

// endProgress finishes the status line.
func endProgress(w io.Writer) {
	if stderrIsTerminal() {
		fmt.Fprint(w, "\r\033[K")
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
