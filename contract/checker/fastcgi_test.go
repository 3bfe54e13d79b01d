package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// A FastCGI app (net/http/fcgi, one request per connection as PHP-FPM with
// fastcgi_keep_conn off) keeps every clause when asked in FastCGI, the 1 MiB
// workload's body spanning many records included.
func TestCheckPassesAFastCGIApp(t *testing.T) {
	got := clauses(t, startApp(t, flaws{fastcgi: true}))
	for _, name := range failing(got) {
		t.Errorf("%s: %s", name, got[name].Why)
	}
	if c := got[servesName]; !strings.Contains(c.Why, "tcp FastCGI GET /ping: 200") || !strings.Contains(c.Why, "unix FastCGI GET /ping: 200") {
		t.Errorf("serves: %s", c.Why)
	}
	if c := got["route /bytes/1048576"]; !c.Pass || !strings.Contains(c.Why, "1048576 bytes") {
		t.Errorf("1 MiB route: %+v", c)
	}
}

// Asked in the wrong protocol, an app does not serve (nginx would answer 502),
// and a FastCGI request naming another script gets the app's 404 on every route.
func TestFastCGIMismatches(t *testing.T) {
	a := startApp(t, flaws{fastcgi: true})
	a.cfg.Protocol = "http"
	if c := clauses(t, a)[servesName]; c.Pass {
		t.Errorf("a FastCGI app asked in HTTP passed: %s", c.Why)
	}
	h := startApp(t, flaws{})
	h.cfg.Protocol, h.cfg.Script = "fastcgi", "/app/index.php"
	if c := clauses(t, h)[servesName]; c.Pass || !strings.Contains(c.Why, "FastCGI") {
		t.Errorf("an HTTP app asked in FastCGI: %+v", c)
	}
	a = startApp(t, flaws{fastcgi: true})
	a.cfg.Script = "/app/other.php"
	if c := clauses(t, a)["route /ping"]; c.Pass || !strings.Contains(c.Why, "404") {
		t.Errorf("another script: %+v", c)
	}
}

// respond serves one connection with the given records after reading the
// request up to its empty FCGI_STDIN record.
func respond(t *testing.T, records []byte) fastcgiTransport {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			var h [8]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				return
			}
			n := int(h[4])<<8 | int(h[5]) + int(h[6])
			if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
				return
			}
			if h[1] == fcgiStdin && h[4] == 0 && h[5] == 0 {
				break
			}
		}
		c.Write(records)
	}()
	var d net.Dialer
	return fastcgiTransport{script: "/app/index.php", dial: func(ctx context.Context) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", l.Addr().String())
	}}
}

func get(t *testing.T, rt http.RoundTripper) (*http.Response, string, error) {
	t.Helper()
	resp, err := (&http.Client{Transport: rt}).Get("http://app/ping")
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// The app's stderr is skipped, padding honoured, a Status header is the status.
func TestFastCGIResponse(t *testing.T) {
	var r []byte
	r = appendRecord(r, fcgiStderr, []byte("PHP Warning: something"))
	r = appendRecord(r, fcgiStdout, []byte("Status: 418 I'm a teapot\r\nContent-Type: text/plain\r\n\r\nhel"))
	r = appendRecord(r, fcgiStdout, []byte("lo"))
	r = appendRecord(r, fcgiStdout, nil)
	r = appendRecord(r, fcgiEndRequest, make([]byte, 8))
	resp, body, err := get(t, respond(t, r))
	if err != nil || resp.StatusCode != 418 || body != "hello" || resp.Header.Get("Content-Type") != "text/plain" || resp.Header.Get("Status") != "" {
		t.Errorf("got %v %q %v, want 418 \"hello\" text/plain", resp, body, err)
	}
}

// A connection that ends inside the response is an error, never a short body.
func TestFastCGITruncated(t *testing.T) {
	r := appendRecord(nil, fcgiStdout, []byte("Content-Type: text/plain\r\n\r\nhel"))
	if _, body, err := get(t, respond(t, r)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated response: body %q, error %v, want unexpected EOF", body, err)
	}
	if _, _, err := get(t, respond(t, []byte("HTTP/1.1 200 OK\r\n\r\n"))); err == nil || !strings.Contains(err.Error(), "does the app speak FastCGI") {
		t.Errorf("an HTTP answer: %v", err)
	}
}
