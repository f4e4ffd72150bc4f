package main

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"
)

// isMarkdown reports a document whose links are checked: any tracked
// Markdown file outside testdata/ directories.
func isMarkdown(p string) bool {
	return strings.HasSuffix(p, ".md") && !mayBeLarge(p)
}

var (
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^ {0,3}(```|~~~)")
	// codeSpan is inline code, whose text is never a link.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// inlineLink captures an inline link's or image's target: [text](target "title").
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)`)
	// refDefinition captures a reference definition's target: [label]: target.
	refDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// scheme starts an absolute URL (https:, mailto:), which is not checked.
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// atxHeading is a "# Heading" line.
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$`)
	// linkText keeps a heading link's text: [text](target) -> text.
	linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// MaxReadmeLines is the longest README.md the repository keeps.
const MaxReadmeLines = 300

// checkReadme applies the README's length rule.
func checkReadme(files []trackedFile) []Problem {
	for _, f := range files {
		if f.Path != "README.md" {
			continue
		}
		if n := strings.Count(strings.TrimSuffix(string(f.Head), "\n"), "\n") + 1; n > MaxReadmeLines {
			return []Problem{{f.Path, fmt.Sprintf("is %d lines, over %d: move detail into a page under docs/ and link it", n, MaxReadmeLines)}}
		}
	}
	return nil
}

// link is one relative link of a document, by line.
type link struct {
	Line   int
	Target string
}

// checkLinks checks every relative link of every tracked Markdown document.
func checkLinks(files []trackedFile) []Problem {
	tracked := make(map[string]bool, len(files))
	docs := map[string]string{}
	for _, f := range files {
		tracked[f.Path] = true
		for dir := path.Dir(f.Path); dir != "."; dir = path.Dir(dir) {
			tracked[dir+"/"] = true
		}
		if isMarkdown(f.Path) {
			docs[f.Path] = string(f.Head)
		}
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(doc string) map[string]bool {
		if _, ok := anchors[doc]; !ok {
			anchors[doc] = headingAnchors(docs[doc])
		}
		return anchors[doc]
	}
	var problems []Problem
	for _, f := range files {
		text, ok := docs[f.Path]
		if !ok {
			continue
		}
		for _, l := range relativeLinks(text) {
			if what := resolve(f.Path, l.Target, tracked, docs, anchorsOf); what != "" {
				problems = append(problems, Problem{fmt.Sprintf("%s:%d", f.Path, l.Line), fmt.Sprintf("link %q %s", l.Target, what)})
			}
		}
	}
	return problems
}

// resolve returns why target, linked from doc, leads nowhere, or "".
func resolve(doc, target string, tracked map[string]bool, docs map[string]string, anchorsOf func(string) map[string]bool) string {
	p, fragment, _ := strings.Cut(target, "#")
	if unescaped, err := url.PathUnescape(p); err == nil {
		p = unescaped
	}
	dest := doc
	if p != "" {
		if strings.HasPrefix(p, "/") {
			dest = path.Clean(strings.TrimPrefix(p, "/"))
		} else {
			dest = path.Clean(path.Join(path.Dir(doc), p))
		}
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "leaves the repository"
		}
		if !tracked[dest] && !tracked[strings.TrimSuffix(dest, "/")+"/"] && dest != "." {
			return "names " + dest + ", which the repository does not track"
		}
	}
	if fragment == "" {
		return ""
	}
	if _, ok := docs[dest]; !ok {
		return "" // a fragment into a non-Markdown file (a source line) is the host's to resolve
	}
	if !anchorsOf(dest)[strings.ToLower(fragment)] {
		return fmt.Sprintf("names #%s, which is no heading of %s", fragment, dest)
	}
	return ""
}

// relativeLinks lists the links of a Markdown text that are neither
// absolute URLs nor inside code, by line.
func relativeLinks(text string) []link {
	var links []link
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			t = strings.TrimSuffix(strings.TrimPrefix(t, "<"), ">")
			if t == "" || scheme.MatchString(t) || strings.HasPrefix(t, "//") {
				continue
			}
			links = append(links, link{Line: i + 1, Target: t})
		}
	}
	return links
}

// headingAnchors returns the anchors GitHub gives a document's ATX
// headings: the text lowercased, punctuation other than '-' and '_'
// dropped, spaces turned into '-', and "-1", "-2"... added to repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		m := atxHeading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

func slugify(heading string) string {
	heading = linkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
