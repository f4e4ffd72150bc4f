// Package logwriter joins the output of several child processes into one log:
// each line gets its process's prefix, writes from different processes never
// interleave mid-line, and the last lines of a process are kept so an error
// about it can quote them. The control plane launcher, the local Functions
// host and the local environment all need exactly this.
package logwriter

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// maxPartial bounds a line that never ends: a process that prints no
// newline must not grow memory forever.
const maxPartial = 64 << 10

// Synced serializes writes to one io.Writer.
type Synced struct {
	mu sync.Mutex
	w  io.Writer
}

// NewSynced returns a Synced writing to w (nil: discard).
func NewSynced(w io.Writer) *Synced {
	if w == nil {
		w = io.Discard
	}
	return &Synced{w: w}
}

func (s *Synced) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// Lines splits a process's output into lines and writes each, prefixed, to
// out in a single Write; it keeps the last TailLines lines.
type Lines struct {
	prefix string
	out    io.Writer
	keep   int

	mu      sync.Mutex
	partial []byte
	lines   []string // ring of the last keep lines
	next    int
	full    bool
}

// NewLines returns a Lines writing to out (nil: nowhere) and keeping the
// last keep lines for Tail.
func NewLines(out io.Writer, prefix string, keep int) *Lines {
	return &Lines{prefix: prefix, out: out, keep: keep}
}

func (w *Lines) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		newline := bytes.IndexByte(w.partial, '\n')
		if newline < 0 {
			break
		}
		w.line(string(w.partial[:newline]))
		w.partial = w.partial[newline+1:]
	}
	if len(w.partial) > maxPartial {
		w.line(string(w.partial))
		w.partial = nil
	}
	return len(b), nil
}

// Flush writes a last line that has no newline yet.
func (w *Lines) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.line(string(w.partial))
		w.partial = nil
	}
}

// line records one line; callers hold w.mu. Errors writing to the log are
// ignored: losing log output must never kill the process it comes from.
func (w *Lines) line(s string) {
	if w.keep > 0 {
		if w.lines == nil {
			w.lines = make([]string, w.keep)
		}
		w.lines[w.next] = s
		w.next = (w.next + 1) % w.keep
		if w.next == 0 {
			w.full = true
		}
	}
	if w.out != nil {
		_, _ = w.out.Write([]byte(w.prefix + s + "\n"))
	}
}

// Tail returns the kept lines, oldest first, indented for an error message.
func (w *Lines) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.next == 0 && !w.full {
		return "  (no output)"
	}
	var ordered []string
	if w.full {
		ordered = append(ordered, w.lines[w.next:]...)
	}
	ordered = append(ordered, w.lines[:w.next]...)
	return "  " + strings.Join(ordered, "\n  ")
}
