package static

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// bash4Features are what bash 3.2 (macOS's /bin/bash, which make doctor
// accepts) does not have, each with the bash that brought it. A script
// using one fails on a Mac, at that line, often long after it started.
var bash4Features = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`\b(mapfile|readarray)\b`), "mapfile/readarray (bash 4.0)"},
	{regexp.MustCompile(`\b(declare|local|typeset|readonly)(\s+-\w+)*\s+-[a-zA-Z]*A`), "an associative array (bash 4.0)"},
	{regexp.MustCompile(`\b(declare|local|typeset)(\s+-\w+)*\s+-[a-zA-Z]*[gn]`), "declare -g (4.2) or a nameref -n (4.3)"},
	{regexp.MustCompile(`\$\{[#!]?\w+(\[[^]]*\])?(,,?|\^\^?)[^}]*\}`), "case modification ${x,,} ${x^^} (bash 4.0)"},
	{regexp.MustCompile(`\$\{\w+(\[[^]]*\])?@[QEPAaUuLK]\}`), "the ${x@Q} transformations (bash 4.4)"},
	{regexp.MustCompile(`\|&`), "|& (bash 4.0)"},
	{regexp.MustCompile(`&>>`), "&>> (bash 4.0)"},
	{regexp.MustCompile(`\bcoproc\b`), "coproc (bash 4.0)"},
	{regexp.MustCompile(`;;&|;&\s*$`), "case fall-through ;& ;;& (bash 4.0)"},
	{regexp.MustCompile(`\bprintf\s+(-v\s+\S+\s+)?("[^"]*|'[^']*|\S*)%(-?\d*)?\([^)]*\)T`), "printf %(...)T (bash 4.2)"},
	{regexp.MustCompile(`\bwait\s+-\w*n`), "wait -n (bash 4.3)"},
	{regexp.MustCompile(`(\[\[|\[|\btest)\s+-v\s`), "test -v (bash 4.2)"},
	{regexp.MustCompile(`\bshopt\s+-s\s+.*\b(globstar|lastpipe|autocd|checkjobs|direxpand|dirspell|globasciiranges|inherit_errexit|localvar_inherit)\b`), "a shopt option bash 3.2 lacks"},
	{regexp.MustCompile(`\$\{\w+\[-\d+\]\}`), "a negative array index (bash 4.3)"},
	{regexp.MustCompile(`\$\{[A-Za-z_]\w*:[^:}]+:\s*-\d+\}`), "a negative substring length (bash 4.2)"},
	{regexp.MustCompile(`\b(EPOCHSECONDS|EPOCHREALTIME|SRANDOM|BASHPID)\b`), "EPOCHSECONDS, EPOCHREALTIME, SRANDOM, BASHPID (bash 4.0 to 5.1)"},
	{regexp.MustCompile(`\{-?\d+\.\.-?\d+\.\.-?\d+\}|\{0\d+\.\.\d+\}`), "a brace range with a step or zero padding (bash 4.0)"},
}

// hostScriptsNotOnTheHost are the repository's shell scripts that never run
// on a user's host, so may use any bash (every other script is checked).
var hostScriptsNotOnTheHost = map[string]string{
	"nginx/healthcheck.sh":                          "compose's healthcheck, inside the nginx container (its image's shell)",
	"nginx/lo-healthcheck.sh":                       "compose's healthcheck, inside the nginx-lo container",
	"services/notrack/notrack.sh":                   "the notrack service's entrypoint, inside its container",
	"stacks/php-fpm/entrypoint.sh":                  "the php-fpm stack image's entrypoint, inside its container",
	"tests/e2e/run.sh":                              "make e2e: only on the Linux test bed (Debian's docker.io, debootstrap)",
	"tests/e2e/engine.sh":                           "make e2e's engine, on the Linux test bed only",
	"tests/e2e/standins.sh":                         "make e2e's stand-in images, built with debootstrap on the Linux test bed only",
	"tests/e2e/standins/nginx/docker-entrypoint.sh": "inside the stand-in nginx image",
	".ci/run": "CI, on the project's Linux machines only",
}

// shellScripts are the repository's shell scripts: *.sh and files whose
// first line names sh or bash.
func shellScripts(t *testing.T) []string {
	t.Helper()
	return repoFiles(t, func(rel string) bool {
		return strings.HasSuffix(rel, ".sh") || isShellShebang(lab.Path(t, rel))
	})
}

// repoFiles lists the repository's files (relative paths) that match, leaving
// out hidden folders but .ci, node_modules, results/ and shared/.
func repoFiles(t *testing.T, match func(rel string) bool) []string {
	t.Helper()
	root := lab.Root(t)
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci" || d.Name() == "node_modules" || rel == "results" || rel == "shared") {
				return filepath.SkipDir
			}
			return nil
		}
		if match(rel) {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var shellShebang = regexp.MustCompile(`^#!\s*\S*/(env\s+)?(ba)?sh\b`)

func isShellShebang(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := f.Read(b)
	return shellShebang.Match(b[:n])
}

// shellCode drops comments and here-documents' bodies (text, or another
// language's code) from a script, keeping line numbers: line i of the result
// is line i of the script, or empty.
func shellCode(src string) []string {
	lines := strings.Split(src, "\n")
	heredoc := regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_]\w*)['"]?`)
	end := ""
	for i, l := range lines {
		if end != "" {
			if strings.TrimLeft(l, "\t") == end {
				end = ""
			}
			lines[i] = ""
			continue
		}
		lines[i] = stripComment(l)
		if m := heredoc.FindStringSubmatch(lines[i]); m != nil {
			end = m[1]
		}
	}
	return lines
}

// stripComment cuts a line at a # that starts a word outside quotes.
func stripComment(l string) string {
	var quote rune
	for i, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t' || l[i-1] == ';'):
			return l[:i]
		}
	}
	return l
}

// bash4Uses lists "line N: what: the line" for each bash-4 feature in code.
func bash4Uses(code []string) []string {
	var out []string
	for i, l := range code {
		for _, f := range bash4Features {
			if f.re.MatchString(l) {
				out = append(out, "line "+strconv.Itoa(i+1)+": "+f.what+": "+strings.TrimSpace(l))
			}
		}
	}
	return out
}

// makeRecipes is the Makefile as bash sees it (SHELL := bash): make's own
// comments dropped and $$ read as $.
func makeRecipes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(lab.Path(t, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.ReplaceAll(string(b), "$$", "$"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			lines[i] = ""
		}
	}
	return lines
}

// What runs on the user's host runs on macOS's bash 3.2 too (make doctor
// promises it): the Makefile's recipes, scripts/, loadgen/ and every other
// shell script but those listed in hostScriptsNotOnTheHost, with the reason
// each never runs there. None uses a feature bash 3.2 lacks.
func TestHostScriptsRunOnBash32(t *testing.T) {
	scripts := shellScripts(t)
	for path := range hostScriptsNotOnTheHost {
		if !slices.Contains(scripts, path) {
			t.Errorf("%s is listed as a script that runs off the host, but is no shell script here", path)
		}
	}
	checked := 0
	for _, path := range scripts {
		if _, off := hostScriptsNotOnTheHost[path]; off {
			continue
		}
		b, err := os.ReadFile(lab.Path(t, path))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range bash4Uses(shellCode(string(b))) {
			t.Errorf("%s %s", path, u)
		}
		checked++
	}
	for _, u := range bash4Uses(makeRecipes(t)) {
		t.Errorf("Makefile %s", u)
	}
	for _, want := range []string{"scripts/doctor.sh", "loadgen/compare.sh", "scripts/k8s.sh"} {
		if !slices.Contains(scripts, want) {
			t.Errorf("%s not found among the shell scripts", want)
		}
	}
	if checked == 0 {
		t.Fatal("no host script checked")
	}
}

// The patterns themselves: each feature the check must see, and bash 3.2's
// own that it must let be.
func TestBash4FeaturesFound(t *testing.T) {
	for _, l := range []string{
		`mapfile -t set <<<"$lines"`, `readarray -t a < f`, `declare -A seen=()`, `local -A m`, `local -rA m`,
		`echo "${x,,}"`, `echo "${x^^}"`, `echo "${1,}"`, `make 2>&1 |& tee log`, `cmd &>>log`, `coproc cat`,
		`printf '[x %(%H:%M:%S)T] %s\n' -1 "$*"`, `printf -v now '%(%s)T' -1`, `wait -n`, `[[ -v FOO ]]`,
		`shopt -s globstar`, `echo "${a[-1]}"`, `echo "${x:0:-1}"`, `echo $EPOCHSECONDS`, `echo {1..10..2}`,
		`declare -n ref=x`, `local -n ref=$1`, `declare -g X=1`, `echo "${x@Q}"`, `  a) echo ;;&`,
	} {
		if len(bash4Uses([]string{l})) == 0 {
			t.Errorf("not found: %s", l)
		}
	}
	for _, l := range []string{
		`set -euo pipefail`, `a=(); a+=(x)`, `echo "${x:-default}" "${x#pre}" "${x%%.*}" "${#a[@]}" "${!a[@]}"`,
		`printf -v "F_$k" '%s' "$v"`, `read -r -a parts <<<"$x"`, `[[ $x =~ ^[0-9]+$ ]]`, `echo "${x: -1}"`,
		`cmd >/dev/null 2>&1 || true`, `echo {1..10}`, `local x=$1`, `declare -a list`, `printf '%s\n' "$(date +%H:%M:%S)"`,
		`awk -v a="$1" '{ print }'`, `echo "${x/,/ }"`,
	} {
		if u := bash4Uses([]string{l}); len(u) != 0 {
			t.Errorf("bash 3.2 has it, yet: %v", u)
		}
	}
	code := shellCode("a=1 # mapfile in a comment\ncat <<'EOF'\nmapfile here\nEOF\necho '#' ; mapfile -t x\n")
	if u := bash4Uses(code); len(u) != 1 || !strings.HasPrefix(u[0], "line 5:") {
		t.Errorf("comments and here-documents: %v", u)
	}
}
