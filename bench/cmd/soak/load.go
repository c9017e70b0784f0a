package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// kind is one sort of request in the mix.
type kind int

const (
	chat            kind = iota // plain chat completion
	chatStream                  // streamed, with usage
	streamAbandoned             // streamed; the client hangs up after the first event
	limited                     // sent with the key whose rpm refuses most requests
	messages                    // the Anthropic dialect
	gaveUp                      // the upstream is slow; the client gives up before the answer
)

var kindNames = [...]string{"chat", "chat stream", "stream abandoned", "limited key", "messages", "client gave up"}

func (k kind) String() string { return kindNames[k] }

// mix is the load's shape: each request takes the next kind in turn.
var mix = [...]kind{chat, chatStream, messages, chat, streamAbandoned, chatStream, limited, chat, chatStream, messages,
	chat, gaveUp, chatStream, limited, chat, messages, chatStream, streamAbandoned, chat, chat}

// expected says which outcomes of a kind are right; anything else fails
// the run.
func (k kind) expected(outcome string) bool {
	switch k {
	case limited:
		return outcome == "200" || outcome == "429"
	case streamAbandoned:
		return outcome == "abandoned"
	case gaveUp:
		return outcome == "gave up"
	default:
		return outcome == "200"
	}
}

// giveUpAfter is how long a gaveUp client waits for an answer the
// upstream delays by two seconds.
const giveUpAfter = 250 * time.Millisecond

// driver sends the mix at a steady rate and keeps what happened to each
// request. Every request carries a label with its sequence number, which
// its usage record keeps, so the records can be matched to what was sent.
type driver struct {
	base   string
	rate   int
	client *http.Client
	seq    atomic.Int64
	// failovers counts answers served by a later attempt
	// (x-gatehouse-attempts above 1): the flaky target failed first.
	failovers atomic.Int64

	mu       sync.Mutex
	counts   map[outcomeKey]int
	unsent   map[int64]bool // requests that may never have reached the gateway
	launched int64
}

type outcomeKey struct {
	kind    kind
	outcome string
}

func newDriver(base string, rate int) *driver {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &driver{base: base, rate: rate, client: &http.Client{Transport: tr},
		counts: map[outcomeKey]int{}, unsent: map[int64]bool{}}
}

// run starts rate requests a second for d (or until ctx ends) and waits
// for the last of them to finish; requests in flight are not cut short.
func (d *driver) run(ctx context.Context, dur time.Duration) {
	var wg sync.WaitGroup
	t := time.NewTicker(time.Second / time.Duration(d.rate))
	defer t.Stop()
	end := time.After(dur)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-t.C:
		}
		n := d.seq.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := mix[int(n)%len(mix)]
			outcome, reached := d.send(k, n)
			d.mu.Lock()
			d.counts[outcomeKey{k, outcome}]++
			d.launched++
			if !reached {
				d.unsent[n] = true
			}
			d.mu.Unlock()
		}()
	}
	wg.Wait()
}

// send makes one request of kind k and reports its outcome: the status,
// "abandoned" or "gave up" as the kind intends, or "error: …"; reached is
// false when the request may not have got to the gateway.
func (d *driver) send(k kind, n int64) (outcome string, reached bool) {
	timeout := 30 * time.Second
	if k == gaveUp {
		timeout = giveUpAfter
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	path, key, body := "/v1/chat/completions", mainKey, `{"model":"`+model+`","max_tokens":32,"messages":[{"role":"user","content":"soak `+strconv.FormatInt(n, 10)+`"}]`
	switch k {
	case chatStream, streamAbandoned:
		body += `,"stream":true,"stream_options":{"include_usage":true}`
	case limited:
		key = limitedKey
	case messages:
		path = "/v1/messages"
	case gaveUp:
		body = `{"model":"` + model + `","max_tokens":32,"messages":[{"role":"user","content":"@mock(latency=2s) soak"}]`
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base+path, strings.NewReader(body+"}"))
	if err != nil {
		return "error: " + err.Error(), false
	}
	req.Header.Set("Content-Type", "application/json")
	if k == messages {
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("X-Gatehouse-Label-Soak", strconv.FormatInt(n, 10))
	resp, err := d.client.Do(req)
	if err != nil {
		if k == gaveUp && errors.Is(err, context.DeadlineExceeded) {
			return "gave up", true
		}
		return "error: " + errorClass(err), false
	}
	defer resp.Body.Close()
	if a := resp.Header.Get("X-Gatehouse-Attempts"); a != "" && a != "1" {
		d.failovers.Add(1)
	}
	if k == streamAbandoned && resp.StatusCode == http.StatusOK {
		// Hang up once the first event has arrived.
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "data:") {
			return "error: no first event", true
		}
		return "abandoned", true
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "error: body " + errorClass(err), true
	}
	return strconv.Itoa(resp.StatusCode), true
}

// errorClass shortens a transport error to what tells such errors apart.
func errorClass(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// sent returns the sequence numbers of the requests that reached the
// gateway, in order.
func (d *driver) sent() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]int64, 0, d.seq.Load())
	for n := int64(1); n <= d.seq.Load(); n++ {
		if !d.unsent[n] {
			out = append(out, n)
		}
	}
	return out
}

// maybe returns the sequence numbers of the requests that may or may not
// have reached the gateway: each has at most one record.
func (d *driver) maybe() map[int64]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[int64]bool, len(d.unsent))
	for n := range d.unsent {
		out[n] = true
	}
	return out
}

// outcomeCount is one line of the outcome table.
type outcomeCount struct {
	kind    kind
	outcome string
	n       int
}

// outcomes returns what happened to the requests, by kind and outcome.
func (d *driver) outcomes() []outcomeCount {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []outcomeCount
	for k, n := range d.counts {
		out = append(out, outcomeCount{k.kind, k.outcome, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind < out[j].kind
		}
		return out[i].outcome < out[j].outcome
	})
	return out
}
