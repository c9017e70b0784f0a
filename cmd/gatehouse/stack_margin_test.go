package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The stack-margin tests guard what branch streams3 bought (BENCHMARKS.md,
// "Follow-up (branch streams3)"): a request's handler goroutine never
// needs more than the runtime's 8 KiB stack, so an open stream costs the
// gateway what it costs a plain reverse proxy. The waits that hold a
// request open are, the closest, only about 900 bytes under the point
// where the runtime doubles that stack to 16 KiB, and a doubling is
// silent: every open request just costs 8 KiB more. So these tests hold
// many requests open in the real binary, built without the race detector
// (whose instrumentation makes every frame larger) and with the stack
// probe (stackprobe.go), and count the gateway's goroutines by stack size
// before and after: none may come out larger than 8 KiB.
//
// The gateway runs with GOGC=off: a stack only shrinks at a collection,
// so without one a goroutine that grew anywhere on the way to its wait
// still has the larger stack when it is counted.

// heldRequests is how many requests each step holds open at once.
const heldRequests = 100

// firstStackLimit is the stack a goroutine gets to before its first
// doubling past what the plain proxy's handler needs.
const firstStackLimit = 8 << 10

func TestStreamHandlerStackStaysAtFirstSize(t *testing.T) {
	testHeldRequestStacks(t, true)
}

func TestNonStreamedHandlerStackStaysAtFirstSize(t *testing.T) {
	testHeldRequestStacks(t, false)
}

// testHeldRequestStacks opens a first batch of held requests (the
// gateway's lazy set-up, its pools and its idle upstream connections are
// all in use by then), counts the gateway's goroutines by stack size,
// opens a second batch on brand new connections, counts again, and checks
// what the second batch added.
func testHeldRequestStacks(t *testing.T, stream bool) {
	g := startHeldGateway(t)
	g.open(heldRequests, stream)
	before := stackSizes(t, g.probe)
	g.open(heldRequests, stream)
	after := stackSizes(t, g.probe)

	added := map[int]int{}
	for size, n := range after {
		if d := n - before[size]; d != 0 {
			added[size] = d
		}
	}
	for size, n := range before {
		if _, ok := after[size]; !ok {
			added[size] = -n
		}
	}
	t.Logf("%d more requests held; goroutines added by stack size: %v", heldRequests, added)
	larger := 0
	for size, n := range added {
		if size > firstStackLimit {
			larger += n
		}
	}
	// Each held request is four goroutines in the gateway: the handler,
	// its connection's background read, the upstream connection's read
	// and write loops.
	if got := added[firstStackLimit] + added[4<<10] + added[2<<10] + larger; got < 3*heldRequests {
		t.Fatalf("only %d goroutines more for %d held requests: they are not all held in the gateway", got, heldRequests)
	}
	// A goroutine of the gateway's own (a writer, a watcher) that first
	// needs more between the two counts is not a request's: a few are let
	// pass. A doubling on the request path takes every held request's.
	if larger >= heldRequests/10 {
		t.Errorf("%d goroutines with a stack over %d KiB came with %d held requests (%v): something on the request path "+
			"now needs more than the handler's first 8 KiB, and every open request costs 8 KiB more or worse "+
			"(find the frame as BENCHMARKS.md describes under \"Follow-up (branch streams3)\")",
			larger, firstStackLimit>>10, heldRequests, added)
	}
}

// heldGateway is the real binary, built with the stack probe, in front
// of a holding upstream: the stack-margin and heap tests open batches of
// requests against it that stay open until the test ends.
type heldGateway struct {
	t      *testing.T
	up     *holdUpstream
	probe  string // the stack probe's address
	client *http.Client
	url    string
	held   sync.WaitGroup
}

// startHeldGateway starts the gateway (GOGC=off, the stack probe on, and
// env) and its upstream; every request it opened is released at the
// test's end.
func startHeldGateway(t *testing.T, env ...string) *heldGateway {
	t.Helper()
	g := &heldGateway{t: t, up: startHoldUpstream(t)}
	p, _ := startProcessWith(t, stackProbeBinary(t), stackMarginConfig(g.up.URL),
		append([]string{"GOGC=off", "GATEHOUSE_STACKPROBE_LISTEN=127.0.0.1:0"}, env...))
	g.probe = stackProbeAddr(t, p)
	g.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * heldRequests, DisableCompression: true}}
	t.Cleanup(g.client.CloseIdleConnections)
	g.url = "http://" + p.addr + "/v1/chat/completions"
	t.Cleanup(func() {
		g.up.release()
		g.held.Wait()
	})
	return g
}

// open opens n more requests and returns once each is held: a stream
// after its second event, another once the upstream has it.
func (g *heldGateway) open(n int, stream bool) {
	t, up := g.t, g.up
	t.Helper()
	errs := make(chan error, n)
	for range n {
		g.held.Add(1)
		go func() {
			defer g.held.Done()
			errs <- holdRequest(g.client, g.url, stream, up)
		}()
	}
	if stream {
		// Every stream has its first event: let each send its second,
		// so that the relay loop's whole cycle (the wait for an event,
		// its write, its flush) has run before anything is counted.
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		up.next()
		for range n {
			<-up.secondSent
		}
		for range n {
			if err := <-up.secondRead; err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	// A request that is not streamed waits for the upstream's answer:
	// the upstream has every request once the gateway's handler has
	// sent it and is waiting.
	for range n {
		select {
		case <-up.arrived:
		case err := <-errs:
			t.Fatalf("request ended while held: %v", err)
		}
	}
}

var probeBuild commandBuild

// stackProbeBinary builds, once per test run, gatehouse with the stack
// probe (stackprobe.go).
func stackProbeBinary(t *testing.T) string {
	t.Helper()
	return probeBuild.binary(t, "gatehouse with the stack probe", "-tags", "stackprobe", "-ldflags=-checklinkname=0")
}

// stackMarginConfig is the full stack as the streams benchmark runs it:
// a key with rpm, tpm and a budget out of reach (every request is
// estimated, admitted, reserved, settled and priced), usage records,
// metrics, no cache.
func stackMarginConfig(upstreamURL string) string {
	return `listen: 127.0.0.1:0
providers:
  - {name: up, type: openai-compatible, base_url: ` + upstreamURL + `/v1, api_key: ` + upstreamKey + `}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
keys:
  - {key: ` + clientKey + `, project: qa, rpm: 100000000, tpm: 1000000000000, budget: {usd: 1000000000, period: total}}
cache:
  exact: {enabled: false}
  semantic: {enabled: false}
`
}

// holdRequest sends one chat request. A streamed one returns once its
// first event is read, and reads the second in the background, reporting
// it on up.secondRead; one not streamed returns only when it ends.
func holdRequest(client *http.Client, url string, stream bool, up *holdUpstream) error {
	body := fmt.Sprintf(`{"model":"chat","stream":%t,"messages":[{"role":"user","content":"hold"}]}`, stream)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !stream {
		_, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	br := bufio.NewReader(resp.Body)
	if err := readEvent(br); err != nil {
		resp.Body.Close()
		return fmt.Errorf("first event: %w", err)
	}
	go func() {
		defer resp.Body.Close()
		up.secondRead <- readEvent(br)
		_, _ = io.Copy(io.Discard, br)
	}()
	return nil
}

// readEvent reads one SSE event with data.
func readEvent(br *bufio.Reader) error {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.HasPrefix(line, "data: {") {
			return nil
		}
	}
}

// holdUpstream is an OpenAI-compatible upstream that holds every request
// open until the test releases it, and says where each one is: a streamed
// request gets its headers and first event at once, its second when the
// test calls next, and the rest on release; one not streamed is answered
// on release.
type holdUpstream struct {
	URL        string
	arrived    chan struct{} // a request not streamed is being held
	secondSent chan struct{} // a stream's second event was flushed
	secondRead chan error    // the client read a stream's second event (holdRequest)

	mu        sync.Mutex
	nextCh    chan struct{}
	releaseCh chan struct{}
	released  bool
}

func startHoldUpstream(t *testing.T) *holdUpstream {
	t.Helper()
	const buffered = 4 * heldRequests
	u := &holdUpstream{
		arrived:    make(chan struct{}, buffered),
		secondSent: make(chan struct{}, buffered),
		secondRead: make(chan error, buffered),
		nextCh:     make(chan struct{}),
		releaseCh:  make(chan struct{}),
	}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	return u
}

// next lets every stream held at its first event send its second; the
// streams opened after it wait for the next call.
func (u *holdUpstream) next() {
	u.mu.Lock()
	defer u.mu.Unlock()
	close(u.nextCh)
	u.nextCh = make(chan struct{})
}

func (u *holdUpstream) nextSignal() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.nextCh
}

// release ends every held request.
func (u *holdUpstream) release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.released {
		close(u.releaseCh)
		u.released = true
	}
}

const holdChunk = `data: {"id":"chatcmpl-hold","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"delta":{"role":"assistant","content":"held"},"finish_reason":null}]}` + "\n\n"

const holdLastChunk = `data: {"id":"chatcmpl-hold","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` + "\n\n" +
	"data: [DONE]\n\n"

const holdAnswer = `{"id":"chatcmpl-hold","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"held"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

func (u *holdUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !bytes.Contains(body, []byte(`"stream":true`)) {
		u.arrived <- struct{}{}
		select {
		case <-u.releaseCh:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(holdAnswer)))
		_, _ = io.WriteString(w, holdAnswer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	next := u.nextSignal()
	_, _ = io.WriteString(w, holdChunk)
	http.NewResponseController(w).Flush()
	select {
	case <-next:
	case <-u.releaseCh:
	case <-r.Context().Done():
		return
	}
	_, _ = io.WriteString(w, holdChunk)
	http.NewResponseController(w).Flush()
	u.secondSent <- struct{}{}
	select {
	case <-u.releaseCh:
	case <-r.Context().Done():
		return
	}
	_, _ = io.WriteString(w, holdLastChunk)
}

// readProbe reads one of the stack-probe build's pages (/ for stack
// sizes, /heap, /heapprofile) and fails the test unless it answers 200.
func readProbe(t *testing.T, probe, path string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + probe + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stack probe %s: %d %v", path, resp.StatusCode, err)
	}
	return b
}

// stackSizes reads the stack probe: how many goroutines the gateway
// has of each stack size.
func stackSizes(t *testing.T, probe string) map[int]int {
	t.Helper()
	b := readProbe(t, probe, "/")
	sizes := map[int]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var size, n int
		if _, err := fmt.Sscanf(line, "%d %d", &size, &n); err != nil {
			t.Fatalf("stack probe line %q: %v", line, err)
		}
		sizes[size] = n
	}
	return sizes
}
