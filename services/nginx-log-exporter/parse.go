package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// pathID is the bounded "path" label: an index into a pathSet, the lab's
// paths (catalogue.json) plus "other". A raw URI never becomes a label.
type pathID uint8

// maxPaths bounds the label's values (and pathID's range).
const maxPaths = 64

// pathSet maps a URI's first segment to its path.
type pathSet struct {
	names []string // by pathID; the last is "other"
	ids   map[string]pathID
}

func newPathSet(names []string) *pathSet {
	ps := &pathSet{names: append(append([]string(nil), names...), "other"), ids: map[string]pathID{}}
	for i, n := range names {
		ps.ids[n] = pathID(i)
	}
	return ps
}

func (ps *pathSet) other() pathID { return pathID(len(ps.names) - 1) }

// classify maps "/tcp", "/tcp/" and "/tcp/anything" to tcp (likewise for the
// other paths); everything else, "/tcpx" included, is other.
func (ps *pathSet) classify(uri string) pathID {
	if !strings.HasPrefix(uri, "/") {
		return ps.other()
	}
	seg := uri[1:]
	if i := strings.IndexAny(seg, "/?"); i >= 0 {
		seg = seg[:i]
	}
	if id, ok := ps.ids[seg]; ok {
		return id
	}
	return ps.other()
}

// The three $upstream_*_time variables, in label/metric order.
const (
	upConnect = iota
	upHeader
	upResponse
	numUpstream
)

// logLine is the lab_json log_format: every value is a JSON string.
type logLine struct {
	URI                  string `json:"uri"`
	Status               string `json:"status"`
	RequestTime          string `json:"request_time"`
	UpstreamConnectTime  string `json:"upstream_connect_time"`
	UpstreamHeaderTime   string `json:"upstream_header_time"`
	UpstreamResponseTime string `json:"upstream_response_time"`
	BytesSent            string `json:"bytes_sent"`
}

// record is one parsed request, ready to be applied to the metrics.
type record struct {
	uri         string // classified by the metrics' pathSet
	status      int    // 100..599, or 0 for "invalid"
	requestTime float64
	upstream    [numUpstream]float64
	hasUpstream [numUpstream]bool // false: no upstream / not reached ("" or "-")
	bytesSent   uint64
}

var errNoJSON = errors.New("no '{' in datagram")

// parseDatagram parses one syslog datagram such as
//
//	<190>Nov 22 14:03:07 nginx: {"uri":"/tcp-ka/ping","status":"200",...}
//
// The RFC 3164 header is skipped: the JSON starts at the first '{' (the header
// cannot contain one). scratch is reused between calls to save an allocation.
// Any error means the line is malformed and none of it may be counted.
func parseDatagram(b []byte, scratch *logLine) (record, error) {
	var rec record
	i := bytes.IndexByte(b, '{')
	if i < 0 {
		return rec, errNoJSON
	}
	*scratch = logLine{} // Unmarshal leaves absent fields untouched.
	if err := json.Unmarshal(b[i:], scratch); err != nil {
		return rec, fmt.Errorf("json: %w", err)
	}
	l := scratch

	var err error
	if rec.requestTime, err = parseSeconds(l.RequestTime); err != nil {
		return rec, fmt.Errorf("request_time: %w", err)
	}
	for j, v := range [numUpstream]string{l.UpstreamConnectTime, l.UpstreamHeaderTime, l.UpstreamResponseTime} {
		if rec.upstream[j], rec.hasUpstream[j], err = parseUpstreamTimes(v); err != nil {
			return rec, fmt.Errorf("%s: %w", upstreamFields[j], err)
		}
	}
	if rec.bytesSent, err = strconv.ParseUint(l.BytesSent, 10, 64); err != nil {
		return rec, fmt.Errorf("bytes_sent: %q is not a non-negative integer", l.BytesSent)
	}
	if rec.bytesSent > maxBytesSent {
		return rec, fmt.Errorf("bytes_sent: %d is over %d, implausible for one response", rec.bytesSent, uint64(maxBytesSent))
	}
	rec.uri = l.URI
	rec.status = parseStatus(l.Status)
	return rec, nil
}

var upstreamFields = [numUpstream]string{"upstream_connect_time", "upstream_header_time", "upstream_response_time"}

// parseStatus returns the code for exactly three digits in 100..599, else 0.
func parseStatus(s string) int {
	if len(s) != 3 {
		return 0
	}
	n := 0
	for i := 0; i < 3; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	if n < 100 || n > 599 {
		return 0
	}
	return n
}

// parseUpstreamTimes sums an nginx $upstream_*_time value. nginx writes one
// time per upstream attempt, separated by ", " (next server in the same
// upstream group) or " : " (internal redirect to another group); "-" marks an
// attempt that did not get that far, "" means no upstream at all. ok is false
// when there is no number at all: then nothing must be observed.
func parseUpstreamTimes(s string) (sum float64, ok bool, err error) {
	for s != "" {
		part := s
		if i := strings.IndexAny(s, ",:"); i >= 0 {
			part, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		part = strings.TrimSpace(part)
		if part == "" || part == "-" {
			continue
		}
		v, err := parseSeconds(part)
		if err != nil {
			return 0, false, err
		}
		sum += v
		ok = true
	}
	return sum, ok, nil
}

// Upper bounds of a plausible line. syslog has no authentication, so anyone
// on the lab network can send a line; without a bound one huge number makes
// a sum +Inf (or adds 1.8e19 bytes) until the exporter restarts. No lab
// request lasts a day (nginx's own timeouts end it long before) or sends a
// TiB (the app's largest answer is a 1 GiB download).
const (
	maxSeconds   = 86400
	maxBytesSent = 1 << 40
)

// parseSeconds accepts only what nginx writes: digits with an optional
// fraction ("0.001", "12"), up to maxSeconds. Signs, exponents, "NaN", "Inf"
// and "" are refused.
func parseSeconds(s string) (float64, error) {
	digits, dot := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return 0, fmt.Errorf("%q is not a number of seconds", s)
		}
	}
	if digits == 0 {
		return 0, fmt.Errorf("%q is not a number of seconds", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v > maxSeconds {
		return 0, fmt.Errorf("%.20q is over %d s, implausible for one request", s, maxSeconds)
	}
	return v, nil
}
