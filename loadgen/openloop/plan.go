package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// The plan's pseudo-path of make load's interleaved stream (loadgen/plan.py's MIX).
const mix = "mix"

// plan is results/<run>/plan.json as loadgen/plan.py writes it: the run's
// settings and its phases in run order. Fields this program does not use
// are kept as they are for load.json.
type plan struct {
	Testid   string                     `json:"testid"`
	Settings map[string]json.RawMessage `json:"settings"`
	URLs     map[string]string          `json:"urls"`
	GapS     float64                    `json:"gap_s"`
	Idle     json.RawMessage            `json:"idle"`
	Describe string                     `json:"describe"`
	Phases   []phase                    `json:"phases"`

	mode string
	rate int
	seed uint64
}

// phase is one phase of the plan; raw holds every field plan.py gave it.
type phase struct {
	Name         string            `json:"name"`
	Workload     string            `json:"workload"`
	Path         string            `json:"path"`
	Round        int               `json:"round"`
	Phase        string            `json:"phase"`
	StartOffsetS float64           `json:"start_offset_s"`
	DurationS    float64           `json:"duration_s"`
	Rate         int               `json:"rate"`
	Connections  int               `json:"connections"`
	Step         int               `json:"step"`
	BlockS       int               `json:"block_s"`
	Paths        []string          `json:"paths"`
	URL          string            `json:"url"`
	URLs         map[string]string `json:"urls"`
	Progress     string            `json:"progress"`
	Traffic      string            `json:"traffic"`

	raw    map[string]json.RawMessage
	sched  *schedule // a replayed log's (Traffic), read with the plan
	routes []string  // its routes, as the plan's settings.traffic names them
}

// Fields of a planned phase that say how to reach it, not what it measured:
// load.json leaves them out (as load.schema.json says).
var planOnly = []string{"url", "urls", "progress", "socket", "traffic"}

func (p *phase) UnmarshalJSON(b []byte) error {
	type plain phase
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &p.raw); err != nil {
		return err
	}
	for _, k := range planOnly {
		delete(p.raw, k)
	}
	return nil
}

var phaseName = regexp.MustCompile(`^[a-z0-9-]+__[a-z0-9-]+__(s[0-9]+__)?r[0-9]+$`)

func readPlan(name string) (*plan, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("PLAN: %w", err)
	}
	var p plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("PLAN %s: not a plan: %w", name, err)
	}
	for k, dst := range map[string]any{"mode": &p.mode, "rate": &p.rate, "seed": &p.seed} {
		if raw, ok := p.Settings[k]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, fmt.Errorf("PLAN %s: settings.%s: %w", name, k, err)
			}
		}
	}
	if err := p.check(name); err != nil {
		return nil, err
	}
	return &p, p.readSchedules(name)
}

// readSchedules: each replay phase's schedule, read once per file, and the
// routes its indexes name (settings.traffic.routes).
func (p *plan) readSchedules(name string) error {
	var tr struct {
		Routes []string `json:"routes"`
	}
	if raw, ok := p.Settings["traffic"]; ok {
		if err := json.Unmarshal(raw, &tr); err != nil {
			return fmt.Errorf("PLAN %s: settings.traffic: %w", name, err)
		}
	}
	read := map[string]*schedule{}
	for i := range p.Phases {
		ph := &p.Phases[i]
		if ph.Traffic == "" {
			continue
		}
		if read[ph.Traffic] == nil {
			s, err := readSchedule(filepath.Join(filepath.Dir(name), filepath.Base(ph.Traffic)))
			if err != nil {
				return fmt.Errorf("PLAN %s: phase %s: %w", name, ph.Name, err)
			}
			if n := s.routeCount(); n > len(tr.Routes) {
				return fmt.Errorf("PLAN %s: phase %s: its schedule names route %d, settings.traffic.routes has %d",
					name, ph.Name, n-1, len(tr.Routes))
			}
			read[ph.Traffic] = s
		}
		ph.sched, ph.routes = read[ph.Traffic], tr.Routes
	}
	return nil
}

// route: request i's route index in the plan's routes (-1: not a replay).
func (ph *phase) route(i int) int {
	if ph.sched == nil {
		return -1
	}
	return int(ph.sched.route[i/len(ph.Paths)])
}

// check refuses what this generator cannot run: it holds fixed arrival
// rates (make load, make sweep of rates); flat out is wrk's and oha's.
func (p *plan) check(name string) error {
	if p.mode != "rate" && p.mode != "sweep" {
		return fmt.Errorf("PLAN %s: MODE=%q: openloop runs fixed rates (rate, sweep); make max runs wrk or oha", name, p.mode)
	}
	if p.Testid == "" || len(p.Phases) == 0 {
		return fmt.Errorf("PLAN %s: no testid or no phases", name)
	}
	for i := range p.Phases {
		ph := &p.Phases[i]
		switch {
		case !phaseName.MatchString(ph.Name):
			return fmt.Errorf("PLAN %s: phase %d: name %q is not <workload>__<path>__r<round>", name, i, ph.Name)
		case ph.Connections > 0:
			return fmt.Errorf("PLAN %s: phase %s: a sweep of connections runs flat out: wrk's, not openloop's", name, ph.Name)
		case p.rateOf(ph) < 1 || ph.DurationS <= 0:
			return fmt.Errorf("PLAN %s: phase %s: no rate or no duration", name, ph.Name)
		case ph.Path == mix && (len(ph.Paths) == 0 || ph.BlockS < 1 || len(ph.URLs) < len(ph.Paths)):
			return fmt.Errorf("PLAN %s: phase %s: an interleaved stream needs paths, their urls and block_s", name, ph.Name)
		case ph.Path != mix && ph.URL == "":
			return fmt.Errorf("PLAN %s: phase %s: no url", name, ph.Name)
		case ph.Traffic != "" && ph.Path != mix:
			return fmt.Errorf("PLAN %s: phase %s: a replay (traffic) is an interleaved stream's", name, ph.Name)
		}
	}
	return nil
}

// rateOf: a sweep's phase holds its step's rate; make load's every phase the run's.
func (p *plan) rateOf(ph *phase) int {
	if ph.Rate > 0 {
		return ph.Rate
	}
	return p.rate
}

// total: how many requests the plan holds (all segments).
func (p *plan) total() int {
	n := 0
	for i := range p.Phases {
		n += p.requests(&p.Phases[i])
	}
	return n
}

// requests: how many requests the phase's stream holds (all segments); a
// replay's: each cycle due before its end, once per path.
func (p *plan) requests(ph *phase) int {
	if ph.sched != nil {
		return ph.sched.cycles(ph.DurationS) * len(ph.Paths)
	}
	return int(float64(p.rateOf(ph)) * ph.DurationS)
}

// at: when request i of the phase is due, from the phase's start; in a
// replay, its cycle's due time and its place in the cycle.
func (p *plan) at(ph *phase, i int) time.Duration {
	if s := ph.sched; s != nil {
		c, k := i/len(ph.Paths), int64(i%len(ph.Paths))
		return time.Duration(s.due[c]+k*s.spacing[c]) * time.Microsecond
	}
	return time.Duration(float64(i) * float64(time.Second) / float64(p.rateOf(ph)))
}

// blocks: a measured interleaved stream's blocks of block_s (0: none).
func blocks(ph *phase) int {
	if ph.Path != mix || ph.Round < 1 {
		return 0
	}
	return int(math.Round(ph.DurationS / float64(ph.BlockS)))
}

// target: request i's path, and its block (-1: none). In the interleaved
// stream every path comes once in each cycle of len(paths) requests, in an
// order drawn from the run's seed and the cycle, the same in every process
// (so that n pods, each sending the indexes of its own segment, keep the
// stream balanced); its block is the one its due time falls in.
func (p *plan) target(ph *phase, i int) (path string, block int) {
	if ph.Path != mix {
		return ph.Path, -1
	}
	n := len(ph.Paths)
	c := i / n
	order := rand.New(rand.NewPCG(p.seed, uint64(c))).Perm(n)
	path = ph.Paths[order[i%n]]
	nb := blocks(ph)
	if nb == 0 {
		return path, -1
	}
	return path, min(int(p.at(ph, i)/(time.Duration(ph.BlockS)*time.Second)), nb-1)
}

// url: where request i's path is reached.
func (ph *phase) url(path string) string {
	if ph.Path == mix {
		return ph.URLs[path]
	}
	return ph.URL
}

// request i of the phase: whether it is a HEAD (else a GET), and the
// target appended to its path's URL (a replay's: the cycle's logged method
// and target; else none).
func (ph *phase) request(i int) (head bool, target string) {
	if s := ph.sched; s != nil {
		c := i / len(ph.Paths)
		return s.head[c], s.target[c]
	}
	return false, ""
}

// loadFile: where load.json goes, beside the plan (plan-r5.json: load-r5.json).
func loadFile(planFile string) string {
	dir, base := filepath.Split(planFile)
	m := regexp.MustCompile(`^plan(.*)$`).FindStringSubmatch(base)
	if m == nil {
		return filepath.Join(dir, "load-"+base)
	}
	return filepath.Join(dir, "load"+m[1])
}
