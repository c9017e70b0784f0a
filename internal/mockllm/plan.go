package mockllm

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// plan is how one request will be answered: Options, then an @mock(...)
// directive from the last user message, then X-Mock-* headers, each layer
// overriding the one before. Directives exist because a gateway in front
// of the mock does not forward client headers, but does forward prompts.
type plan struct {
	latency     time.Duration
	ttft        time.Duration
	tps         float64
	chunks      int
	errorStatus int
	errorRate   float64
	retryAfter  string
	hang        bool
	stallAfter  int   // content chunks before the stream goes silent; -1 = never
	failAfter   int   // content chunks before the connection is cut; -1 = never
	reset       bool  // the cut of fail_after is a TCP reset (reset_after)
	fault       fault // truncate, malformed or error_in_200 (faults.go)
	faultAt     int   // events written before fault strikes
	huge        int   // reply text of this many bytes; 0 = the usual reply
	// tool makes the reply a call to the request's tool of this name, in
	// the dialects that emulate tool calling.
	tool string
	// perToken and jitter drive the load model (load.go); perToken 0
	// leaves it off. held is the request's own tokens in flight, which
	// do not slow it down.
	perToken time.Duration
	jitter   float64
	held     int64
}

// mockKeys are the override names: the directive key and, canonicalised,
// the header "X-Mock-" + key with "_" as "-".
var mockKeys = []struct{ key, header string }{
	{"latency", "X-Mock-Latency"},
	{"ttft", "X-Mock-Ttft"},
	{"tps", "X-Mock-Tps"},
	{"chunks", "X-Mock-Chunks"},
	{"error_status", "X-Mock-Error-Status"},
	{"error_rate", "X-Mock-Error-Rate"},
	{"retry_after", "X-Mock-Retry-After"},
	{"hang", "X-Mock-Hang"},
	{"stall_after", "X-Mock-Stall-After"},
	{"fail_after", "X-Mock-Fail-After"},
	{"reset_after", "X-Mock-Reset-After"},
	{"truncate", "X-Mock-Truncate"},
	{"malformed", "X-Mock-Malformed"},
	{"error_in_200", "X-Mock-Error-In-200"},
	{"huge", "X-Mock-Huge"},
	{"tool", "X-Mock-Tool"},
	{"per_token", "X-Mock-Per-Token"},
}

func (s *Server) basePlan() plan {
	o := &s.opts
	return plan{
		latency: o.Latency, ttft: o.TTFT, tps: o.TokensPerSecond, chunks: o.Chunks,
		errorStatus: o.ErrorStatus, errorRate: o.ErrorRate, retryAfter: o.RetryAfter,
		stallAfter: -1, failAfter: -1, perToken: s.load.PerToken, jitter: 1,
	}
}

// newPlan layers the directive in text (may be empty) and the headers of
// r over Options. A bad value is the caller's mistake and answered with a
// 400 naming it, because a silently ignored typo makes a test lie.
func (s *Server) newPlan(c *call, text string) (plan, *apiError) {
	r := c.r
	p := s.basePlan()
	if d, ok := findDirective(text); ok {
		for item := range strings.SplitSeq(d, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			k, v, _ := strings.Cut(item, "=")
			k = strings.ToLower(strings.TrimSpace(k))
			if err := p.set(k, strings.TrimSpace(v)); err != nil {
				return p, invalidRequest("messages", "invalid_mock_directive", "@mock(%s): %v", d, err)
			}
		}
	}
	for _, m := range mockKeys {
		if v, ok := r.Header[m.header]; ok && len(v) > 0 {
			if err := p.set(m.key, strings.TrimSpace(v[0])); err != nil {
				return p, invalidRequest("", "invalid_mock_header", "%s: %v", m.header, err)
			}
		}
	}
	c.arm(&p)
	return p, nil
}

// findDirective returns the inside of the last "@mock(...)" in text.
func findDirective(text string) (string, bool) {
	i := strings.LastIndex(text, "@mock(")
	if i < 0 {
		return "", false
	}
	rest := text[i+len("@mock("):]
	j := strings.IndexByte(rest, ')')
	if j < 0 {
		return "", false
	}
	return rest[:j], true
}

// stripDirectives removes every "@mock(...)" from text, so the default
// reply quotes what the user said, not the instructions to the mock.
func stripDirectives(text string) string {
	for {
		i := strings.Index(text, "@mock(")
		if i < 0 {
			return text
		}
		j := strings.IndexByte(text[i:], ')')
		if j < 0 {
			return text[:i]
		}
		text = text[:i] + text[i+j+1:]
	}
}

func (p *plan) set(key, v string) error {
	var err error
	switch key {
	case "latency":
		p.latency, err = parseDuration(v)
	case "ttft":
		p.ttft, err = parseDuration(v)
	case "tps":
		p.tps, err = parseFloat(v, 0, 1e12)
	case "chunks":
		p.chunks, err = parseInt(v, 1, 1<<20)
	case "error_status":
		p.errorStatus, err = parseInt(v, 0, 599)
		if err == nil && p.errorStatus != 0 && p.errorStatus < 400 {
			err = fmt.Errorf("error_status %d is not an error status", p.errorStatus)
		}
	case "error_rate":
		p.errorRate, err = parseFloat(v, 0, 1)
	case "retry_after":
		p.retryAfter = v
	case "hang":
		p.hang, err = strconv.ParseBool(v)
	case "stall_after":
		p.stallAfter, err = parseInt(v, 0, 1<<20)
	case "fail_after":
		p.failAfter, err = parseInt(v, 0, 1<<20)
		p.reset = false
	case "reset_after":
		p.failAfter, err = parseInt(v, 0, 1<<20)
		p.reset = true
	case "truncate":
		err = p.setFault(faultTruncate, v)
	case "malformed":
		err = p.setFault(faultMalformed, v)
	case "error_in_200":
		err = p.setFault(faultErrorIn200, v)
	case "huge":
		p.huge, err = parseInt(v, 0, maxHuge)
	case "tool":
		p.tool = v
	case "per_token":
		p.perToken, err = parseDuration(v)
	default:
		err = fmt.Errorf("unknown key %q", key)
	}
	return err
}

// parseDuration accepts Go durations ("200ms") and bare milliseconds.
func parseDuration(v string) (time.Duration, error) {
	if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
		return time.Duration(ms * float64(time.Millisecond)), nil
	}
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = fmt.Errorf("negative duration %q", v)
	}
	return d, err
}

func parseInt(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && (n < lo || n > hi) {
		err = fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
	}
	return n, err
}

func parseFloat(v string, lo, hi float64) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err == nil && (f < lo || f > hi) {
		err = fmt.Errorf("%v is outside [%v, %v]", f, lo, hi)
	}
	return f, err
}

// injectError decides whether this request gets the configured error.
// Instead of a coin flip, the n-th draw fails when floor(n·rate) steps up:
// any run of N requests sees N·rate errors ±1, so benchmarks and tests
// with a rate are reproducible.
func (s *Server) injectError(p *plan) bool {
	if p.errorStatus <= 0 {
		return false
	}
	if p.errorRate <= 0 || p.errorRate >= 1 {
		return true
	}
	n := float64(s.errorDraws.Add(1))
	return int64(n*p.errorRate) > int64((n-1)*p.errorRate)
}
