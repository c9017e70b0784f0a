package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/mockllm"
)

// TestLimitsChangesTakeEffect: a key's limits are made once into a
// template its requests share (server.principalTemplate), and every
// change reaches the next requests all the same: a reload that changes
// a config key's rpm and budget or gives it a rate for its model, an
// admin edit of a project's rate, its budget and its name, and a
// customer's budget on top of the key's.
func TestLimitsChangesTakeEffect(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	keyed := func(limits string) string {
		return limitsConfig(up, "  - {key: "+clientKey+", name: tester, project: qa, "+limits+"}\n", "admin_key: "+testAdminKey+"\n")
	}
	gw := startGateway(t, keyed("rpm: 50, tpm: 100000, budget: {usd: 5, period: total}"))
	client := burstClient(gw.URL, clientKey)
	// eventually waits (a second at most) for a request of c whose
	// outcome passes check, for the admin API's changes, which reach the
	// request path through the key's cache.
	eventually := func(what string, c func() outcome, check func(o outcome) bool) outcome {
		t.Helper()
		var o outcome
		for start := time.Now(); time.Since(start) < time.Second; time.Sleep(20 * time.Millisecond) {
			if o = c(); check(o) {
				return o
			}
		}
		t.Fatalf("%s: last answer %d %q, headers %v", what, o.status, o.msg, o.header)
		return o
	}
	chat := func() outcome { return chatOnce(context.Background(), client, "chat") }
	budgetLeft := func(o outcome) float64 {
		v, err := strconv.ParseFloat(o.header.Get("X-Gatehouse-Budget-Remaining-Usd"), 64)
		if err != nil {
			t.Fatalf("budget header %q: %v", o.header.Get("X-Gatehouse-Budget-Remaining-Usd"), err)
		}
		return v
	}
	expect := func(what string, o outcome, rpm string, budgetBelow float64) {
		t.Helper()
		if o.status != 200 || o.header.Get("X-Ratelimit-Limit-Requests") != rpm {
			t.Fatalf("%s: status %d, x-ratelimit-limit-requests %q, want 200 and %s", what, o.status, o.header.Get("X-Ratelimit-Limit-Requests"), rpm)
		}
		if left := budgetLeft(o); left >= budgetBelow || left < budgetBelow-1 {
			t.Fatalf("%s: budget left %v, want just under %v", what, left, budgetBelow)
		}
	}
	for range 2 { // the second from the template the first made
		expect("before the reload", chat(), "50", 5)
	}

	reload := func(yaml string) {
		t.Helper()
		n := strings.Count(gw.Logs.String(), "config reloaded")
		replaceFile(t, gw.Path, yaml)
		waitFor(t, 30*time.Second, "the reload", func() bool { return strings.Count(gw.Logs.String(), "config reloaded") > n })
	}
	reload(keyed("rpm: 60, tpm: 100000, budget: {usd: 7, period: total}"))
	expect("rpm and budget reloaded", chat(), "60", 7)
	reload(keyed("rpm: 60, tpm: 100000, budget: {usd: 7, period: total}, model_limits: {chat: {rpm: 3}}"))
	expect("a rate for the model reloaded", chat(), "3", 7)

	// A virtual key of a project whose rate, budget and name change.
	proj := adminPost(t, gw.URL, "/admin/projects", `{"name":"shop","rpm":40}`)
	key := adminPost(t, gw.URL, "/admin/keys", `{"project":"shop","name":"app"}`)["key"].(string)
	c := gw.client(option.WithAPIKey(key))
	vchat := func() outcome { return chatOnce(context.Background(), c, "chat") }
	for range 2 {
		if o := vchat(); o.status != 200 || o.header.Get("X-Ratelimit-Limit-Requests") != "40" {
			t.Fatalf("project rate: %d %v", o.status, o.header)
		}
	}
	id := proj["id"].(string)
	adminDo(t, gw.URL, "PATCH", "/admin/projects/"+id, `{"rpm":30}`, 200)
	eventually("project rate edited", vchat, func(o outcome) bool {
		return o.status == 200 && o.header.Get("X-Ratelimit-Limit-Requests") == "30"
	})
	adminDo(t, gw.URL, "PATCH", "/admin/projects/"+id, `{"budget":{"usd":0,"period":"total"}}`, 200)
	eventually("project budget edited", vchat, func(o outcome) bool {
		return o.status == 429 && strings.Contains(o.msg, "budget of project shop (total)")
	})
	adminDo(t, gw.URL, "PATCH", "/admin/projects/"+id, `{"name":"store"}`, 200)
	eventually("project renamed", vchat, func(o outcome) bool {
		return o.status == 429 && strings.Contains(o.msg, "budget of project store (total)")
	})
	adminDo(t, gw.URL, "PATCH", "/admin/projects/"+id, `{"budget":null}`, 200)
	eventually("project budget removed", vchat, func(o outcome) bool {
		return o.status == 200 && o.header.Get("X-Gatehouse-Budget-Remaining-Usd") == ""
	})

	// A customer's budget, on top of the key's template.
	adminPost(t, gw.URL, "/admin/customers", `{"project":"store","external_id":"dave","daily_usd":0,"on_exceed":"block"}`)
	if o := chatOnce(context.Background(), c, "chat", option.WithHeader("X-Gatehouse-Customer", "dave")); o.status != 429 || !strings.Contains(o.msg, "customer dave") {
		t.Fatalf("customer over budget: %d %q", o.status, o.msg)
	}
	if o := vchat(); o.status != 200 || o.header.Get("X-Ratelimit-Limit-Requests") != "30" {
		t.Fatalf("after the customer's refusal, without a customer: %d %v", o.status, o.header)
	}
}
