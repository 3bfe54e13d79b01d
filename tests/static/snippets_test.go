package static

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// The lines of a pass/<protocol>/ snippet that may differ between paths:
// where the app is (the upstream address) and the connection handling (a new
// connection per request, or pooled). Anything else would treat one path
// differently from its twins (proxy_buffering off on one path, say).
var (
	addressLine    = regexp.MustCompile(`^(proxy_pass|fastcgi_pass)\s`)
	connectionLine = regexp.MustCompile(`^(proxy_set_header\s+Connection\s|fastcgi_keep_conn\s)`)
)

// snippet splits a snippet's directives (comments and blank lines left out)
// into its address, its connection handling and the rest.
func snippet(t *testing.T, path string) (address, connection string, rest []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case addressLine.MatchString(line):
			address = line
		case connectionLine.MatchString(line):
			connection = line
		default:
			rest = append(rest, line)
		}
	}
	return address, connection, rest
}

// Every path's snippet of a protocol says the same as its twins but for the
// upstream address (which differs by listener and pooling) and the connection
// handling (which is the same for paths that pool alike): the lab's
// comparisons are of the transport, nothing else.
func TestPathSnippetsDifferOnlyInTransport(t *testing.T) {
	dirs, _ := filepath.Glob(lab.Path(t, "nginx", "templates", "pass", "*"))
	if len(dirs) == 0 {
		t.Fatal("no nginx/templates/pass/<protocol>/ folders")
	}
	for _, dir := range dirs {
		protocol := filepath.Base(dir)
		type parts struct {
			address, connection string
			rest                []string
		}
		seen := map[string]parts{}
		for _, name := range []string{"tcp", "uds", "tcp-ka", "uds-ka"} {
			a, c, r := snippet(t, filepath.Join(dir, name+".conf.template"))
			if a == "" || c == "" {
				t.Errorf("%s/%s: no upstream address (%q) or connection handling (%q)", protocol, name, a, c)
			}
			seen[name] = parts{a, c, r}
		}
		for name, p := range seen {
			if got, want := strings.Join(p.rest, "\n"), strings.Join(seen["tcp"].rest, "\n"); got != want {
				t.Errorf("%s/%s differs from %s/tcp beyond the address and the connection handling:\n%s\nagainst:\n%s",
					protocol, name, protocol, got, want)
			}
			if strings.Fields(p.address)[0] != strings.Fields(seen["tcp"].address)[0] {
				t.Errorf("%s/%s: %q, %s/tcp: %q: another directive", protocol, name, p.address, protocol, seen["tcp"].address)
			}
		}
		for _, pair := range [][2]string{{"tcp", "uds"}, {"tcp-ka", "uds-ka"}} {
			if a, b := seen[pair[0]].connection, seen[pair[1]].connection; a != b {
				t.Errorf("%s: %s says %q, %s says %q: the same connection handling on both transports", protocol, pair[0], a, pair[1], b)
			}
		}
		if seen["tcp"].connection == seen["tcp-ka"].connection {
			t.Errorf("%s: tcp and tcp-ka handle connections alike (%q)", protocol, seen["tcp"].connection)
		}
	}
}

// Each path's location in nginx.conf.template only includes its snippet: a
// directive added to one location would treat that path apart as well.
func TestPathLocationsOnlyIncludeTheirSnippet(t *testing.T) {
	b, err := os.ReadFile(lab.Path(t, "nginx", "templates", "nginx.conf.template"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)location /((?:tcp|uds)\$\{NGINX_PATH_SUFFIX\}[a-z-]*)/ \{(.*?)\n\s*\}`)
	include := regexp.MustCompile(`^include pass/\$\{APP_PROTOCOL\}/(tcp|uds)(-ka)?\.conf;$`)
	found := block.FindAllStringSubmatch(string(b), -1)
	if len(found) < 4 {
		t.Fatalf("found %d path locations in nginx.conf.template, want 4 or more", len(found))
	}
	for _, m := range found {
		if body := strings.TrimSpace(m[2]); !include.MatchString(body) {
			t.Errorf("location /%s/: %q, want only its pass/${APP_PROTOCOL}/ snippet's include", m[1], body)
		}
	}
}
