package static

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// .env has one reader per language, and all of them read it as compose does:
// Go (the tests) with compose's own parser (lab.Env), the shell and make with
// scripts/dotenv.sh. On .env and on the cases in testdata/dotenv/agree.env
// (quotes, spaces, comments, values with "="), the script's list, its
// --export and make's `env` function give exactly what compose reads.
func TestDotenvReadersAgree(t *testing.T) {
	for _, file := range []string{lab.Path(t, ".env"), lab.Path(t, "tests", "static", "testdata", "dotenv", "agree.env")} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want := lab.EnvFile(t, file)
			if len(want) == 0 {
				t.Fatalf("compose reads nothing from %s", file)
			}
			compare := func(reader string, got map[string]string) {
				t.Helper()
				for _, k := range slices.Sorted(maps.Keys(want)) {
					if g, ok := got[k]; !ok || g != want[k] {
						t.Errorf("%s: %s=%q (set: %v), compose reads %q", reader, k, g, ok, want[k])
					}
				}
				for k := range got {
					if _, ok := want[k]; !ok {
						t.Errorf("%s: %s, which compose does not read", reader, k)
					}
				}
			}
			compare("scripts/dotenv.sh", keyValues(t, run(t, cleanEnv(), "scripts/dotenv.sh", "-f", file)))

			// The form test-deps.sh and standins.sh use; a NAME the shell sets wins.
			names := slices.Sorted(maps.Keys(want))
			show := `eval "$(scripts/dotenv.sh -f "$1" --export)"; shift; for k; do printf '%s=%s\n' "$k" "${!k}"; done`
			compare("eval scripts/dotenv.sh --export", keyValues(t, run(t, cleanEnv(), "bash", append([]string{"-c", show, "sh", file}, names...)...)))
			shellWins := keyValues(t, run(t, append(cleanEnv(), names[0]+"=from the shell"), "bash", "-c", show, "sh", file, names[0]))
			if shellWins[names[0]] != "from the shell" {
				t.Errorf("--export: %s=%q, want the shell's value to win as in compose", names[0], shellWins[names[0]])
			}

			// make reads .env only (its env function has no file argument).
			if filepath.Base(file) != ".env" {
				return
			}
			out := filepath.Join(t.TempDir(), "make.env")
			probe := fmt.Sprintf("_dotenv_probe: ; $(foreach k,%s,$(file >>%s,$(k)=$(call env,$(k))))", strings.Join(names, " "), out)
			run(t, cleanEnv(), "make", "-s", "--no-print-directory", "--eval", probe, "_dotenv_probe")
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			compare("make's env function", keyValues(t, string(b)))
		})
	}
}

// Each line of testdata/dotenv/refused.env compose reads differently from its
// text (it expands $ and escapes, spans lines, knows other forms): the script
// refuses it, naming the line, instead of reading it differently.
func TestDotenvRefusesWhatItCannotRead(t *testing.T) {
	f, err := os.Open(lab.Path(t, "tests", "static", "testdata", "dotenv", "refused.env"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		n++
		path := filepath.Join(t.TempDir(), "one.env")
		if err := os.WriteFile(path, []byte("OK=1\n"+line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("scripts/dotenv.sh", "-f", path)
		cmd.Dir, cmd.Env = lab.Root(t), cleanEnv()
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "line 2:") {
			t.Errorf("%q: exit %d (%v), output %q; want exit 2 naming line 2", line, code, err, out)
		}
	}
	if n == 0 {
		t.Fatal("refused.env has no case")
	}
}

// cleanEnv is an environment with no variable .env could set.
func cleanEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = lab.Root(t), env
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if e, ok := err.(*exec.ExitError); ok {
			stderr = string(e.Stderr)
		}
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr)
	}
	return string(out)
}

// keyValues reads NAME=value lines.
func keyValues(t *testing.T, s string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("not NAME=value: %q", line)
		}
		m[k] = v
	}
	return m
}
