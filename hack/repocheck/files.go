package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path"
	"strings"
)

// MaxFileSize is the largest file the repository tracks outside testdata/
// directories and the embedded catalog's data.
const MaxFileSize = 1 << 20

// largeFileDirs are the directories, besides any named testdata, whose files
// may exceed MaxFileSize: the VM catalog embedded into the handler and CLI.
var largeFileDirs = []string{"pkg/catalog/data/"}

// checkFiles applies the executable, script and size rules.
func checkFiles(files []trackedFile) []Problem {
	var problems []Problem
	for _, f := range files {
		if kind := executableKind(f.Head); kind != "" {
			problems = append(problems, Problem{f.Path, fmt.Sprintf(
				"is a compiled %s executable; build outputs belong in bin/ or dist/ (ignored): git rm --cached %s", kind, f.Path)})
		} else if f.Mode == "100755" && !bytes.HasPrefix(f.Head, []byte("#!")) {
			problems = append(problems, Problem{f.Path,
				"has the executable bit but is not a script (no #! line): git update-index --chmod=-x " + f.Path})
		}
		if f.Size > MaxFileSize && !mayBeLarge(f.Path) {
			problems = append(problems, Problem{f.Path, fmt.Sprintf(
				"is %d bytes, over the %d-byte limit; large fixtures go under a testdata/ directory, generated data is built, not committed", f.Size, MaxFileSize)})
		}
	}
	return problems
}

func mayBeLarge(p string) bool {
	for _, dir := range strings.Split(path.Dir(p), "/") {
		if dir == "testdata" {
			return true
		}
	}
	for _, dir := range largeFileDirs {
		if strings.HasPrefix(p, dir) {
			return true
		}
	}
	return false
}

// executableKind names the executable format head starts with, or "".
func executableKind(head []byte) string {
	magics := []struct {
		kind  string
		magic []byte
	}{
		{"ELF", []byte{0x7f, 'E', 'L', 'F'}},
		{"Mach-O", []byte{0xfe, 0xed, 0xfa, 0xce}},
		{"Mach-O", []byte{0xfe, 0xed, 0xfa, 0xcf}},
		{"Mach-O", []byte{0xce, 0xfa, 0xed, 0xfe}},
		{"Mach-O", []byte{0xcf, 0xfa, 0xed, 0xfe}},
		{"Mach-O universal", []byte{0xca, 0xfe, 0xba, 0xbe}},
		{"WebAssembly", []byte{0x00, 'a', 's', 'm'}},
	}
	for _, m := range magics {
		if bytes.HasPrefix(head, m.magic) {
			return m.kind
		}
	}
	if isPE(head) {
		return "PE (Windows)"
	}
	return ""
}

// isPE reports a PE/COFF image: the DOS header's "MZ" and, at the offset the
// header holds at 0x3c, the "PE\0\0" signature. "MZ" alone is too common a
// start for text to be a verdict.
func isPE(head []byte) bool {
	if len(head) < 0x40 || !bytes.HasPrefix(head, []byte("MZ")) {
		return false
	}
	off := int(binary.LittleEndian.Uint32(head[0x3c:]))
	return off >= 0x40 && off+4 <= len(head) && bytes.Equal(head[off:off+4], []byte("PE\x00\x00"))
}
