package main

import (
	"math"
	"strings"
	"testing"
)

// nginxLine formats a datagram the way nginx's syslog writer does with
// nohostname,tag=nginx (facility local7, severity info: <190>).
func nginxLine(uri, status, reqTime, connect, header, response, bytesSent string) string {
	return `<190>Nov 22 14:03:07 nginx: {"uri":"` + uri + `","status":"` + status +
		`","request_time":"` + reqTime + `","upstream_connect_time":"` + connect +
		`","upstream_header_time":"` + header + `","upstream_response_time":"` + response +
		`","bytes_sent":"` + bytesSent + `"}`
}

func TestParseDatagram(t *testing.T) {
	type up struct {
		v  float64
		ok bool
	}
	tests := []struct {
		name      string
		line      string
		wantErr   string // non-empty: malformed, and the error mentions it
		path      string // as testPaths classifies the line's uri
		status    int
		reqTime   float64
		upstreams [numUpstream]up
		bytes     uint64
	}{
		{
			name: "normal", line: nginxLine("/tcp-ka/ping", "200", "0.002", "0.000", "0.001", "0.002", "183"),
			path: "tcp-ka", status: 200, reqTime: 0.002,
			upstreams: [numUpstream]up{{0, true}, {0.001, true}, {0.002, true}}, bytes: 183,
		},
		{
			name: "dash upstream (not reached)", line: nginxLine("/uds/ping", "502", "0.000", "-", "-", "0.000", "337"),
			path: "uds", status: 502, reqTime: 0,
			upstreams: [numUpstream]up{{}, {}, {0, true}}, bytes: 337,
		},
		{
			name: "empty upstream (no upstream)", line: nginxLine("/healthz", "200", "0.000", "", "", "", "150"),
			path: "other", status: 200, bytes: 150,
		},
		{
			name: "attempts separated by comma", line: nginxLine("/uds-ka/sleep/5", "200", "0.010", "0.001, 0.002", "-, 0.004", "0.003, 0.005", "10"),
			path: "uds-ka", status: 200, reqTime: 0.010,
			upstreams: [numUpstream]up{{0.003, true}, {0.004, true}, {0.008, true}}, bytes: 10,
		},
		{
			name: "internal redirect separated by colon", line: nginxLine("/tcp/x", "404", "0.020", "0.001 : 0.002", "0.004 : 0.005", "0.004, 0.001 : 0.005", "99"),
			path: "tcp", status: 404, reqTime: 0.020,
			upstreams: [numUpstream]up{{0.003, true}, {0.009, true}, {0.010, true}}, bytes: 99,
		},
		{
			name: "only dashes in several attempts", line: nginxLine("/tcp/x", "504", "1.000", "-, -", "- : -", "", "0"),
			path: "tcp", status: 504, reqTime: 1, bytes: 0,
		},
		{
			name: "unknown path", line: nginxLine("/etc/passwd", "404", "0.000", "", "", "", "1"),
			path: "other", status: 404, bytes: 1,
		},
		{
			name: "prefix of a location is not that location", line: nginxLine("/tcpx/ping", "404", "0.000", "", "", "", "1"),
			path: "other", status: 404, bytes: 1,
		},
		{
			name: "bare location", line: nginxLine("/tcp", "301", "0.000", "", "", "", "1"),
			path: "tcp", status: 301, bytes: 1,
		},
		{
			name: "location with trailing slash", line: nginxLine("/uds/", "404", "0.000", "", "", "", "1"),
			path: "uds", status: 404, bytes: 1,
		},
		{
			name: "deeper path", line: nginxLine("/tcp-ka/bytes/10", "200", "0.001", "0.000", "0.001", "0.001", "10"),
			path: "tcp-ka", status: 200, reqTime: 0.001,
			upstreams: [numUpstream]up{{0, true}, {0.001, true}, {0.001, true}}, bytes: 10,
		},
		{
			name: "escaped junk uri", line: nginxLine(`/\"\u0001\\x`, "400", "0.000", "", "", "", "1"),
			path: "other", status: 400, bytes: 1,
		},
		{name: "status too big", line: nginxLine("/tcp/", "999", "0.000", "", "", "", "1"), path: "tcp", status: 0, bytes: 1},
		{name: "status too small", line: nginxLine("/tcp/", "099", "0.000", "", "", "", "1"), path: "tcp", status: 0, bytes: 1},
		{name: "status not a number", line: nginxLine("/tcp/", "abc", "0.000", "", "", "", "1"), path: "tcp", status: 0, bytes: 1},
		{name: "status four digits", line: nginxLine("/tcp/", "2000", "0.000", "", "", "", "1"), path: "tcp", status: 0, bytes: 1},
		{name: "no header at all", line: `{"uri":"/uds","status":"200","request_time":"0.5","bytes_sent":"7"}`, path: "uds", status: 200, reqTime: 0.5, bytes: 7},
		{name: "trailing newline", line: nginxLine("/uds", "200", "0.000", "", "", "", "1") + "\n", path: "uds", status: 200, bytes: 1},

		{name: "malformed json", line: `<190>Nov 22 14:03:07 nginx: {"uri":"/tcp/","status":"200"`, wantErr: "json"},
		{name: "no json at all", line: `<190>Nov 22 14:03:07 nginx: GET /tcp/ 200`, wantErr: "no '{'"},
		{name: "empty datagram", line: ``, wantErr: "no '{'"},
		{name: "numbers not strings", line: `<190>x: {"uri":"/tcp","status":200,"request_time":"0.1","bytes_sent":"1"}`, wantErr: "json"},
		{name: "trailing garbage", line: nginxLine("/tcp", "200", "0.000", "", "", "", "1") + " x", wantErr: "json"},
		{name: "bad request_time", line: nginxLine("/tcp", "200", "abc", "", "", "", "1"), wantErr: "request_time"},
		{name: "missing request_time", line: nginxLine("/tcp", "200", "", "", "", "", "1"), wantErr: "request_time"},
		{name: "negative request_time", line: nginxLine("/tcp", "200", "-0.1", "", "", "", "1"), wantErr: "request_time"},
		{name: "NaN request_time", line: nginxLine("/tcp", "200", "NaN", "", "", "", "1"), wantErr: "request_time"},
		{name: "exponent request_time", line: nginxLine("/tcp", "200", "1e3", "", "", "", "1"), wantErr: "request_time"},
		{name: "bad upstream part", line: nginxLine("/tcp", "200", "0.001", "0.001, x", "", "", "1"), wantErr: "upstream_connect_time"},
		{name: "bad upstream header", line: nginxLine("/tcp", "200", "0.001", "", "0.0.1", "", "1"), wantErr: "upstream_header_time"},
		{name: "bad bytes_sent", line: nginxLine("/tcp", "200", "0.001", "", "", "", "-1"), wantErr: "bytes_sent"},
		{name: "missing bytes_sent", line: `{"uri":"/tcp","status":"200","request_time":"0.1"}`, wantErr: "bytes_sent"},
		// Implausible values (issue 14): anyone on the lab network can send
		// syslog, and one such line would poison a sum until restart.
		{name: "308-digit request_time", line: nginxLine("/tcp", "200", "9"+strings.Repeat("9", 307), "", "", "", "1"), wantErr: "request_time"},
		{name: "request_time over the limit", line: nginxLine("/tcp", "200", "86401.000", "", "", "", "1"), wantErr: "request_time"},
		{name: "upstream time over the limit", line: nginxLine("/tcp", "200", "0.001", "0.001", "0.001, 99999999", "", "1"), wantErr: "upstream_header_time"},
		{name: "bytes_sent 2^64-1", line: nginxLine("/tcp", "200", "0.001", "", "", "", "18446744073709551615"), wantErr: "bytes_sent"},
		{name: "bytes_sent over the limit", line: nginxLine("/tcp", "200", "0.001", "", "", "", "1099511627777"), wantErr: "bytes_sent"},
		{name: "request_time at the limit", line: nginxLine("/tcp", "200", "86400.000", "", "", "", "1099511627776"), path: "tcp", status: 200, reqTime: 86400, bytes: 1 << 40},
	}
	var scratch logLine
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := parseDatagram([]byte(tc.line), &scratch)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if path := testPaths.names[testPaths.classify(rec.uri)]; path != tc.path || rec.status != tc.status || rec.bytesSent != tc.bytes || !near(rec.requestTime, tc.reqTime) {
				t.Errorf("got path=%v status=%d bytes=%d request_time=%v; want %v %d %d %v",
					rec.uri, rec.status, rec.bytesSent, rec.requestTime, tc.path, tc.status, tc.bytes, tc.reqTime)
			}
			for u := range numUpstream {
				if rec.hasUpstream[u] != tc.upstreams[u].ok || !near(rec.upstream[u], tc.upstreams[u].v) {
					t.Errorf("%s = %v (observed %v), want %v (observed %v)", upstreamFields[u],
						rec.upstream[u], rec.hasUpstream[u], tc.upstreams[u].v, tc.upstreams[u].ok)
				}
			}
		})
	}
}

// TestParseDatagramResetsScratch: a field absent from a line must not keep
// the previous line's value.
func TestParseDatagramResetsScratch(t *testing.T) {
	var scratch logLine
	if _, err := parseDatagram([]byte(nginxLine("/tcp", "200", "0.1", "0.1", "0.1", "0.1", "1")), &scratch); err != nil {
		t.Fatal(err)
	}
	rec, err := parseDatagram([]byte(`{"uri":"/uds","status":"200","request_time":"0.2","bytes_sent":"2"}`), &scratch)
	if err != nil {
		t.Fatal(err)
	}
	if rec.hasUpstream != [numUpstream]bool{} {
		t.Errorf("upstream times leaked from the previous line: %+v", rec)
	}
}

// testPaths are the lab's first four paths.
var testPaths = newPathSet([]string{"tcp", "uds", "tcp-ka", "uds-ka"})

func TestClassifyPath(t *testing.T) {
	for uri, want := range map[string]string{
		"/tcp": "tcp", "/tcp/": "tcp", "/tcp/ping": "tcp", "/tcp?x=1": "tcp",
		"/uds/ping": "uds", "/tcp-ka/bytes/10": "tcp-ka", "/uds-ka/": "uds-ka",
		"": "other", "/": "other", "tcp": "other", "/TCP": "other", "/tcp-kab": "other",
		"/other": "other", "/x/tcp": "other",
	} {
		if got := testPaths.names[testPaths.classify(uri)]; got != want {
			t.Errorf("classifyPath(%q) = %v, want %v", uri, got, want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
