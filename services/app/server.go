package main

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Readiness is flipped to "draining" when shutdown begins so /readyz answers
// 503 while in-flight requests finish.
type Readiness struct {
	draining atomic.Bool
}

func (r *Readiness) SetDraining()   { r.draining.Store(true) }
func (r *Readiness) Draining() bool { return r.draining.Load() }

// Deps are the dependencies of the HTTP handler.
type Deps struct {
	Metrics          *Metrics
	Readiness        *Readiness
	DownloadFile     string
	CPUMaxIterations int64
	CPU              CPULimits // zero: defaultCPULimits
	// ErrorLog receives panic reports from the recovery middleware; nil discards them.
	ErrorLog io.Writer
}

// NewServer builds the gin engine shared by both listeners.
func NewServer(d Deps) http.Handler {
	if d.Metrics == nil {
		d.Metrics = NewMetrics()
	}
	if d.Readiness == nil {
		d.Readiness = &Readiness{}
	}
	if d.ErrorLog == nil {
		d.ErrorLog = io.Discard
	}
	if d.CPU == (CPULimits{}) {
		d.CPU = defaultCPULimits()
	}

	// gin.New, not gin.Default: no per-request logger on the measured path.
	r := gin.New()
	r.HandleMethodNotAllowed = true
	// Exact routes only: a redirect (301 for "/sleep/", a trailing slash or a
	// doubled one) would be an extra round trip in what we measure and is no
	// answer to a malformed URL; those get the JSON 404 instead (found by fuzzing).
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	// Never trust X-Forwarded-For here: nothing in the handlers needs the
	// client IP, and parsing it costs time on every request.
	r.ForwardedByClientIP = false
	_ = r.SetTrustedProxies(nil)

	// Metrics first so it also records the 500s produced by recovery.
	r.Use(d.Metrics.middleware(), recovery(d.ErrorLog))
	r.NoRoute(notFound)
	r.NoMethod(methodNotAllowed)

	payload := makePayload(maxBytes)
	bufPool := &sync.Pool{New: func() any {
		b := make([]byte, 32<<10)
		return &b
	}}

	r.GET("/ping", ping)
	r.GET("/bytes/:n", bytesHandler(payload))
	r.GET("/cpu/:iterations", cpuHandler(d.CPUMaxIterations, newCPULimiter(d.CPU)))
	r.GET("/sleep/:ms", sleepHandler)
	r.GET("/replay/:bytes/:us", replayHandler(payload))
	r.GET("/download/file", downloadFile(d.DownloadFile))
	r.GET("/download/stream", downloadStream(d.DownloadFile, bufPool))
	r.GET("/client", clientAddress)
	r.GET("/healthz", healthz)
	r.GET("/readyz", readyz(d.Readiness))
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{
		Registry:          d.Metrics.Registry,
		EnableOpenMetrics: true,
	})))
	return r
}

// recovery turns a panic into a 500 JSON answer instead of a dropped
// connection; it is the last resort, handlers validate their input.
func recovery(out io.Writer) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(out, func(c *gin.Context, _ any) {
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "internal server error"})
	})
}

const maxEchoedPath = 100

func truncatePath(p string) string {
	if len(p) > maxEchoedPath {
		return p[:maxEchoedPath] + "..."
	}
	return p
}

func notFound(c *gin.Context) {
	c.JSON(http.StatusNotFound, gin.H{"error": fmt.Sprintf("no route for %s %s", c.Request.Method, truncatePath(c.Request.URL.Path))})
}

func methodNotAllowed(c *gin.Context) {
	c.JSON(http.StatusMethodNotAllowed, gin.H{"error": fmt.Sprintf("method %s not allowed for %s", c.Request.Method, truncatePath(c.Request.URL.Path))})
}
