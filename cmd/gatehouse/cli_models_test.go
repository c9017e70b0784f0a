package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestModelsCommandTable runs gatehouse models list and get against a
// fixed admin answer: what each column makes of the fields.
func TestModelsCommandTable(t *testing.T) {
	const model = `{"model":"qwen3","strategy":"failover","mode":"local_first","fallbacks":[],"discovered":true,"deployments":[
		{"provider":"box","type":"ollama","model":"qwen3:latest","local":true,"weight":0,"allowed":true,"down":false,"health_checked":true,
		 "breaker":{"state":"half_open","since":"2026-03-01T11:00:00Z","until":null},"cooling_until":null,"latency_ms":12.54,
		 "attempts":3,"failures":1,"error_rate":0.3333,"window_seconds":60,"in_flight_requests":2,"in_flight_tokens":900},
		{"provider":"cloud","type":"openai","model":"gpt-4o","local":false,"weight":0,"allowed":false,"down":false,"health_checked":false,
		 "breaker":{"state":"closed","since":null,"until":null},"cooling_until":null,"latency_ms":null,
		 "attempts":0,"failures":0,"error_rate":null,"window_seconds":60,"in_flight_requests":0,"in_flight_tokens":0}]}`
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/admin/models" {
			_, _ = io.WriteString(w, `{"object":"list","has_more":false,"data":[`+model+`]}`)
			return
		}
		_, _ = io.WriteString(w, model)
	}))
	defer srv.Close()
	flags := adminFlags{Addr: srv.URL, AdminKey: "k"}

	var out bytes.Buffer
	if err := (&modelsListCmd{adminFlags: flags}).run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "MODEL ") {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, wants := range [][]string{
		{"qwen3 (discovered)", "failover/local_first", " box ", "qwen3:latest", " up ", "half_open", "1/3 (33%)", "12.5ms", "2 req, 900 tok"},
		{"qwen3 (discovered)", " cloud ", "gpt-4o", " excluded ", " closed ", "0 req, 0 tok"},
	} {
		for _, want := range wants {
			if !strings.Contains(lines[i+1], want) {
				t.Errorf("row %d lacks %q: %s", i+1, want, lines[i+1])
			}
		}
	}

	out.Reset()
	flags.JSON = true
	if err := (&modelsListCmd{adminFlags: flags}).run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list) != 1 || list[0]["model"] != "qwen3" {
		t.Fatalf("list --json is not the array of models: %v\n%s", err, out.String())
	}

	out.Reset()
	flags.JSON = false
	if err := (&modelsGetCmd{adminFlags: flags, Model: "box/qwen3"}).run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "12.5ms") {
		t.Fatalf("get:\n%s", out.String())
	}
	mu.Lock()
	last := paths[len(paths)-1]
	mu.Unlock()
	if last != "/admin/models/box%2Fqwen3" {
		t.Fatalf("get asked for %s", last)
	}
}
