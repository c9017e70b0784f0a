// This file is the offline counterpart of the benchmark: the same request
// sequences played through a model of mockllm's load model (no processes,
// no network), under the strategies gatehouse has and under an oracle that
// knows every request's exact remaining work. It answers questions the
// measured run cannot, for many sequences in a second: how much a
// strategy's figure owes to the one sequence the benchmark plays, and how
// far a balancer with perfect information gets when it chooses greedily
// (not a bound: on a closed loop a greedy choice is not always the best).

package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
)

// simStep is the model's time step in milliseconds: small against a
// request's few hundred milliseconds, as mockllm's own 20 ms quantum is.
const simStep = 0.5

// simRequest is one request in flight on a simulated backend.
type simRequest struct {
	promptWork float64 // milliseconds of prompt reading left at idle speed
	outWork    float64 // milliseconds of generation left at idle speed
	tokens     int64   // tokens it holds (prompt + reply), as mockllm counts them
	cost       int64   // what gatehouse reserves for it: estimated prompt + max_tokens
	start      float64
	// For the streamed-progress policies: the prompt's share of cost, and
	// the reply's tokens and its work per token, from which the tokens a
	// stream has relayed so far follow.
	prompt   int64
	out      int64
	outTotal float64
}

// relayed is the reply tokens r has streamed so far, as a gateway relaying
// its chunks (one token each) counts them.
func (r simRequest) relayed() int64 {
	if r.promptWork > 0 || r.outTotal <= 0 {
		return 0
	}
	return int64(float64(r.out) * (1 - max(r.outWork, 0)/r.outTotal))
}

// streamedCost is what gatehouse's least-tokens counts for r in flight
// when a stream's relayed chunks lower it: the reservation less the reply
// tokens relayed, and, with releasePrompt, less the prompt once the first
// token is out (the server has read it).
func (r simRequest) streamedCost(releasePrompt bool) int64 {
	c := r.cost
	if r.promptWork <= 0 {
		c -= r.relayed()
		if releasePrompt {
			c -= r.prompt
		}
	}
	return max(c, 0)
}

// simBackends is the state of the three backends at one moment.
type simBackends [][]simRequest

// step advances every backend by dt and returns the start times of the
// requests that finished, in order.
func (bs simBackends) step(dt float64, capacity int64, done func(start float64)) {
	for k, reqs := range bs {
		var held int64
		for _, r := range reqs {
			held += r.tokens
		}
		kept := reqs[:0]
		for _, r := range reqs {
			progress := dt / (1 + float64(held-r.tokens)/float64(capacity))
			if r.promptWork > 0 {
				r.promptWork -= progress
			} else {
				r.outWork -= progress
			}
			if r.promptWork <= 0 && r.outWork <= 0 {
				done(r.start)
				continue
			}
			kept = append(kept, r)
		}
		bs[k] = kept
	}
}

// clone copies the state, for the oracle's look-ahead.
func (bs simBackends) clone() simBackends {
	out := make(simBackends, len(bs))
	for k, reqs := range bs {
		out[k] = slices.Clone(reqs)
	}
	return out
}

// simPolicy picks a backend for r.
type simPolicy func(bs simBackends, r simRequest, now float64, turn int) int

// lowest is the index with the lowest score, ties going round from turn
// (as gatehouse's selectors break them).
func lowest(scores []float64, turn int) int {
	best := -1
	for i := range scores {
		k := (turn + i) % len(scores)
		if best < 0 || scores[k] < scores[best] {
			best = k
		}
	}
	return best
}

var simPolicies = []struct {
	name string
	pick simPolicy
}{
	{"round-robin", func(bs simBackends, _ simRequest, _ float64, turn int) int { return turn % len(bs) }},
	{"least-requests", func(bs simBackends, _ simRequest, _ float64, turn int) int {
		scores := make([]float64, len(bs))
		for k, reqs := range bs {
			scores[k] = float64(len(reqs))
		}
		return lowest(scores, turn)
	}},
	{"least-tokens", func(bs simBackends, r simRequest, _ float64, turn int) int {
		scores := make([]float64, len(bs))
		for k, reqs := range bs {
			for _, x := range reqs {
				scores[k] += float64(x.cost)
			}
			scores[k] += float64(r.cost)
		}
		return lowest(scores, turn)
	}},
	// least-tokens as gatehouse counts a streamed request: its in-flight
	// tokens fall by one for every chunk relayed.
	{"least-tokens, streamed", func(bs simBackends, r simRequest, _ float64, turn int) int {
		return lowestStreamed(bs, r, turn, false)
	}},
	// The same, and the prompt's share released with the first token.
	{"least-tokens, streamed, prompt released", func(bs simBackends, r simRequest, _ float64, turn int) int {
		return lowestStreamed(bs, r, turn, true)
	}},
	// oracle knows every request's exact remaining work (jitter included)
	// and sends r where the requests in flight, r among them, finish
	// soonest in total, assuming nothing else arrives: the best a greedy
	// balancer with perfect information can do.
	{"oracle", func(bs simBackends, r simRequest, now float64, turn int) int {
		scores := make([]float64, len(bs))
		for k := range bs {
			trial := bs.clone()
			trial[k] = append(trial[k], r)
			t, total := now, 0.0
			for {
				busy := false
				for _, reqs := range trial {
					busy = busy || len(reqs) > 0
				}
				if !busy {
					break
				}
				t += 4 * simStep
				trial.step(4*simStep, simCapacity, func(start float64) { total += t - start })
			}
			scores[k] = total
		}
		return lowest(scores, turn)
	}},
}

// lowestStreamed is least-tokens over streamedCost.
func lowestStreamed(bs simBackends, r simRequest, turn int, releasePrompt bool) int {
	scores := make([]float64, len(bs))
	for k, reqs := range bs {
		for _, x := range reqs {
			scores[k] += float64(x.streamedCost(releasePrompt))
		}
		scores[k] += float64(r.cost)
	}
	return lowest(scores, turn)
}

// simCapacity is mockllm's -capacity as the benchmark runs it; set from
// the flags before a simulation.
var simCapacity int64 = 4096

// simulate plays reqs through policy with the scenario's closed-loop
// clients and returns every request's latency in milliseconds.
func simulate(sc scenario, reqs []request, o options, pick simPolicy, jitterSeed uint64) []float64 {
	perToken := float64(o.perToken.Microseconds()) / 1000
	promptPerToken := float64(o.promptPerToken.Microseconds()) / 1000
	if o.promptPerToken == 0 {
		promptPerToken = perToken / 50
	}
	rng := rand.New(rand.NewPCG(jitterSeed, 0x5eed))
	bs := make(simBackends, backends)
	var lat []float64
	now, next, turn := 0.0, 0, 0
	issue := func() {
		q := reqs[next]
		next++
		j := 1 + o.jitter*(2*rng.Float64()-1)
		// mockllm's reply quotes up to 200 characters of the prompt after
		// a 10-word greeting, capped by max_tokens.
		out := min(10+min(q.promptTokens, 50), sc.maxTokens)
		r := simRequest{
			promptWork: float64(q.promptTokens) * promptPerToken * j,
			outWork:    float64(out) * perToken * j,
			tokens:     int64(q.promptTokens + out),
			cost:       int64(q.promptTokens + sc.maxTokens),
			start:      now,
			prompt:     int64(q.promptTokens),
			out:        int64(out),
		}
		r.outTotal = r.outWork
		k := pick(bs, r, now, turn)
		turn++
		bs[k] = append(bs[k], r)
	}
	for next < len(reqs) && next < sc.concurrency {
		issue()
	}
	for len(lat) < len(reqs) {
		now += simStep
		bs.step(simStep, simCapacity, func(start float64) { lat = append(lat, now-start) })
		for next < len(reqs) && next-len(lat) < sc.concurrency {
			issue()
		}
	}
	return lat
}

// writeSimulation prints, per scenario, each policy's average and p90
// latency over n request sequences (seeds seed … seed+n-1) against
// round-robin's.
func writeSimulation(w io.Writer, o options, n int) {
	simCapacity = int64(o.capacity)
	fmt.Fprintf(w, "# Balancing simulation\n\n%d request sequences per scenario (seeds %d–%d), %d backends modelled on mockllm's load model: %s per reply token, ±%.0f%% jitter, capacity %d; each sequence played under every policy.\n\n",
		n, o.seed, o.seed+uint64(n)-1, backends, o.perToken, o.jitter*100, o.capacity)
	for _, sc := range o.scenarios {
		fmt.Fprintf(w, "## %s: %s\n\n", sc.name, sc.about)
		fmt.Fprintln(w, "| policy | avg ms | p90 ms | avg vs round-robin | p90 vs round-robin |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
		avg := make([]float64, len(simPolicies))
		p90 := make([]float64, len(simPolicies))
		for s := range n {
			seed := o.seed + uint64(s)
			reqs := generate(sc, seed)
			for i, p := range simPolicies {
				lat := simulate(sc, reqs, o, p.pick, seed)
				slices.Sort(lat)
				sum := 0.0
				for _, l := range lat {
					sum += l
				}
				avg[i] += sum / float64(len(lat)) / float64(n)
				p90[i] += lat[(len(lat)*9+9)/10-1] / float64(n)
			}
		}
		for i, p := range simPolicies {
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %+.1f%% | %+.1f%% |\n", p.name, avg[i], p90[i],
				100*(avg[i]/avg[0]-1), 100*(p90[i]/p90[0]-1))
		}
		fmt.Fprintln(w)
	}
}
