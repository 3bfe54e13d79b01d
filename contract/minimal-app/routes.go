package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const (
	maxBytes = 1 << 20 // /bytes/{n}: up to 1 MiB
	maxSleep = 60000   // /sleep/{ms}: up to a minute
)

// routes are the ones the lab's default workloads use: ping, bytes-*, sleep.
// The others (cpu, download-*) are left out on purpose; `make contract` says
// which workloads that rules out.
func routes(reg *prometheus.Registry) *http.ServeMux {
	payload := make([]byte, maxBytes)
	for i := range payload {
		payload[i] = byte(i%255) + 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"message": "pong"})
	})
	mux.HandleFunc("GET /bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := intParam(w, r, "n", maxBytes)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(payload[:n])
	})
	mux.HandleFunc("GET /sleep/{ms}", func(w http.ResponseWriter, r *http.Request) {
		ms, ok := intParam(w, r, "ms", maxSleep)
		if !ok {
			return
		}
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
			writeJSON(w, http.StatusOK, map[string]int{"slept_ms": ms})
		case <-r.Context().Done():
		}
	})
	ok := func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /readyz", ok)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Everything else: a JSON 404 (ServeMux's own is plain text).
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such route"})
	})
	return mux
}

// intParam reads path parameter name as an integer in [0, max], or answers 400.
func intParam(w http.ResponseWriter, r *http.Request, name string, max int) (int, bool) {
	v, err := strconv.Atoi(r.PathValue(name))
	if err != nil || v < 0 || v > max {
		writeJSON(w, http.StatusBadRequest, map[string]string{
			"error": fmt.Sprintf("parameter %s must be an integer from 0 to %d", name, max),
		})
		return 0, false
	}
	return v, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
