package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// linkPattern matches an inline Markdown link or image, [text](target) or
// ![alt](target "title"), capturing the target.
var linkPattern = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// inlineCode matches a code span, whose brackets are no link.
var inlineCode = regexp.MustCompile("`[^`\n]*`")

// TestLinksResolve checks every relative link of the user documentation
// (every Markdown file under docs/, the repository's README.md, and the
// pages of test/ that hold the runs the docs quote): the
// file or directory it names exists, and its #anchor, if any, is a heading
// of the page it points to, as GitHub makes anchors from headings. Links
// to other sites are not followed.
func TestLinksResolve(t *testing.T) {
	pages := []string{filepath.Join(repoRoot, "README.md")}
	// The runs the docs quote, moved beside the tests, are read as part of
	// the book.
	for _, p := range []string{"test/README.md", "test/reliability.md", "test/docs-evidence.md", "test/bench/history.md"} {
		pages = append(pages, filepath.Join(repoRoot, p))
	}
	require.NoError(t, filepath.WalkDir(repoRoot+"/docs", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return err
	}))
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		data, err := os.ReadFile(page)
		require.NoError(t, err)
		anchors[page] = headingAnchors(string(data))
		return anchors[page]
	}
	checked := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		require.NoError(t, err)
		name, _ := filepath.Rel(repoRoot, page)
		for i, line := range proseLines(string(data)) {
			for _, m := range linkPattern.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), file)
					info, err := os.Stat(dest)
					if err != nil {
						t.Errorf("%s:%d: link %q: no such file or directory", name, i+1, target)
						continue
					}
					if info.IsDir() {
						if anchor != "" {
							t.Errorf("%s:%d: link %q: an anchor into a directory", name, i+1, target)
						}
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", name, i+1, target, filepath.Base(dest), anchor)
				}
			}
		}
	}
	require.NotZero(t, checked, "no relative link found: the checker reads nothing")
	t.Logf("%d relative links checked in %d pages", checked, len(pages))
}

// proseLines returns the lines of a Markdown page with those inside fenced
// code blocks blanked, so that line numbers stay those of the file.
func proseLines(page string) []string {
	lines := strings.Split(page, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives the headings of a page
// (and any <a name="..."> or id="..." it declares): the heading's text
// without its Markdown, lower-cased, with everything but letters, digits,
// spaces, '-' and '_' dropped and spaces turned into '-'; a repeated one
// gets -1, -2, ...
func headingAnchors(page string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(page) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		text = mdLink.ReplaceAllString(text, "$1")
		text = strings.NewReplacer("`", "", "*", "").Replace(text)
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

var (
	// mdLink matches a link inside a heading, whose text alone makes the anchor.
	mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// htmlAnchor matches an explicit anchor.
	htmlAnchor = regexp.MustCompile(`<a (?:name|id)="([^"]+)"`)
)
