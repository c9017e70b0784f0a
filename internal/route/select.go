package route

import (
	"math"
	"sync/atomic"
	"time"
)

// Member is one deployment of a group as a selector sees it.
type Member struct {
	*Backend
	Weight int
}

// Selector chooses one deployment for a request among candidates that
// are all allowed (breaker, health, Retry-After and tried ones are
// filtered out before). cands is never empty; cost is the request's
// token estimate. The index returned must be within cands.
//
// Select runs under the pool's pick lock, right before the chosen
// deployment's in-flight tokens are raised: it sees the totals of every
// pick before it.
type Selector interface {
	Select(cands []Member, cost int64) int
}

// NewSelector returns the selector for a strategy name; unknown names
// (and failover) select by priority. rnd returns numbers in [0,1).
func NewSelector(strategy string, rnd func() float64, explore float64) Selector {
	switch strategy {
	case RoundRobin:
		return &roundRobin{}
	case Weighted:
		return weighted{rand: rnd}
	case LeastTokens:
		return &LeastTokensSelector{}
	case LeastLatency:
		return &leastLatency{rand: rnd, explore: explore}
	case LeastRequests:
		return &leastConnections{}
	}
	return priority{}
}

// priority picks the first allowed deployment in config order.
type priority struct{}

func (priority) Select([]Member, int64) int { return 0 }

// roundRobin takes turns.
type roundRobin struct{ next atomic.Uint64 }

func (r *roundRobin) Select(cands []Member, _ int64) int {
	return int((r.next.Add(1) - 1) % uint64(len(cands)))
}

// weighted picks at random in proportion to the weights; weight 0 is a
// standby, chosen (in order) only when no weighted deployment is allowed.
type weighted struct{ rand func() float64 }

func (w weighted) Select(cands []Member, _ int64) int {
	total := 0
	for _, m := range cands {
		total += m.Weight
	}
	if total == 0 {
		return 0
	}
	n := int(w.rand() * float64(total))
	for i, m := range cands {
		if n < m.Weight {
			return i
		}
		n -= m.Weight
	}
	return len(cands) - 1
}

// LeastTokensSelector picks the deployment with the fewest in-flight
// tokens: the prompt and expected output of every request it is serving.
// A deployment with a load signal adds the work it reports that the
// gateway did not send it (other clients' requests, its queue), priced at
// the average cost of the gateway's own requests, and scales the sum by
// its KV-cache use. Ties go round the candidates in turn, so an idle
// group spreads its first requests.
type LeastTokensSelector struct{ next atomic.Uint64 }

// DefaultOutputTokens is the output a request is expected to produce when
// it sets no max_tokens.
const DefaultOutputTokens = 256

// Select implements Selector.
func (s *LeastTokensSelector) Select(cands []Member, cost int64) int {
	start := int(s.next.Add(1) % uint64(len(cands)))
	best, bestScore := 0, math.Inf(1)
	for k := range cands {
		i := (start + k) % len(cands)
		if sc := tokenScore(cands[i].Backend, cost); sc < bestScore {
			best, bestScore = i, sc
		}
	}
	return best
}

// tokenScore is what b would be loaded with if it took a request of cost.
func tokenScore(b *Backend, cost int64) float64 {
	own := float64(b.tokens.Load())
	score := own + float64(cost)
	l, ok := b.Load()
	if !ok {
		return score
	}
	reqs := float64(b.requests.Load())
	per := float64(max(cost, 1))
	if reqs > 0 {
		per = own / reqs
	}
	// The server's running and queued requests include the gateway's own
	// (a server with all slots busy queues what the gateway sends it).
	foreign := max(l.Running+l.Waiting-reqs, 0)
	return (score + foreign*per) * (1 + min(max(l.KVCache, 0), 1))
}

// leastConnections is the least-requests strategy, a classic load
// balancer's least-connections: the deployment serving the fewest
// requests, whatever their size (what least-tokens is measured against).
// Ties go round in turn, as for least-tokens.
type leastConnections struct{ next atomic.Uint64 }

func (s *leastConnections) Select(cands []Member, _ int64) int {
	start := int(s.next.Add(1) % uint64(len(cands)))
	best, fewest := 0, int64(math.MaxInt64)
	for k := range cands {
		i := (start + k) % len(cands)
		if n := cands[i].InFlightRequests(); n < fewest {
			best, fewest = i, n
		}
	}
	return best
}

// leastLatency picks the deployment with the lowest moving average of
// time to first byte. A deployment never measured, or not for a while,
// goes first (that is how a recovered one is tried again), and a share
// explore of picks goes to a random one to keep every average fresh. A
// reported queue lengthens the expected wait in proportion.
type leastLatency struct {
	rand    func() float64
	explore float64
}

func (s *leastLatency) Select(cands []Member, _ int64) int {
	if len(cands) > 1 && s.explore > 0 && s.rand() < s.explore {
		return int(s.rand() * float64(len(cands)))
	}
	now := time.Time{}
	best, bestScore := 0, math.Inf(1)
	for i, m := range cands {
		avg, last, ok := m.lat.get()
		if now.IsZero() {
			now = m.pool.clock.Now()
		}
		if !ok || now.Sub(last) > latencyStale {
			return i
		}
		score := float64(avg)
		if l, ok := m.Load(); ok && l.Waiting > 0 {
			score *= 1 + l.Waiting/max(l.Running, 1)
		}
		if score < bestScore {
			best, bestScore = i, score
		}
	}
	return best
}
