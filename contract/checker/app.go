package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// listener is one way into the app: its TCP port or its Unix socket.
type listener struct {
	name   string // "tcp" or "unix", the value of the metrics' listener label
	client *http.Client
	dial   func(ctx context.Context) (net.Conn, error)
}

type app struct{ tcp, uds listener }

func newApp(cfg Config) *app {
	var d net.Dialer
	mk := func(name, network, addr string) listener {
		dial := func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, network, addr) }
		// A new connection per request, as nginx's /tcp/ and /uds/ paths, in
		// the protocol nginx speaks to the app.
		var rt http.RoundTripper = &http.Transport{
			DisableKeepAlives: true,
			DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		}
		if cfg.Protocol == "fastcgi" {
			rt = fastcgiTransport{dial: dial, script: cfg.Script}
		}
		return listener{name: name, dial: dial, client: &http.Client{Timeout: 10 * time.Second, Transport: rt}}
	}
	return &app{tcp: mk("tcp", "tcp", cfg.TCP), uds: mk("unix", "unix", cfg.Socket)}
}

func (a *app) both() []listener { return []listener{a.tcp, a.uds} }

// reply is what a request got: status and body size, or the error.
type reply struct {
	status int
	bytes  int64
	err    error
}

func (r reply) String() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("%d, %d bytes", r.status, r.bytes)
}

// get requests path; the host part of the URL only fills the Host header.
func (l listener) get(path string) reply {
	resp, err := l.client.Get("http://app" + path)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return reply{status: resp.StatusCode, bytes: n, err: err}
}
