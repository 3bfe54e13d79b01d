package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// schedule is a replayed access log (make load TRAFFIC=...): the file
// loadgen/replay.py writes beside the plan, a cycle a line in send order.
// Cycle c is one logged request, sent once to each path of the stream from
// due[c], spacing[c] apart, in the cycle's order (plan.target's rule).
type schedule struct {
	due, spacing []int64 // microseconds from the phase's start
	head         []bool  // HEAD, else GET
	route        []uint8 // the plan's route index (its top routes, then "other")
	target       []string
}

// maxRoutes: route indexes above this are refused (replay.py keeps 10 and "other").
const maxRoutes = 64

// readSchedule reads name; every bad line is an error naming it.
func readSchedule(name string) (*schedule, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("the replay's schedule: %w", err)
	}
	defer f.Close()
	s := &schedule{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if err := s.add(line); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", filepath.Base(name), n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(name), err)
	}
	if len(s.due) == 0 {
		return nil, fmt.Errorf("%s: no request", filepath.Base(name))
	}
	return s, nil
}

func (s *schedule) add(line string) error {
	f := strings.Split(line, "\t")
	if len(f) != 5 {
		return fmt.Errorf("%d fields, not 5 (due_us spacing_us method route target)", len(f))
	}
	due, err1 := strconv.ParseInt(f[0], 10, 64)
	spacing, err2 := strconv.ParseInt(f[1], 10, 64)
	route, err3 := strconv.Atoi(f[3])
	switch {
	case err1 != nil || due < 0 || len(s.due) > 0 && due < s.due[len(s.due)-1]:
		return fmt.Errorf("due_us %q: not a time at or after the last", f[0])
	case err2 != nil || spacing < 1:
		return fmt.Errorf("spacing_us %q: not a time above 0", f[1])
	case f[2] != "GET" && f[2] != "HEAD":
		return fmt.Errorf("method %q: GET or HEAD", f[2])
	case err3 != nil || route < 0 || route > maxRoutes:
		return fmt.Errorf("route %q: not an index of the plan's routes", f[3])
	case !strings.HasPrefix(f[4], "/"):
		return fmt.Errorf("a target that does not start with /")
	}
	s.due = append(s.due, due)
	s.spacing = append(s.spacing, spacing)
	s.head = append(s.head, f[2] == "HEAD")
	s.route = append(s.route, uint8(route))
	s.target = append(s.target, f[4])
	return nil
}

// cycles: how many cycles are due before the phase's end (a warm-up
// replays the schedule's first seconds).
func (s *schedule) cycles(durationS float64) int {
	end := int64(durationS * 1e6)
	return sort.Search(len(s.due), func(c int) bool { return s.due[c] >= end })
}

// routeCount: one more than the highest route index it names.
func (s *schedule) routeCount() int {
	n := 0
	for _, r := range s.route {
		n = max(n, int(r)+1)
	}
	return n
}
