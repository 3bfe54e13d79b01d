package static

import (
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// The hardening the lab promises, asserted on the rendered compose config so
// that a later change cannot drop it silently.

// The measured services run as non-root, with no capabilities, no privilege
// escalation and a read-only root file system.
func TestHardenedServices(t *testing.T) {
	p := loadCompose(t)
	for _, name := range []string{"app", "nginx", "nginx-lo", "nginx-log-exporter", "contract"} {
		s := p.Services[name]
		if name != "nginx-log-exporter" && (s.User == "" || s.User == "root" || strings.HasPrefix(s.User, "0:") || s.User == "0") {
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

// The socket lives in its own volume, which only the app and nginx mount, and
// nginx only reads it (connecting needs no write access to the mount).
func TestSocketVolume(t *testing.T) {
	p := loadCompose(t)
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeVolume || v.Source != "sock" {
				continue
			}
			switch name {
			case "app":
			case "nginx", "nginx-lo", "contract":
				if !v.ReadOnly {
					t.Errorf("%s mounts the socket volume writable", name)
				}
			default:
				t.Errorf("%s mounts the socket volume", name)
			}
		}
	}
	// The contract check reaches the app as nginx does: same user, same socket, same port.
	app, nginx, contract := p.Services["app"], p.Services["nginx"], p.Services["contract"]
	if contract.User != nginx.User {
		t.Errorf("contract runs as %q, nginx as %q", contract.User, nginx.User)
	}
	if c, a := *contract.Environment["CONTRACT_SOCKET"], *app.Environment["APP_UNIX_SOCKET"]; c != a {
		t.Errorf("contract checks the socket %q, the app listens on %q", c, a)
	}
	if c, n := *contract.Environment["CONTRACT_TCP"], *nginx.Environment["APP_TCP_UPSTREAM"]; c != n {
		t.Errorf("contract checks %q, nginx proxies to %q", c, n)
	}
	mode := *app.Environment["APP_SOCKET_MODE"]
	if mode == "" || strings.ContainsAny(mode[len(mode)-1:], "2367") {
		t.Errorf("APP_SOCKET_MODE=%q: others must not have write access", mode)
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
