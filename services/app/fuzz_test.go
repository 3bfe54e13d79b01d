package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRouteParams sends any string as the parameter of every route that takes
// one: the answer is 200, or 400/404 with a JSON error, never a panic or
// another status. Run briefly by `make test` (make fuzz FUZZTIME=5s), longer by
// hand: make fuzz FUZZTIME=10m.
func FuzzRouteParams(f *testing.F) {
	for _, seed := range []string{"0", "1", "-1", "16777216", "16777217", "99999999999999999999",
		"abc", "1e3", " 1", "0x10", "+5", "0010", "\x00", "../../etc/passwd", "file", "stream", "%2e%2e"} {
		for r := range uint8(4) {
			f.Add(r, seed)
		}
	}
	file := filepath.Join(f.TempDir(), "download.bin")
	if err := os.WriteFile(file, []byte("payload"), 0o644); err != nil {
		f.Fatal(err)
	}
	h := NewServer(Deps{CPUMaxIterations: 1000, DownloadFile: file})
	prefixes := []string{"/bytes/", "/cpu/", "/sleep/", "/download/"}

	f.Fuzz(func(t *testing.T, route uint8, param string) {
		prefix := prefixes[route%uint8(len(prefixes))]
		req, err := http.NewRequest(http.MethodGet, "http://app"+prefix+url.PathEscape(param), nil)
		if err != nil {
			return // not a request a client could send
		}
		// Already cancelled: a valid /sleep/:ms or /cpu/:iterations returns at
		// once (499) instead of working.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))

		switch {
		case rec.Code == http.StatusOK:
		case rec.Code == statusClientClosed && (prefix == "/sleep/" || prefix == "/cpu/"):
		case rec.Code == http.StatusBadRequest || rec.Code == http.StatusNotFound:
			var body struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == "" {
				t.Fatalf("GET %s%q: %d with body %q, want a JSON error", prefix, param, rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("GET %s%q: status %d, want 200, 400 or 404", prefix, param, rec.Code)
		}
		if rec.Code != http.StatusOK && !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && rec.Code != statusClientClosed {
			t.Fatalf("GET %s%q: %d with Content-Type %q", prefix, param, rec.Code, rec.Header().Get("Content-Type"))
		}
	})
}
