package main

// The sender's pool of connections and its four timestamps, against
// servers whose answers are known: how many connections a server sees, and
// how long a request waited in the generator.

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// connServer answers after delay and counts the connections it accepted;
// closing: every answer says Connection: close; idle: it closes a kept-alive
// connection idle that long.
func connServer(t *testing.T, delay time.Duration, closing bool, idle time.Duration) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		if closing {
			w.Header().Set("Connection", "close")
		}
		w.Write([]byte("pong"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Config.IdleTimeout = idle
	// As nginx's client_header_timeout: a connection that sends no request
	// within it is closed too (nginx's default is 60 s).
	srv.Config.ReadHeaderTimeout = idle
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// 200 requests at 200/s to a path answering in 20 ms, 3 connections at
// most (4 would be needed), 2 senders (100/s each; 2 and 1 of the
// connections): the server sees the pool's 3 connections, the 2 opened
// before the run (200/s x 5 ms: 1, at least 2, one a sender) and 1 dialed
// during it by the sender with 2 (load.json counts it); each holds at most
// 50 requests a second, and the others due are overflow, counted as
// dropped, never sent.
func TestThePoolKeepsItsConnections(t *testing.T) {
	srv, conns := connServer(t, 20*time.Millisecond, false, 0)
	doc, _ := runPlan(t, knownPlan(t, 200, alone("tcp", srv.URL+"/tcp/ping", 1)),
		map[string]string{"OPENLOOP_CONNECTIONS": "3", "OPENLOOP_SENDERS": "2"})
	ph := doc["phases"].([]any)[0].(map[string]any)
	if n := conns.Load(); n != 3 || num(ph["connections_opened"]) != 1 {
		t.Errorf("the server accepted %d connections, load.json says %v dialed during the run; want 3, 1 (+2 before)", n, ph["connections_opened"])
	}
	if sent, dropped := num(ph["requests"]), num(ph["dropped_iterations"]); sent > 3*50 || sent+dropped != 200 {
		t.Errorf("%v sent and %v dropped; want at most 150 sent (3 connections x 50/s), 200 due", sent, dropped)
	}
}

// A server that closes every connection after its answer (Connection: close)
// and one that closes a kept-alive connection idle 20 ms, both sent 20
// requests 50 ms apart: no request fails. The first's connection is dialed
// again for each request (counted); the second's requests that find theirs
// closed go out again on a new one.
func TestAConnectionTheServerClosedIsDialedAgain(t *testing.T) {
	for _, c := range []struct {
		name    string
		closing bool
		idle    time.Duration
	}{{"Connection: close", true, 0}, {"idle timeout", false, 20 * time.Millisecond}} {
		srv, conns := connServer(t, 0, c.closing, c.idle)
		doc, err := runPlan(t, knownPlan(t, 20, alone("tcp", srv.URL+"/tcp/ping", 1)), nil)
		ph := doc["phases"].([]any)[0].(map[string]any)
		if err != nil || num(ph["failed_rate"]) != 0 || num(ph["requests"]) != 20 {
			t.Errorf("%s: %v, %v requests, failed %v; want 20, none failed", c.name, err, ph["requests"], ph["failed_rate"])
		}
		if n := conns.Load(); n < 20 || float64(n) != 2+num(ph["connections_opened"]) {
			t.Errorf("%s: the server accepted %d connections, load.json says %v dialed during the run (+2 before); want one a request",
				c.name, n, ph["connections_opened"])
		}
	}
}

// A server that answers each connection's first request and closes it as
// the second arrives, nothing answered: the race nginx loses when it closes
// an idle kept connection (keepalive_timeout) just as a request is written
// on it. Every request on a connection that answered before is sent again
// on a new one, a connection dialed for a request included once it has
// answered: all 20 answered.
func TestARequestOnAConnectionClosedUnderItIsSentAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for i := 0; i < 2; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if i == 0 {
						io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\npong")
					}
				}
			}()
		}
	}()
	doc, err := runPlan(t, knownPlan(t, 20, alone("tcp", "http://"+ln.Addr().String()+"/tcp/ping", 1)), nil)
	ph := doc["phases"].([]any)[0].(map[string]any)
	if err != nil || num(ph["failed_rate"]) != 0 || num(ph["requests"]) != 20 {
		t.Errorf("%v, %v requests, failed %v; want 20, none failed", err, ph["requests"], ph["failed_rate"])
	}
}

// Connections opened before the run and left idle past the server's idle
// timeout (the phase starts 300 ms in, the server closes after 50 ms): the
// first request on each finds it closed, and is sent again on a new one,
// as on a connection that had answered before (the e2e lab lost one such
// request a phase, its costs' phases coming a minute after the pools opened).
func TestAPreOpenedConnectionTheServerClosedIsDialedAgain(t *testing.T) {
	srv, _ := connServer(t, 0, false, 50*time.Millisecond)
	ph := alone("tcp", srv.URL+"/tcp/ping", 1)
	ph["start_offset_s"] = 0.3
	doc, err := runPlan(t, knownPlan(t, 20, ph), nil)
	got := doc["phases"].([]any)[0].(map[string]any)
	if err != nil || num(got["failed_rate"]) != 0 || num(got["requests"]) != 20 {
		t.Errorf("%v, %v requests, failed %v; want 20, none failed", err, got["requests"], got["failed_rate"])
	}
}

// A generator stalled 300 ms (the phase's start set 300 ms back) against a
// path answering in 2 ms: the requests due in the stall wait in the
// generator, and queue_ms (due to written) says how long: its longest the
// stall, and the due time's duration is the queue and the send's together.
// The first byte comes after the server's delay.
func TestTheQueueIsTheGeneratorsOwnWait(t *testing.T) {
	const stall = 300 * time.Millisecond
	srv, _ := connServer(t, 2*time.Millisecond, false, 0)
	p := &plan{Testid: "t", mode: "rate", rate: 50}
	ph := &phase{Name: "ping__tcp__r1", Workload: "ping", Path: "tcp", Round: 1, Phase: "measure", DurationS: 0.6,
		URL: srv.URL + "/tcp/ping"}
	clk, err := newClock()
	if err != nil {
		t.Fatal(err)
	}
	defer clk.close()
	s := newSender(context.Background(), defaults, newMetrics("t"), clk)
	rec := newPhaseRecord(ph, defaults.timeout)
	s.phase(context.Background(), p, ph, time.Now().Add(-stall), rec)
	s.wait()
	doc := phaseJSON(p, ph, rec)
	queue, due, sent, first := doc["queue_ms"].(map[string]float64), doc["scheduled_ms"].(map[string]float64),
		doc["duration_ms"].(map[string]float64), doc["first_byte_ms"].(map[string]float64)
	stallMs := float64(stall / time.Millisecond)
	if queue["max"] < stallMs || queue["max"] > stallMs*1.5 {
		t.Errorf("the longest wait in the generator %.1f ms, want the %v stall (+50%%)", queue["max"], stall)
	}
	// Each request's due-time duration is its queue and its send's; the
	// histograms hold them to 0.1%.
	if tol := due["max"] / 500; due["max"] > queue["max"]+sent["max"]+tol || due["max"] < queue["max"]+2-tol {
		t.Errorf("from the due time %.1f ms at most, want the longest queue (%.1f) and a send (2 ms to %.1f)", due["max"], queue["max"], sent["max"])
	}
	if first["p50"] < 2 || first["p50"] > sent["p50"] {
		t.Errorf("the first byte %.3f ms after the write (median), want the server's 2 ms, at most the last byte's %.3f", first["p50"], sent["p50"])
	}
}

// A connection idle longer than OPENLOOP_TIMEOUT (100 ms; requests 250 ms
// apart) against a server that keeps idle connections: it is kept, not
// closed and dialed again: the server sees the connections opened before
// the run only, and none is dialed during it.
func TestAnIdleConnectionOutlivesItsLastDeadline(t *testing.T) {
	srv, conns := connServer(t, 0, false, 0)
	doc, err := runPlan(t, knownPlan(t, 4, alone("tcp", srv.URL+"/tcp/ping", 1)),
		map[string]string{"OPENLOOP_TIMEOUT": "100ms", "OPENLOOP_SENDERS": "1"})
	ph := doc["phases"].([]any)[0].(map[string]any)
	if err != nil || num(ph["requests"]) != 4 || num(ph["failed_rate"]) != 0 {
		t.Fatalf("%v, %v requests, failed %v; want 4, none failed", err, ph["requests"], ph["failed_rate"])
	}
	if n := conns.Load(); n != 2 || num(ph["connections_opened"]) != 0 {
		t.Errorf("the server accepted %d connections, %v dialed during the run; want the 2 opened before it, none during", n, ph["connections_opened"])
	}
}
