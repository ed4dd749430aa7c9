// Package progress carries how far a long step is from the packages that
// do the work to the command that shows it: packages below cmd/ never
// print, they send updates.
package progress

// Update says how far a stage is.
type Update struct {
	Stage string // "lay x86_64", "push", "copy": one line of the display each
	Unit  string // what Done counts: "packages", "blobs", "images"
	Done  int64
	Total int64 // 0: unknown
	Bytes int64 // bytes handled so far
	// Finished closes the stage (Done may then fall short of Total when
	// the step stopped early).
	Finished bool
}

// Func hears updates. It may be called from several goroutines: an
// implementation serialises them.
type Func func(Update)

// Send calls f when it is set.
func (f Func) Send(u Update) {
	if f != nil {
		f(u)
	}
}
