package route

import (
	"context"
	"strconv"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// Attempt is one upstream call of a request.
type Attempt struct {
	N          int // 1-based, counted across the request (fallbacks included)
	Group      *Group
	Deployment *provider.Deployment
	// Timeouts are the group's, with Total cut to what is left of the
	// request's budget.
	Timeouts provider.Timeouts

	lease *Lease
}

// Names returns the names of the attempt's deployment made once with its
// backend; nil for an attempt made without a pool.
func (a Attempt) Names() *Names {
	if a.lease == nil || a.lease.Backend == nil {
		return nil
	}
	return &a.lease.Backend.Names
}

// Relayed reports that n reply tokens of this attempt reached the client
// (a stream relays them as they come), so the deployment's in-flight
// tokens fall as the reply goes out and least-tokens sees the work it
// has left. Calling it is optional: the lease gives back everything when
// the attempt ends.
func (a Attempt) Relayed(n int) {
	if a.lease != nil {
		a.lease.Relayed(int64(n))
	}
}

// Result is how an attempt ended, as the caller's Try reports it.
type Result struct {
	Err *llm.Error // nil: the attempt answered the client
	// Started says bytes of this attempt reached the client: whatever
	// happens next, no other attempt may follow.
	Started bool
	// FirstByte is the time to the first token (streams) or to the whole
	// answer, fed to least-latency; 0 when there is none.
	FirstByte time.Duration
	// Open says the attempt answered and is not over: a stream whose
	// first event went out, relayed on after Try returns so that its long
	// waits are not spent at the bottom of the run's call chain. The run
	// ends with it as with an answer, but the attempt stays in flight (its
	// lease held, OnAttempt not yet called) until the caller passes its
	// final result to Report.Close. Ignored with Err set.
	Open bool
}

// Runner runs one request's attempts: it picks a deployment, calls Try,
// and on a failure that another deployment could fix (connection error,
// timeout before the first byte, 429, 5xx, a configured status) moves on
// to the next one, then to the model's fallbacks. Only the last model of
// the chain is retried round after round, with jittered exponential
// backoff, until MaxAttempts or the request's total timeout; a wait the
// upstream asked for with Retry-After is honoured when it fits in both
// MaxBackoff and the budget, and otherwise the request moves on. A
// prompt the model cannot fit goes to the context fallbacks. The client
// leaving ends everything at once, during a backoff too.
//
// A Runner is built per request; its zero fields are harmless.
type Runner struct {
	// Table resolves fallback model names; nil means no fallbacks.
	Table *Table
	// Try performs one attempt under ctx (the client's context).
	Try func(ctx context.Context, a Attempt) Result
	// PromptTokens is the prompt's token estimate; 0 when unknown (no
	// max_context check then, and least-tokens counts output only).
	PromptTokens int
	// MaxTokens is the request's max_tokens; 0 when absent, in which case
	// DefaultOutputTokens is the output expected.
	MaxTokens int
	// OnAttempt, when set, sees every attempt as it ends, with what it
	// said about the deployment (metrics, logs).
	OnAttempt func(a Attempt, r Result, o Outcome)
	// Allow, when set, says whether the request may go to a deployment
	// (a key limited to some providers). One it refuses is skipped as if
	// already tried: never called, not even as a last resort or a
	// fallback. nil allows every deployment.
	Allow func(d *provider.Deployment) bool
}

// Report says how a request's attempts ended. Only Answered is billed:
// the attempts before it failed before any byte reached the client.
type Report struct {
	Attempts int
	Answered Attempt // the attempt that answered or started the stream; N == 0 when none did
	Last     Attempt // the last attempt made; N == 0 when none was
	Err      *llm.Error

	open *run // the run whose answered attempt is still open (Result.Open)
}

// Open reports whether the answered attempt is still open: its Try
// returned Result.Open, and Close has not been called yet.
func (rep *Report) Open() bool { return rep.open != nil }

// Close ends the answered attempt that Try left open, with how it
// finally went (Started stays true: its first bytes went out): the
// deployment's lease is given back, what the result says about its
// health is recorded and OnAttempt sees it, and res.Err becomes the
// report's. It does nothing when no attempt is open, so calling it twice
// is harmless.
func (rep *Report) Close(res Result) {
	s := rep.open
	if s == nil {
		return
	}
	rep.open = nil
	res.Started = true
	a := rep.Answered
	s.ended(a.Group, a, res)
	rep.Err = res.Err
}

// step is what a model's turn in the chain led to.
type step uint8

const (
	stepDone    step = iota // the request is over
	stepNext                // try the fallbacks
	stepTooLong             // try the context fallbacks
)

// run is the state of one Run.
type run struct {
	*Runner
	ctx      context.Context
	clock    Clock
	rand     func() float64
	deadline time.Time // zero: no total timeout
	limit    int
	cost     int64
	rep      Report
	tried    []*Backend
	// spent are the deployments that must not be called again for this
	// request (their answer was over the size bound): later rounds skip
	// them as Allow's refusals are skipped.
	spent []*Backend
	// retryAt is when deployments that answered this request with a
	// Retry-After may be called again. Other requests are not held back
	// by it: for them a cooling deployment is merely a last choice.
	retryAt map[*Backend]time.Time
}

// Run serves the request with g and its fallbacks.
func (r *Runner) Run(ctx context.Context, g *Group) Report {
	s := &run{Runner: r, ctx: ctx, clock: g.pool.clock, rand: g.pool.rand}
	if t := g.Timeouts.Total; t > 0 {
		s.deadline = s.clock.Now().Add(t)
	}
	out := r.MaxTokens
	if out <= 0 {
		out = DefaultOutputTokens
	}
	s.cost = int64(r.PromptTokens + out)
	s.limit = g.Retry.MaxAttempts
	if s.limit <= 0 {
		s.limit = r.deployments(g) + 1
	}
	queue := []*Group{g}
	for i := 0; i < len(queue); i++ {
		grp := queue[i]
		next := grp.Fallbacks
		var st step
		if r.PromptTokens > 0 && grp.MaxContext > 0 && r.PromptTokens+max(r.MaxTokens, 0) > grp.MaxContext {
			s.rep.Err = contextError(grp.Name, r.PromptTokens+max(r.MaxTokens, 0), grp.MaxContext)
			st = stepTooLong
		} else {
			last := i == len(queue)-1 && len(r.fallbacks(grp.Fallbacks, queue)) == 0
			st = s.group(grp, last)
		}
		switch st {
		case stepDone:
			return s.rep
		case stepTooLong:
			next = grp.ContextFallbacks
		}
		queue = append(queue, r.fallbacks(next, queue)...)
	}
	if s.rep.Err == nil {
		s.rep.Err = noDeployment(g.Name)
	}
	return s.rep
}

// resolve returns the named groups not already in seen.
func (r *Runner) resolve(names []string, seen []*Group) []*Group {
	if r.Table == nil {
		return nil
	}
	var out []*Group
	for _, n := range names {
		if g, ok := r.Table.Lookup(n); ok && !containsGroup(seen, g) && !containsGroup(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// fallbacks returns the named groups not already in seen that have a
// deployment Allow lets the request reach: a model the request may not
// use is no fallback, so the last one it may use is retried in rounds.
func (r *Runner) fallbacks(names []string, seen []*Group) []*Group {
	gs := r.resolve(names, seen)
	if r.Allow == nil {
		return gs
	}
	out := gs[:0]
	for _, g := range gs {
		if r.allowsSome(g) {
			out = append(out, g)
		}
	}
	return out
}

// allowsSome reports whether Allow lets the request reach a deployment
// of g.
func (r *Runner) allowsSome(g *Group) bool {
	for _, tier := range g.tiers {
		for _, m := range tier {
			if r.Allow(m.Deployment) {
				return true
			}
		}
	}
	return false
}

// deployments counts the deployments of g and of every model its
// fallbacks (of both kinds) lead to.
func (r *Runner) deployments(g *Group) int {
	n := 0
	for _, c := range r.chain(g) {
		n += len(c.Members())
	}
	return n
}

// chain is g and every model its fallbacks (of both kinds) lead to.
func (r *Runner) chain(g *Group) []*Group {
	chain := []*Group{g}
	for i := 0; i < len(chain); i++ {
		chain = append(chain, r.resolve(append(append([]string(nil), chain[i].Fallbacks...), chain[i].ContextFallbacks...), chain)...)
	}
	return chain
}

// Reachable reports whether Allow lets the request reach at least one
// deployment of g or of the models its fallbacks lead to, so that a
// caller can refuse at once a request that could only be skipped. With
// Allow nil, or no deployment at all (the run reports that itself), it
// is true.
func (r *Runner) Reachable(g *Group) bool {
	if r.Allow == nil {
		return true
	}
	found := false
	for _, c := range r.chain(g) {
		if r.allowsSome(c) {
			return true
		}
		found = found || len(c.tiers) > 0
	}
	return !found
}

// untried empties the list of deployments tried in g, then puts back
// the spent ones and those Allow refuses, so Pick never chooses them.
func (s *run) untried(g *Group) {
	s.tried = append(s.tried[:0], s.spent...)
	if s.Allow == nil {
		return
	}
	for _, tier := range g.tiers {
		for _, m := range tier {
			if !s.Allow(m.Deployment) {
				s.tried = append(s.tried, m.Backend)
			}
		}
	}
}

func containsGroup(list []*Group, g *Group) bool {
	for _, x := range list {
		if x == g {
			return true
		}
	}
	return false
}

// group tries g's deployments; last says nothing comes after it, so it
// is retried in rounds and may bypass open breakers.
func (s *run) group(g *Group, last bool) step {
	s.untried(g)
	round, roundStart := 1, s.rep.Attempts
	for {
		if s.rep.Attempts >= s.limit || s.expired() {
			return stepDone
		}
		if s.ctx.Err() != nil {
			s.gone()
			return stepDone
		}
		lease, ok := g.Pick(s.tried, s.cost, last)
		if !ok {
			if !last || s.rep.Attempts == roundStart {
				return stepNext // nothing (more) to try here
			}
			round++
			roundStart = s.rep.Attempts
			if !s.pause(g.Retry.backoff(round-1, s.rand)) {
				return stepDone
			}
			s.untried(g)
			continue
		}
		s.tried = append(s.tried, lease.Backend)
		if wait := s.retryAt[lease.Backend].Sub(s.clock.Now()); wait > 0 {
			if wait > g.Retry.maxWait() || !s.fits(wait) {
				lease.Done(Neutral, 0, 0) // its Retry-After runs too long: move on
				continue
			}
			if !s.pause(wait) {
				lease.Done(Neutral, 0, 0)
				return stepDone
			}
		}
		switch s.attempt(g, lease) {
		case fatal, clientGone:
			return stepDone
		case tooLong:
			return stepTooLong
		}
	}
}

// attempt makes one call on lease and returns what its outcome means.
// A nil error or a started response is reported as fatal: the request
// is over either way.
func (s *run) attempt(g *Group, lease *Lease) verdict {
	s.rep.Attempts++
	lease.prompt = min(int64(max(s.PromptTokens, 0)), s.cost)
	a := Attempt{N: s.rep.Attempts, Group: g, Deployment: lease.Deployment, Timeouts: s.timeouts(g), lease: lease}
	s.rep.Last = a
	res := s.Try(s.ctx, a)
	if res.Open && res.Err == nil {
		s.rep.Answered, s.rep.Err = a, nil
		s.rep.open = s
		return fatal
	}
	s.ended(g, a, res)
	s.rep.Err = res.Err
	if res.Err == nil || res.Started {
		s.rep.Answered = a
		return fatal
	}
	v := g.Retry.judge(res.Err)
	if v == notHere {
		s.spent = append(s.spent, lease.Backend)
		v = moveOn
	}
	return v
}

// ended gives back attempt a's lease with what res says about its
// deployment (health, latency, a Retry-After to honour) and reports it to
// OnAttempt.
func (s *run) ended(g *Group, a Attempt, res Result) {
	o := g.Retry.health(res.Err)
	var wait time.Duration
	if res.Err != nil && o == Failure {
		wait = res.Err.RetryAfter
	}
	if wait > 0 {
		if s.retryAt == nil {
			s.retryAt = map[*Backend]time.Time{}
		}
		s.retryAt[a.lease.Backend] = s.clock.Now().Add(wait)
	}
	a.lease.Done(o, res.FirstByte, wait)
	if s.OnAttempt != nil {
		s.OnAttempt(a, res, o)
	}
}

func (s *run) timeouts(g *Group) provider.Timeouts {
	t := g.Timeouts
	if !s.deadline.IsZero() {
		left := s.deadline.Sub(s.clock.Now())
		if t.Total <= 0 || left < t.Total {
			t.Total = max(left, time.Millisecond)
		}
	}
	return t
}

func (s *run) expired() bool {
	return !s.deadline.IsZero() && !s.clock.Now().Before(s.deadline)
}

// fits reports whether waiting d leaves time for an attempt.
func (s *run) fits(d time.Duration) bool {
	return s.deadline.IsZero() || s.clock.Now().Add(d).Before(s.deadline)
}

// pause waits d if the budget allows; false means the request is over
// (no time left, or the client left).
func (s *run) pause(d time.Duration) bool {
	if !s.fits(d) {
		return false
	}
	if err := s.clock.Sleep(s.ctx, d); err != nil {
		s.gone()
		return false
	}
	return true
}

func (s *run) gone() {
	s.rep.Err = &llm.Error{Kind: llm.KindCanceled, Status: 499, Message: "client closed the request", Cause: context.Cause(s.ctx)}
}

func itoa(n int) string { return strconv.Itoa(n) }
