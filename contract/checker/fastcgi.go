package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// fastcgiTransport asks an app that speaks FastCGI (APP_PROTOCOL=fastcgi,
// PHP-FPM) as nginx does: one request per connection (fastcgi_keep_conn off,
// nginx's /tcp/ and /uds/), the parameters of nginx/templates/pass/fastcgi/
// params.conf.template, and the CGI response read back as an HTTP one. So
// every clause asks a FastCGI app what it asks an HTTP one. GET only: the
// lab's workloads send no body.
type fastcgiTransport struct {
	dial   func(ctx context.Context) (net.Conn, error)
	script string // SCRIPT_FILENAME: the front controller, APP_FASTCGI_SCRIPT
}

// FastCGI 1.0 record types and the responder role.
const (
	fcgiBeginRequest = 1
	fcgiEndRequest   = 3
	fcgiParams       = 4
	fcgiStdin        = 5
	fcgiStdout       = 6
	fcgiStderr       = 7
	fcgiResponder    = 1
	fcgiRequestID    = 1
)

func (t fastcgiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || (req.Body != nil && req.Body != http.NoBody) {
		return nil, fmt.Errorf("FastCGI: the checker sends GET without a body, not %s", req.Method)
	}
	conn, err := t.dial(req.Context())
	if err != nil {
		return nil, err
	}
	if d, ok := req.Context().Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	if _, err := conn.Write(fcgiRequest(req, t.script, false)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("FastCGI: sending the request: %w", err)
	}
	br := bufio.NewReader(&fcgiStdoutReader{r: bufio.NewReader(conn)})
	header, err := textproto.NewReader(br).ReadMIMEHeader()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("FastCGI: reading the CGI response's headers: %w", err)
	}
	status := http.StatusOK
	if s := header.Get("Status"); s != "" {
		code, err := strconv.Atoi(strings.Fields(s + " x")[0])
		if err != nil || code < 100 || code > 999 {
			conn.Close()
			return nil, fmt.Errorf("FastCGI: CGI Status header %q", s)
		}
		status = code
		header.Del("Status")
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header(header), Body: readCloser{br, conn}, ContentLength: -1, Request: req,
	}, nil
}

// fcgiKeepConn is FCGI_BEGIN_REQUEST's flag that keeps the connection open
// after the response (nginx's fastcgi_keep_conn on, its pooled paths).
const fcgiKeepConn = 1

// fcgiRequest is req as nginx sends it to a FastCGI app: the parameters of
// nginx/templates/pass/fastcgi/params.conf.template and an empty body; keep
// asks the app to keep the connection for the next request.
func fcgiRequest(req *http.Request, script string, keep bool) []byte {
	// The request's path as nginx passes it, its prefix (/tcp/) already gone.
	uri := req.URL.RequestURI()
	params := [][2]string{
		{"SCRIPT_FILENAME", script},
		{"PATH_INFO", req.URL.Path},
		{"REQUEST_URI", uri},
		{"QUERY_STRING", req.URL.RawQuery},
		{"REQUEST_METHOD", req.Method},
		{"CONTENT_TYPE", ""},
		{"CONTENT_LENGTH", ""},
		{"SERVER_PROTOCOL", "HTTP/1.1"},
		{"GATEWAY_INTERFACE", "CGI/1.1"},
		{"REMOTE_ADDR", remoteAddr(req)},
		{"SERVER_NAME", req.Host},
		{"HTTP_HOST", req.Host},
	}
	// Request headers as nginx passes them (the pitfalls' X-Real-IP, ...).
	for k, v := range req.Header {
		params = append(params, [2]string{"HTTP_" + strings.ToUpper(strings.ReplaceAll(k, "-", "_")), strings.Join(v, ", ")})
	}
	var msg []byte
	var flags byte // 0: the app closes the connection after the response
	if keep {
		flags = fcgiKeepConn
	}
	msg = appendRecord(msg, fcgiBeginRequest, []byte{0, fcgiResponder, flags, 0, 0, 0, 0, 0})
	msg = appendRecord(msg, fcgiParams, encodeParams(params))
	msg = appendRecord(msg, fcgiParams, nil) // end of the parameters
	msg = appendRecord(msg, fcgiStdin, nil)  // an empty body
	return msg
}

type readCloser struct {
	io.Reader
	io.Closer
}

// appendRecord appends one record (content up to 65535 bytes, padded to 8).
func appendRecord(b []byte, typ byte, content []byte) []byte {
	pad := (8 - len(content)%8) % 8
	b = append(b, 1, typ, 0, fcgiRequestID, byte(len(content)>>8), byte(len(content)), byte(pad), 0)
	b = append(b, content...)
	return append(b, make([]byte, pad)...)
}

// encodeParams writes name-value pairs with FastCGI's 1- or 4-byte lengths.
func encodeParams(params [][2]string) []byte {
	var b []byte
	size := func(n int) {
		if n < 128 {
			b = append(b, byte(n))
		} else {
			b = binary.BigEndian.AppendUint32(b, uint32(n)|1<<31)
		}
	}
	for _, p := range params {
		size(len(p[0]))
		size(len(p[1]))
		b = append(b, p[0]...)
		b = append(b, p[1]...)
	}
	return b
}

// fcgiStdoutReader reads the app's FCGI_STDOUT stream out of its records:
// stderr records are skipped, the end of the request is the end of the stream.
type fcgiStdoutReader struct {
	r    *bufio.Reader
	left int // content bytes left in the current stdout record
	pad  int // padding after it
	done bool
	err  error // sticky: after a bad record nothing more is read
}

func (f *fcgiStdoutReader) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.read(p)
	if err != nil && err != io.EOF {
		f.err = err
	}
	return n, err
}

func (f *fcgiStdoutReader) read(p []byte) (int, error) {
	for f.left == 0 {
		if f.done {
			return 0, io.EOF
		}
		if _, err := f.r.Discard(f.pad); err != nil {
			return 0, unexpected(err)
		}
		var h [8]byte
		if _, err := io.ReadFull(f.r, h[:]); err != nil {
			return 0, unexpected(err)
		}
		if h[0] != 1 {
			return 0, fmt.Errorf("FastCGI: record version %d, want 1 (does the app speak FastCGI?)", h[0])
		}
		n, pad := int(binary.BigEndian.Uint16(h[4:6])), int(h[6])
		switch h[1] {
		case fcgiStdout:
			f.left, f.pad = n, pad
		case fcgiEndRequest:
			f.done = true
			_, _ = f.r.Discard(n + pad)
		case fcgiStderr:
			f.pad = n + pad
		default:
			return 0, fmt.Errorf("FastCGI: unexpected record type %d", h[1])
		}
	}
	if len(p) > f.left {
		p = p[:f.left]
	}
	n, err := f.r.Read(p)
	f.left -= n
	if err != nil {
		return n, unexpected(err)
	}
	return n, nil
}

// unexpected: a connection that ends inside a response is an error, not EOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// remoteAddr is REMOTE_ADDR as nginx sends it ($remote_addr): the client's
// address, which the pitfalls step says in X-Real-IP; else the checker's own.
func remoteAddr(req *http.Request) string {
	if v := req.Header.Get("X-Real-IP"); v != "" {
		return v
	}
	return "127.0.0.1"
}
