package static

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// One Go version: .env's GO_IMAGE (what users pull to build the lab's images)
// is the default of every Dockerfile's GO_IMAGE, the go line of every go.mod,
// and the Go the docs name (docs/results.md records runs, and keeps what they ran).
func TestGoVersionOnce(t *testing.T) {
	image := lab.Env(t)["GO_IMAGE"]
	m := regexp.MustCompile(`^golang:([0-9]+\.[0-9]+\.[0-9]+)(-[a-z0-9]+)?$`).FindStringSubmatch(image)
	if m == nil {
		t.Fatalf(".env GO_IMAGE=%q: want golang:x.y.z[-variant]", image)
	}
	version := m[1]
	goLine := regexp.MustCompile(`(?m)^(go|toolchain) (\S+)$`)
	argLine := regexp.MustCompile(`(?m)^ARG GO_IMAGE=(\S+)$`)
	// The test bed's stand-in (uds-lab-standin/golang:<version>-<its recipe's
	// hash>, in docs/tests.md's tables of what a run built) is not .env's image.
	imageInDocs := regexp.MustCompile(`(uds-lab-standin/)?(golang:[0-9]+\.[0-9]+\.[0-9]+[-a-z0-9]*)`)
	goInDocs := regexp.MustCompile(`\bGo ([0-9]+\.[0-9]+\.[0-9]+)\b`)
	seen := map[string]int{}
	err := filepath.WalkDir(lab.Root(t), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(lab.Root(t), path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "results" {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if rel == filepath.Join("docs", "results.md") || name != "go.mod" && name != "Dockerfile" && !strings.HasSuffix(name, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case name == "go.mod":
			seen["go.mod"]++
			for _, l := range goLine.FindAllStringSubmatch(string(b), -1) {
				if want := map[string]string{"go": version, "toolchain": "go" + version}[l[1]]; l[2] != want {
					t.Errorf("%s: %s %s, want %s (.env GO_IMAGE=%s)", rel, l[1], l[2], want, image)
				}
			}
			if !goLine.Match(b) {
				t.Errorf("%s: no go line", rel)
			}
		case name == "Dockerfile":
			for _, l := range argLine.FindAllStringSubmatch(string(b), -1) {
				seen["Dockerfile"]++
				if l[1] != image {
					t.Errorf("%s: ARG GO_IMAGE=%s, .env has %s", rel, l[1], image)
				}
			}
		default:
			for _, m := range imageInDocs.FindAllStringSubmatch(string(b), -1) {
				if m[1] == "" && m[2] != image {
					t.Errorf("%s names %s, .env has %s", rel, m[2], image)
				}
			}
			for _, l := range goInDocs.FindAllStringSubmatch(string(b), -1) {
				seen["docs"]++
				if l[1] != version {
					t.Errorf("%s names Go %s, .env builds with %s", rel, l[1], version)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"go.mod", "Dockerfile", "docs"} {
		if seen[what] == 0 {
			t.Errorf("found no Go version in any %s: is the walk looking in the right place?", what)
		}
	}
}
