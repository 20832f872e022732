package deploycheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestEveryRelativeLinkResolves: every relative link of the repository's
// Markdown (README, CHANGELOG, docs/, the chart's and the client's) names
// a file or directory of the repository, and an anchor names a heading of
// its page: a clone alone is complete, and a moved section breaks the test,
// not a reader's click. Links out of the repository (http, mailto) are not
// followed.
func TestEveryRelativeLinkResolves(t *testing.T) {
	t.Parallel()
	root := "../.."
	var pages []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 6 {
		t.Fatalf("only %d Markdown pages found: %v", len(pages), pages)
	}
	anchors := map[string]map[string]bool{} // page → its headings' anchors
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		a := map[string]bool{}
		for _, line := range prose(t, page) {
			if strings.HasPrefix(line, "#") {
				a[slug(strings.TrimLeft(line, "# "))] = true
			}
		}
		anchors[page] = a
		return a
	}
	checked := 0
	for _, page := range pages {
		for n, line := range prose(t, page) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), file)
					rel, err := filepath.Rel(root, dest)
					if err != nil || strings.HasPrefix(rel, "..") {
						t.Errorf("%s:%d: %s leaves the repository", page, n+1, target)
						continue
					}
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: %s does not exist", page, n+1, target)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
					t.Errorf("%s:%d: %s names no heading of %s", page, n+1, target, dest)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links checked", checked)
	}
}

// prose is page's lines with those of fenced blocks blanked (a link or a
// "#" in a code block is code), so that indexes are line numbers less one.
func prose(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped (hyphens and underscores kept), spaces made hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
