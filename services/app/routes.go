package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

const contentTypeBinary = "application/octet-stream"

// statusClientClosed is nginx's convention for "client went away before the
// answer"; it keeps cancelled sleeps distinguishable in the metrics.
const statusClientClosed = 499

// intParam parses path parameter name as an integer in [lo, hi]. On failure it
// answers 400 with a message naming the parameter and returns false.
func intParam(c *gin.Context, name string, lo, hi int64) (int64, bool) {
	raw := c.Param(name)
	v, err := strconv.ParseInt(raw, 10, 64)
	var msg string
	switch {
	case errors.Is(err, strconv.ErrRange):
		msg = fmt.Sprintf("parameter %s=%q is out of range: must be between %d and %d", name, truncatePath(raw), lo, hi)
	case err != nil:
		msg = fmt.Sprintf("parameter %s=%q is not an integer", name, truncatePath(raw))
	case v < 0 && lo >= 0:
		msg = fmt.Sprintf("parameter %s=%d must not be negative", name, v)
	case v < lo:
		msg = fmt.Sprintf("parameter %s=%d is below the minimum %d", name, v, lo)
	case v > hi:
		msg = fmt.Sprintf("parameter %s=%d exceeds the maximum %d", name, v, hi)
	default:
		return v, true
	}
	c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": msg})
	return 0, false
}

func ping(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"message": "pong"})
}

// makePayload returns deterministic, non-zero bytes (zeros could be
// special-cased by compression or sparse-file handling and skew results).
func makePayload(n int) []byte {
	b := make([]byte, n)
	fillPattern(b, 0)
	return b
}

// fillPattern writes the byte pattern for file offset off into b.
func fillPattern(b []byte, off int64) {
	for i := range b {
		b[i] = byte((off+int64(i))%255) + 1
	}
}

// bytesHandler serves slices of one payload allocated at start, so the
// measurement is transport cost, not allocation.
func bytesHandler(payload []byte) gin.HandlerFunc {
	return func(c *gin.Context) {
		n, ok := intParam(c, "n", 0, int64(len(payload)))
		if !ok {
			return
		}
		sendBytes(c, payload[:n])
	}
}

// sendBytes answers 200 with b as application/octet-stream.
func sendBytes(c *gin.Context, b []byte) {
	h := c.Writer.Header()
	h.Set("Content-Type", contentTypeBinary)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	c.Status(http.StatusOK)
	_, _ = c.Writer.Write(b)
}

// cpuCheckEvery: how many SHA-256 rounds run between two looks at whether
// the client is still there (a power of two; about 0.1-0.3 ms of work).
const cpuCheckEvery = 1024

// cpuHandler runs iterated SHA-256 under the limiter and stops as soon as
// the client has gone (nginx closes the upstream connection when its client
// leaves or its proxy_read_timeout fires): abandoned work would only delay
// everything else.
func cpuHandler(maxIter int64, lim *cpuLimiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		n, ok := intParam(c, "iterations", 1, maxIter)
		if !ok {
			return
		}
		ctx := c.Request.Context()
		if code, msg := lim.acquire(ctx); code != 0 {
			c.AbortWithStatusJSON(code, gin.H{"error": msg})
			return
		}
		defer lim.release()
		done := ctx.Done()
		var state [sha256.Size]byte
		for i := int64(0); i < n; i++ {
			if i%cpuCheckEvery == 0 {
				select {
				case <-done:
					c.AbortWithStatusJSON(statusClientClosed, gin.H{"error": "request cancelled"})
					return
				default:
				}
			}
			state = sha256.Sum256(state[:])
		}
		c.JSON(http.StatusOK, gin.H{"iterations": n, "digest": hex.EncodeToString(state[:])})
	}
}

func sleepHandler(c *gin.Context) {
	ms, ok := intParam(c, "ms", 0, maxSleepMS)
	if !ok {
		return
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		c.JSON(http.StatusOK, gin.H{"slept_ms": ms})
	case <-c.Request.Context().Done():
		// The client is gone (or the server was force-closed); nobody reads this.
		c.AbortWithStatusJSON(statusClientClosed, gin.H{"error": "request cancelled"})
	}
}

// replayHandler answers GET /replay/:bytes/:us, the route a replayed access
// log is emulated on (make load TRAFFIC=, loadgen/traffic.py): it waits the
// logged upstream time (us microseconds, at most the longest request) and
// then sends the logged number of bytes (at most the payload's), so that a
// request has its logged shape whatever app logged it.
func replayHandler(payload []byte) gin.HandlerFunc {
	return func(c *gin.Context) {
		n, ok := intParam(c, "bytes", 0, int64(len(payload)))
		if !ok {
			return
		}
		us, ok := intParam(c, "us", 0, maxSleepMS*1000)
		if !ok {
			return
		}
		if us > 0 {
			t := time.NewTimer(time.Duration(us) * time.Microsecond)
			select {
			case <-t.C:
			case <-c.Request.Context().Done():
				t.Stop()
				c.AbortWithStatusJSON(statusClientClosed, gin.H{"error": "request cancelled"})
				return
			}
		}
		sendBytes(c, payload[:n])
	}
}

// readFromWriter re-exposes net/http's io.ReaderFrom, which gin's
// ResponseWriter hides; without it http.ServeFile can never reach sendfile.
type readFromWriter struct {
	gin.ResponseWriter
}

func (w readFromWriter) ReadFrom(r io.Reader) (int64, error) {
	w.ResponseWriter.WriteHeaderNow() // let gin record the status first
	if u, ok := w.ResponseWriter.(interface{ Unwrap() http.ResponseWriter }); ok {
		if rf, ok := u.Unwrap().(io.ReaderFrom); ok {
			return rf.ReadFrom(r)
		}
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}

// serveFileWriter holds back http.ServeFile's plain-text errors (416 for an
// unsatisfiable Range, 412, 404 or 500 if the file is gone) so the handler can
// answer them as JSON like every other error; a success passes straight
// through, ReadFrom (sendfile) included.
type serveFileWriter struct {
	readFromWriter
	status int    // an error status ServeFile chose, 0 for none
	msg    []byte // its text
}

func (w *serveFileWriter) WriteHeader(code int) {
	if code >= http.StatusBadRequest {
		w.status = code
		return
	}
	w.readFromWriter.WriteHeader(code)
}

func (w *serveFileWriter) Write(b []byte) (int, error) {
	if w.status != 0 {
		if len(w.msg) < maxEchoedPath {
			w.msg = append(w.msg, b...)
		}
		return len(b), nil
	}
	return w.readFromWriter.Write(b)
}

// downloadFile is gin's c.File (http.ServeFile) with sendfile left reachable:
// over TCP the kernel copies file to socket. (net.UnixConn has no ReadFrom, so
// over the Unix socket net/http falls back to a userland copy.)
func downloadFile(path string) gin.HandlerFunc {
	return func(c *gin.Context) {
		// Set explicitly: .bin is not in Go's builtin MIME table and scratch
		// has no /etc/mime.types, so ServeFile would otherwise sniff.
		c.Header("Content-Type", contentTypeBinary)
		w := &serveFileWriter{readFromWriter: readFromWriter{c.Writer}}
		http.ServeFile(w, c.Request, path)
		if w.status != 0 {
			msg := strings.TrimSpace(string(w.msg))
			if msg == "" {
				msg = strings.ToLower(http.StatusText(w.status))
			}
			c.Writer.Header().Del("Content-Type") // ServeFile's text/plain
			c.Writer.Header().Del("X-Content-Type-Options")
			c.AbortWithStatusJSON(w.status, gin.H{"error": truncatePath(msg)})
		}
	}
}

// downloadStream copies the same file through a pooled 32 KiB buffer. The
// struct wrappers hide WriterTo/ReaderFrom on purpose so this is always a
// userland read/write loop, the contrast to downloadFile.
func downloadStream(path string, pool *sync.Pool) gin.HandlerFunc {
	return func(c *gin.Context) {
		f, err := os.Open(path)
		if err != nil {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "download file unavailable"})
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "download file unavailable"})
			return
		}
		h := c.Writer.Header()
		h.Set("Content-Type", contentTypeBinary)
		h.Set("Content-Length", strconv.FormatInt(st.Size(), 10))
		c.Status(http.StatusOK)
		bp := pool.Get().(*[]byte)
		defer pool.Put(bp)
		// A copy error means the client went away; headers are sent, so
		// there is nothing useful left to answer.
		_, _ = io.CopyBuffer(struct{ io.Writer }{c.Writer}, struct{ io.Reader }{f}, *bp)
	}
}

func healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

func readyz(r *Readiness) gin.HandlerFunc {
	return func(c *gin.Context) {
		if r.Draining() {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "shutting down"})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	}
}

// clientAddress answers GET /client: the address the app takes for the
// client's, and what it took it from (make contract's "client address" row
// compares it over the TCP port and the socket). Behind nginx the peer is
// nginx (over TCP) or has no address at all (over the socket), so the client
// is X-Real-IP, else X-Forwarded-For's first hop, else the peer's address.
// Nothing decides on it, so any peer is believed; only this route reads the
// headers: every other request stays as lean as before, on both listeners.
func clientAddress(c *gin.Context) {
	r := c.Request
	peer, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		peer = "" // a Unix socket's peer: "@" or nothing, no address
	}
	client, from := peer, "peer"
	if fwd, _, _ := strings.Cut(r.Header.Get("X-Forwarded-For"), ","); strings.TrimSpace(fwd) != "" {
		client, from = strings.TrimSpace(fwd), "X-Forwarded-For"
	}
	if real := strings.TrimSpace(r.Header.Get("X-Real-IP")); real != "" {
		client, from = real, "X-Real-IP"
	}
	c.JSON(http.StatusOK, gin.H{"client": client, "from": from, "peer": peer})
}
