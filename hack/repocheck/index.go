package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// trackedFile is one regular file of the git index: its mode, its size and
// the start of its content (Head bytes, or all of it for a Markdown document).
type trackedFile struct {
	Path string
	Mode string // "100644" or "100755"
	Size int64
	Head []byte
}

// headBytes is how much of a file the executable checks read.
const headBytes = 512

// Problem is one rule a tracked file breaks.
type Problem struct {
	Path string
	What string
}

func (p Problem) String() string { return p.Path + ": " + p.What }

// Check reads the index of the repository whose work tree root is dir and
// returns every rule broken, files first, then links, each in path order.
func Check(dir string) ([]Problem, error) {
	files, err := readIndex(dir)
	if err != nil {
		return nil, err
	}
	problems := checkFiles(files)
	problems = append(problems, checkReadme(files)...)
	return append(problems, checkLinks(files)...), nil
}

// GitError is a git command that failed, with what it wrote to stderr.
type GitError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *GitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *GitError) Unwrap() error { return e.Err }

// readIndex lists the index's regular files and reads each blob through one
// `git cat-file --batch`, keeping the head of each and all of a Markdown file.
func readIndex(dir string) ([]trackedFile, error) {
	out, err := git(dir, nil, "ls-files", "-s", "-z")
	if err != nil {
		return nil, err
	}
	var files []trackedFile
	var oids bytes.Buffer
	for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if rec == "" {
			continue
		}
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(rec, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 {
			return nil, fmt.Errorf("git ls-files -s: unexpected record %q", rec)
		}
		if fields[0] != "100644" && fields[0] != "100755" {
			continue // symlink (120000) or submodule (160000)
		}
		files = append(files, trackedFile{Path: path, Mode: fields[0]})
		oids.WriteString(fields[1] + "\n")
	}
	blobs, err := git(dir, &oids, "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	return files, readBlobs(bufio.NewReader(bytes.NewReader(blobs)), files)
}

// readBlobs fills in each file's size and head from cat-file's output:
// "<oid> blob <size>\n<content>\n" per object, in the order asked.
func readBlobs(r *bufio.Reader, files []trackedFile) error {
	for i := range files {
		header, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("git cat-file: header of %s: %w", files[i].Path, err)
		}
		fields := strings.Fields(header)
		if len(fields) != 3 || fields[1] != "blob" {
			return fmt.Errorf("git cat-file: %s: unexpected header %q", files[i].Path, header)
		}
		size, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return fmt.Errorf("git cat-file: %s: size %q: %w", files[i].Path, fields[2], err)
		}
		keep := min(size, headBytes)
		if isMarkdown(files[i].Path) {
			keep = size
		}
		files[i].Size = size
		files[i].Head = make([]byte, keep)
		if _, err := io.ReadFull(r, files[i].Head); err != nil {
			return fmt.Errorf("git cat-file: content of %s: %w", files[i].Path, err)
		}
		if _, err := io.CopyN(io.Discard, r, size-keep+1); err != nil { // the rest and the trailing newline
			return fmt.Errorf("git cat-file: content of %s: %w", files[i].Path, err)
		}
	}
	return nil
}

func git(dir string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) || stderr.Len() > 0 {
			return nil, &GitError{Args: args, Stderr: stderr.String(), Err: err}
		}
		return nil, &GitError{Args: args, Err: err}
	}
	return out, nil
}
