package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// raw sends one request as written (what Go's client would refuse or fix up)
// and returns nginx's answer.
func raw(t *testing.T, s stack, request string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.nginxURL, "http://"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.60q: %v", request, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// jsonError returns the "error" of a JSON body, or "" if it is not one.
func jsonError(body string) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e) != nil {
		return ""
	}
	return e.Error
}

// Every answer nginx writes itself is JSON, with its status kept (issue 14:
// nginx's 301/400/405/413/414/501/505 were HTML pages).
func TestNginxOwnAnswersAreJSON(t *testing.T) {
	s := startStack(t)
	body2m := strings.Repeat("x", 2<<20)
	cases := []struct {
		name, request string
		status        int
	}{
		{"bad request line", "GET /tcp/ping HTTP/1.1 junk\r\nHost: x\r\n\r\n", 400},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"no Host", "GET /tcp/ping HTTP/1.1\r\n\r\n", 400},
		{"header over 8 KiB", "GET /tcp/ping HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("y", 9000) + "\r\n\r\n", 400},
		{"TRACE", "TRACE /tcp/ping HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"body over 1 MiB", "POST /tcp/ping HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(body2m)) + "\r\n\r\n" + body2m, 413},
		{"URI over 8 KiB", "GET /tcp/bytes/" + strings.Repeat("9", 9000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
		{"unknown Transfer-Encoding", "POST /tcp/ping HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"HTTP/2.0 request line", "GET /tcp/ping HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"location without its slash", "GET /tcp HTTP/1.1\r\nHost: x\r\n\r\n", 301},
		{"the internal error location", "GET /_nginx_error HTTP/1.1\r\nHost: x\r\n\r\n", 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := raw(t, s, tc.request)
			if resp.StatusCode != tc.status || jsonError(body) == "" {
				t.Errorf("%d %.200q, want %d with a JSON error", resp.StatusCode, body, tc.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	// The redirect still says where to go.
	resp, _ := raw(t, s, "GET /uds-ka HTTP/1.1\r\nHost: x\r\n\r\n")
	if loc := resp.Header.Get("Location"); !strings.HasSuffix(loc, "/uds-ka/") {
		t.Errorf("/uds-ka: Location %q, want .../uds-ka/", loc)
	}
}

// nginx's proxy timeout is a JSON 504 that says so, not the 502 "down or
// restarting" (issue 14). The template's 30 s read timeout is shortened to
// 1 s here so the test need not wait it out.
func TestProxyTimeoutIs504(t *testing.T) {
	s := startStackWith(t, options{edit: func(t *testing.T, conf string) string {
		const from, to = "proxy_read_timeout 30s;", "proxy_read_timeout 1s;"
		if !strings.Contains(conf, from) {
			t.Fatalf("the template has no %q to shorten", from)
		}
		return strings.Replace(conf, from, to, 1)
	}})
	for _, path := range []string{"tcp", "uds-ka"} {
		resp, err := http.Get(s.nginxURL + "/" + path + "/sleep/3000")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if msg := jsonError(string(body)); resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(msg, "timed out") {
			t.Errorf("/%s/sleep/3000 past a 1 s proxy_read_timeout: %d %q, want 504 with a JSON error saying it timed out", path, resp.StatusCode, body)
		}
	}
}

// Beyond NGINX_MAX_IN_FLIGHT requests in flight nginx answers a JSON 503 at
// once instead of running out of connections (issue 14: resets at ~1900),
// at a small scale: 16 in flight, 128 connections per worker, 60 clients.
func TestConnectionCeiling(t *testing.T) {
	const limit, clients = 16, 60
	s := startStackWith(t, options{vars: map[string]string{
		"NGINX_WORKER_CONNECTIONS": "128",
		"NGINX_MAX_IN_FLIGHT":      strconv.Itoa(limit),
	}})
	// One connection per client, all opened at once.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make(chan answer, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"tcp", "uds", "tcp-ka", "uds-ka"}[i%4]
			resp, err := client.Get(s.nginxURL + "/" + path + "/sleep/1500")
			if err != nil {
				answers <- answer{err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{status: resp.StatusCode, body: string(b)}
		}()
	}
	wg.Wait()
	close(answers)
	counts := map[int]int{}
	for a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("no HTTP answer: %v", a.err)
		case a.status == http.StatusServiceUnavailable:
			if !strings.Contains(jsonError(a.body), "in flight") {
				t.Errorf("503 body %q: want nginx's JSON error naming the limit", a.body)
			}
		case a.status != http.StatusOK:
			t.Errorf("status %d %q", a.status, a.body)
		}
		counts[a.status]++
	}
	if counts[http.StatusOK] != limit || counts[http.StatusServiceUnavailable] != clients-limit {
		t.Errorf("%d clients at once with %d allowed in flight: statuses %v, want %d x 200 and %d x 503",
			clients, limit, counts, limit, clients-limit)
	}
	// The ceiling lets go: every path serves again.
	for _, path := range []string{"tcp", "uds", "tcp-ka", "uds-ka"} {
		if _, err := get(http.DefaultClient, s.nginxURL+"/"+path+"/ping"); err != nil {
			t.Error(err)
		}
	}
}

// nginxTempBytes sums the sizes of the temp files nginx's workers hold open
// under its proxy temp folder (nginx unlinks them at once, so only /proc
// sees them).
func nginxTempBytes(t *testing.T, s stack) int64 {
	t.Helper()
	procs, _ := os.ReadDir("/proc")
	var total int64
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(s.nginx.Process.Pid) {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			link := filepath.Join("/proc", p.Name(), "fd", fd.Name())
			target, err := os.Readlink(link)
			if err != nil || !strings.HasPrefix(target, filepath.Join(s.dir, "proxy")) {
				continue
			}
			if st, err := os.Stat(link); err == nil {
				total += st.Size()
			}
		}
	}
	return total
}

// A client that reads slowly makes nginx wait (backpressure to the app), not
// spool the response to temp files (issue 14: 50 slow readers of 16 MiB held
// 641 MiB of temp files, which in compose are nginx's memory).
func TestSlowReaderBackpressure(t *testing.T) {
	s := startStack(t)
	const size = 16 << 20
	for _, path := range []string{"tcp", "uds-ka"} {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/%s/bytes/%d", s.nginxURL, path, size), nil)
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// Read nothing for a while: nginx has the app's answer at its disposal.
			var held int64
			for range 15 {
				time.Sleep(100 * time.Millisecond)
				held = max(held, nginxTempBytes(t, s))
			}
			n, err := io.Copy(io.Discard, resp.Body)
			if err != nil || n != size {
				t.Fatalf("read %d bytes (%v), want %d", n, err, size)
			}
			if held > 0 {
				t.Errorf("nginx held %d bytes in temp files for one slow reader, want 0 (backpressure)", held)
			}
		})
	}
}
