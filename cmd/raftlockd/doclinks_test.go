package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// mdAnchor is GitHub's anchor of a heading: lower case, punctuation
// dropped, spaces as hyphens.
func mdAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 0x7f:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdAnchors returns the anchors of a Markdown file's headings (outside
// code fences).
func mdAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors[mdAnchor(strings.TrimLeft(line, "#"))] = true
	}
	return anchors
}

// Every relative link of the repository's Markdown files (README.md, docs/,
// the design notes beside the packages) names a file that exists, and a
// link to a heading of a Markdown file names one it has: documents move,
// and a newcomer follows links.
func TestDocLinksResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 5 {
		t.Fatalf("found %d Markdown files under %s, want the README and docs/", len(docs), root)
	}
	checked := 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		inFence := false
		for n, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
				continue
			}
			if inFence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := doc
				if file != "" {
					path = filepath.Join(filepath.Dir(doc), filepath.FromSlash(file))
				}
				checked++
				text, err := os.ReadFile(path)
				if err != nil {
					if _, serr := os.Stat(path); serr == nil {
						continue // a directory
					}
					t.Errorf("%s:%d: link %q: %v", rel, n+1, target, err)
					continue
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !mdAnchors(string(text))[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", rel, n+1, target, filepath.Base(path), anchor)
				}
			}
		}
	}
	t.Logf("%d relative links in %d Markdown files", checked, len(docs))
}

func TestMdAnchorIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		" Limits and defaults":                          "limits-and-defaults",
		" The Raft log store: `--log-store wal|boltdb`": "the-raft-log-store---log-store-walboltdb",
		" 100,000 sessions (issue 20)":                  "100000-sessions-issue-20",
	} {
		if got := mdAnchor(heading); got != want {
			t.Errorf("mdAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
}
