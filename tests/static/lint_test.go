package static

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// The reviewers' linters, each on everything it reads, with their waivers in
// their own config files, each with its reason: .shellcheckrc (and per-line
// `# shellcheck disable=...` comments), .hadolint.yaml, .gixy.cfg.
// scripts/test-deps.sh installs them (make deps, which make check runs).

// lint runs a linter from the repository's root and fails the test with its
// findings.
func lint(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(lab.Tool(t, name), args...)
	cmd.Dir = lab.Root(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: %v; fix each finding, or waive it with its reason (see docs/tests.md):\n%s", name, err, out)
	}
}

// shellcheck on every shell script of the repository (bash32_test.go's list:
// *.sh and files whose first line names sh or bash), each checked as the
// shell its first line names.
func TestShellcheck(t *testing.T) {
	scripts := shellScripts(t)
	if len(scripts) == 0 {
		t.Fatal("no shell script found")
	}
	lint(t, "shellcheck", append([]string{"--format=gcc", "--external-sources"}, scripts...)...)
}

// dockerfiles are the repository's Dockerfiles: Dockerfile, and *.Dockerfile.
func dockerfiles(t *testing.T) []string {
	t.Helper()
	return repoFiles(t, func(rel string) bool {
		base := filepath.Base(rel)
		return base == "Dockerfile" || strings.HasSuffix(base, ".Dockerfile")
	})
}

// hadolint on every Dockerfile: the lab's images, the stacks', the contract's
// and the test bed's stand-ins. Its failure threshold is style: every finding
// fails unless .hadolint.yaml waives it.
func TestHadolint(t *testing.T) {
	files := dockerfiles(t)
	for _, want := range []string{"services/app/Dockerfile", "tests/e2e/standins/golang.Dockerfile"} {
		if !slices.Contains(files, want) {
			t.Errorf("%s not among the Dockerfiles found: %v", want, files)
		}
	}
	lint(t, "hadolint", append([]string{"--no-color", "--config", ".hadolint.yaml"}, files...)...)
}

// gixy-ng on the config each nginx runs (nginx and nginx-lo, catalogue.json's
// "nginx"), in each protocol, rendered from nginx/templates with compose's
// values as TestNginxConfig renders it for nginx -t.
func TestGixy(t *testing.T) {
	gixy := lab.Tool(t, "gixy")
	cfg := lab.Path(t, ".gixy.cfg")
	p := loadCompose(t)
	n := 0
	for name := range lab.ReadCatalogue(t).Nginx {
		for _, protocol := range protocols(t) {
			t.Run(name+"/"+protocol, func(t *testing.T) {
				dir := t.TempDir()
				renderNginx(t, p, name, dir, map[string]string{"APP_PROTOCOL": protocol})
				out, err := exec.Command(gixy, "--config", cfg, filepath.Join(dir, "nginx.conf")).CombinedOutput()
				if err != nil || !gixyClean.Match(out) {
					t.Errorf("gixy: %v; fix each finding, or waive its check in .gixy.cfg with the reason:\n%s", err, out)
				}
			})
			n++
		}
	}
	if n < 2 {
		t.Errorf("gixy ran on %d configs: want both nginx at least", n)
	}
}

// gixyClean is its report of a config with no finding.
var gixyClean = regexp.MustCompile(`No issues found`)
