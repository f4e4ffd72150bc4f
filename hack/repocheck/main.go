// Command repocheck fails when the git index holds what a fresh clone must
// not: a compiled executable, a large file, or a Markdown link that leads
// nowhere. `make lint` runs it from the repository root; it reads the index
// (what `git add` staged), not the work tree, so build outputs lying around
// untracked never trip it and a staged binary always does.
//
// The rules, each reported with the path and what to do:
//
//   - No compiled executable, whatever its mode: a file whose first bytes
//     are an ELF, Mach-O, PE/COFF or WebAssembly magic number is refused.
//     Build outputs go to bin/ and dist/, which .gitignore keeps out.
//   - The executable bit (mode 100755) is for scripts only: such a file
//     must start with "#!" (hack/tools.sh, .ci/run).
//   - No file over 1 MiB (MaxFileSize) except under a directory named
//     testdata or in the embedded VM catalog's data directory
//     (pkg/catalog/data), the two places where size is the point.
//   - Every relative link of the repository's documents (README.md,
//     CONTRIBUTING.md, docs/**/*.md) names a tracked file or directory,
//     and a #fragment names a heading of the Markdown file it points at,
//     slugged as GitHub slugs headings.
//   - README.md is at most MaxReadmeLines lines: it is the page a newcomer
//     reads first, and the rest belongs in docs/.
//
// Symbolic links and submodules are not files and are not checked.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	dir := flag.String("C", ".", "the repository to check (its work tree root)")
	flag.Parse()
	problems, err := Check(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "repocheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "repocheck:", p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "repocheck: %d problem(s); see hack/repocheck/main.go for the rules\n", len(problems))
		os.Exit(1)
	}
}
