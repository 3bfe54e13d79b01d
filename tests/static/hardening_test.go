package static

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"uds-lab/contract/socketmode"
	"uds-lab/tests/internal/lab"
)

// The hardening the lab promises, asserted on the rendered compose config so
// that a later change cannot drop it silently.

// The measured services run as non-root, with no capabilities, no privilege
// escalation and a read-only root file system.
func TestHardenedServices(t *testing.T) {
	p := loadCompose(t)
	for _, name := range []string{"app", "nginx", "nginx-lo", "nginx-log-exporter", "contract"} {
		s := p.Services[name]
		if s.User == "" || s.User == "root" || strings.HasPrefix(s.User, "0:") || s.User == "0" {
			t.Errorf("%s: user %q, want a non-root uid:gid", name, s.User)
		}
		if !slices.Contains(s.CapDrop, "ALL") || len(s.CapAdd) > 0 {
			t.Errorf("%s: cap_drop %v cap_add %v, want [ALL] and nothing added", name, s.CapDrop, s.CapAdd)
		}
		if !s.ReadOnly {
			t.Errorf("%s: root file system is writable, want read_only", name)
		}
	}
	for name, s := range p.Services {
		if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: security_opt %v lacks no-new-privileges:true", name, s.SecurityOpt)
		}
	}
}

// The socket lives in its own volume, which only the app and nginx mount (and
// those that reach the app as nginx does: the contract check, oha for the
// direct paths), and nginx only reads it (connecting needs no write access to the mount).
func TestSocketVolume(t *testing.T) {
	p := loadCompose(t)
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeVolume || v.Source != "sock" {
				continue
			}
			switch name {
			case "app":
			case "nginx", "nginx-lo", "contract", "oha":
				if !v.ReadOnly {
					t.Errorf("%s mounts the socket volume writable", name)
				}
			default:
				t.Errorf("%s mounts the socket volume", name)
			}
		}
	}
	// The contract check reaches the app as nginx does: as nginx's user (the
	// socket and port it dials: TestComposeSocketShared, TestComposeTCPUpstream).
	app, nginx, contract := p.Services["app"], p.Services["nginx"], p.Services["contract"]
	if contract.User != nginx.User {
		t.Errorf("contract runs as %q, nginx as %q", contract.User, nginx.User)
	}
	if mode := *app.Environment["APP_SOCKET_MODE"]; checkSocketMode(mode) != nil {
		t.Errorf("APP_SOCKET_MODE=%q: %v", mode, checkSocketMode(mode))
	}
}

// checkSocketMode applies the lab's one rule for the socket mode, the
// checker's own definition (contract/checker/socketmode).
func checkSocketMode(mode string) error {
	_, err := socketmode.Parse(mode)
	return err
}

// TestSocketModeRule: the check above refuses every mode the rule refuses
// (contract/socket-modes.json, shared with the app, the minimal app and the
// checker), so a .env that opens the socket to others fails here.
func TestSocketModeRule(t *testing.T) {
	var c struct{ Keep, Break []string }
	b, err := os.ReadFile(lab.Path(t, "contract", "socket-modes.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil || len(c.Keep) == 0 || len(c.Break) == 0 {
		t.Fatalf("socket-modes.json: %+v, %v", c, err)
	}
	for _, m := range c.Keep {
		if err := checkSocketMode(m); err != nil {
			t.Errorf("%s: %v, want it kept", m, err)
		}
	}
	for _, m := range c.Break {
		if checkSocketMode(m) == nil {
			t.Errorf("%s kept, want it refused", m)
		}
	}
}

// Grafana: no admin/admin, anonymous visitors only view.
func TestGrafanaAccess(t *testing.T) {
	env := loadCompose(t).Services["grafana"].Environment
	if pw := env["GF_SECURITY_ADMIN_PASSWORD"]; pw == nil || *pw == "" || *pw == "admin" {
		t.Error("GF_SECURITY_ADMIN_PASSWORD must come from .env and not be admin")
	}
	if role := env["GF_AUTH_ANONYMOUS_ORG_ROLE"]; role == nil || *role != "Viewer" {
		t.Error("anonymous access must be Viewer only")
	}
}
