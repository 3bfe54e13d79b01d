package static

import (
	"os/exec"
	"testing"

	"uds-lab/tests/internal/lab"
)

// Every file settings.toml writes (scripts/settings.py: .env, the tables of
// docs/configuration.md, compose.yaml's environment lists, the Makefile's
// settings for loadgen/lab_run.py, the chart's values, schema and environment
// helpers) is what the table gives; the failure names each file and the
// command that regenerates it.
func TestSettingsGenerated(t *testing.T) {
	out, err := exec.Command("python3", lab.Path(t, "scripts", "settings.py"), "--check").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
